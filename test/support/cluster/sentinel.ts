import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, retryOnTakenPort, stopChild } from '../../../sample-workflows/services';
import { REPLICATION_PACE, waitFor } from '../wait';

/** One spawned redis-server, data node or sentinel. */
export interface RedisProcess {
  readonly port: number;
  readonly child: ChildProcess;
}

/** A master, its replica and three sentinels on localhost, as docs/deployment.md ("Sentinel") describes them. */
export interface SentinelGroup {
  /** The master group name the sentinels monitor. */
  readonly name: string;
  readonly master: RedisProcess;
  readonly replica: RedisProcess;
  readonly sentinels: readonly RedisProcess[];
  /** Addresses for `new Redis({ sentinels, name })`. */
  readonly sentinelAddresses: readonly { host: string; port: number }[];
  /** A plain connection to one port (a data node or a sentinel); the caller closes it. */
  connect(port: number): Redis;
  /** The master's port as the sentinels report it now. */
  masterPort(): Promise<number>;
  /** The redis-server process running on `port` now (a node brought back has a new one). */
  node(port: number): RedisProcess;
  /**
   * Start the data node of `port` again (after a SIGKILL), on the same port and dir, as a replica
   * of `masterPort`, and wait until the group has settled: the sentinels name one of the two data
   * nodes the master, the other is in sync with it, and every sentinel counts that one as a
   * healthy replica, so that the next failover can promote it. (The sentinels may fail over once
   * more meanwhile, e.g. when a loaded machine delays a PING past down-after: then the roles are
   * swapped, which is fine.)
   */
  rejoin(port: number, masterPort: number): Promise<RedisProcess>;
  stop(): Promise<void>;
}

/** How the sentinels judge the master. */
export interface SentinelOptions {
  /** `sentinel down-after-milliseconds`. @defaultValue 1000 */
  readonly downAfterMs?: number;
  /** `sentinel failover-timeout`; a sentinel waits twice this before it retries a failover. @defaultValue 10000 */
  readonly failoverTimeoutMs?: number;
  /** Picks each process's port; `freePort` unless a test stands in a taken one. */
  readonly pickPort?: () => Promise<number>;
}

const HOST = '127.0.0.1';

/**
 * Spawn a master, one replica of it and three sentinels (quorum 2, down-after 1000 ms), all
 * without persistence, and wait until the replica is in sync and every sentinel knows the
 * replica and the two other sentinels. Sentinels run as `redis-server <conf> --sentinel`, which
 * is what the `redis-sentinel` binary is, so only redis-server is needed.
 */
export function startSentinelGroup(name = 'mymaster', options: SentinelOptions = {}): Promise<SentinelGroup> {
  // A port found free can be taken before the process binds it: start the whole group again.
  return retryOnTakenPort(
    () => startOnce(name, options),
    (err) => err instanceof ExitedWhileStarting,
  );
}

/** A process of the group exited while the group was starting, most likely because its port was taken. */
class ExitedWhileStarting extends Error {}

async function startOnce(name: string, options: SentinelOptions): Promise<SentinelGroup> {
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  const nodes = new Map<number, RedisProcess & { readonly dir: string }>();
  const stop = async () => {
    await Promise.all(children.map((c) => stopChild(c)));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  };
  const connect = (port: number) => {
    const client = new Redis({ host: HOST, port, maxRetriesPerRequest: 1, retryStrategy: () => null });
    client.on('error', () => undefined);
    return client;
  };
  let exited: ExitedWhileStarting | undefined;
  const watch = (child: ChildProcess, port: number) => {
    children.push(child);
    child.once('exit', (code, signal) => {
      exited ??= new ExitedWhileStarting(`redis-server on port ${port} exited (${code ?? signal}) while the group was starting`);
    });
  };
  /** Wait for `check` while the group starts; throws {@link ExitedWhileStarting} as soon as one of its processes is gone. */
  const whileStarting = async (what: string, check: () => Promise<boolean>) => {
    await waitFor(what, async () => exited !== undefined || (await check()), REPLICATION_PACE);
    if (exited) throw exited;
  };
  const spawnServer = (port: number, args: string[], dir = mkdtempSync(join(tmpdir(), 'fire-once-sentinel-'))): RedisProcess => {
    if (!dirs.includes(dir)) dirs.push(dir);
    const child = spawn('redis-server', [...args.map((a) => a.replace('$DIR', dir))], { stdio: 'ignore' });
    watch(child, port);
    nodes.set(port, { port, child, dir });
    return { port, child };
  };
  try {
    const pickPort = options.pickPort ?? freePort;
    const [firstMasterPort, replicaPort] = [await pickPort(), await pickPort()];
    const data = (port: number) => ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--dir', '$DIR'];
    const master = spawnServer(firstMasterPort, data(firstMasterPort));
    const replica = spawnServer(replicaPort, [...data(replicaPort), '--replicaof', HOST, String(firstMasterPort)]);
    await whileStarting('the replica to sync', async () => /master_link_status:up/.test(await info(connect, replicaPort, 'replication')));

    const sentinels: RedisProcess[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await pickPort();
      const dir = mkdtempSync(join(tmpdir(), 'fire-once-sentinel-'));
      dirs.push(dir);
      const conf = join(dir, 'sentinel.conf'); // sentinels rewrite their config, so each has its own
      writeFileSync(
        conf,
        [
          `port ${port}`,
          `bind ${HOST}`,
          `dir ${dir}`,
          `sentinel monitor ${name} ${HOST} ${firstMasterPort} 2`,
          `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1000}`,
          `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? 10000}`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      const child = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
      watch(child, port);
      sentinels.push({ port, child });
    }
    await whileStarting('the sentinels to discover the replica and each other', async () => {
      for (const s of sentinels) {
        const client = connect(s.port);
        try {
          const [master] = (await client.call('SENTINEL', 'MASTERS')) as string[][];
          const fields = Object.fromEntries(Array.from({ length: master.length / 2 }, (_, i) => [master[2 * i], master[2 * i + 1]]));
          if (fields['num-slaves'] !== '1' || fields['num-other-sentinels'] !== '2') return false;
        } finally {
          client.disconnect();
        }
      }
      return true;
    });

    /** Every sentinel lists `port` as a replica with no flag but `slave` (not down, not disconnected). */
    const healthyReplicaEverywhere = async (port: number) => {
      for (const s of sentinels) {
        const client = connect(s.port);
        try {
          const replicas = (await client.call('SENTINEL', 'REPLICAS', name)) as string[][];
          const flags = replicas
            .map((r) => Object.fromEntries(Array.from({ length: r.length / 2 }, (_, i) => [r[2 * i], r[2 * i + 1]])))
            .find((f) => f.port === String(port))?.flags;
          if (flags !== 'slave') return false;
        } finally {
          client.disconnect();
        }
      }
      return true;
    };

    const masterPort = async (): Promise<number> => {
      for (const s of sentinels) {
        const client = connect(s.port);
        try {
          const addr = (await client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [string, string] | null;
          if (addr) return Number(addr[1]);
        } catch {
          // ask the next sentinel
        } finally {
          client.disconnect();
        }
      }
      throw new Error('no sentinel answered GET-MASTER-ADDR-BY-NAME');
    };

    /** The sentinels name a master among the data nodes, and the other one is its healthy, in-sync replica. */
    const settled = async (): Promise<boolean> => {
      const current = await masterPort();
      const other = [...nodes.keys()].find((p) => p !== current);
      if (other === undefined || !nodes.has(current)) return false;
      const text = await info(connect, other, 'replication');
      return new RegExp(`master_port:${current}\\b`).test(text) && /master_link_status:up/.test(text) && (await healthyReplicaEverywhere(other));
    };

    return {
      name,
      master,
      replica,
      sentinels,
      sentinelAddresses: sentinels.map((s) => ({ host: HOST, port: s.port })),
      connect,
      masterPort,
      node: (port) => {
        const node = nodes.get(port);
        if (!node) throw new Error(`no data node on port ${port}`);
        return node;
      },
      rejoin: async (port, rejoinMaster) => {
        const old = nodes.get(port);
        if (!old) throw new Error(`no data node on port ${port}`);
        if (old.child.exitCode === null && old.child.signalCode === null) throw new Error(`the data node on port ${port} is still running`);
        const node = spawnServer(port, [...data(port), '--replicaof', HOST, String(rejoinMaster)], old.dir);
        try {
          await waitFor(`the group to settle after ${port} rejoined`, settled, { ...REPLICATION_PACE, timeoutMs: 90_000 });
        } catch (err) {
          // What the node and its master say, for the failure message.
          const replication = (p: number) => info(connect, p, 'replication').then((text) => text.replace(/\r?\n/g, ' '));
          throw new Error(`${(err as Error).message}; node ${port}: ${await replication(port)}; node ${rejoinMaster}: ${await replication(rejoinMaster)}`);
        }
        return node;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** INFO `section` of the node on `port`, or '' when it does not answer. */
export async function info(connect: (port: number) => Redis, port: number, section: string): Promise<string> {
  const client = connect(port);
  try {
    return await client.info(section);
  } catch {
    return '';
  } finally {
    client.disconnect();
  }
}
