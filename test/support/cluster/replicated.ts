import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import type { DispatchTarget, FireOnceGuard } from '../../../src';
import { keySlot } from './cluster';
import { spawnRedisServer, type SpawnedRedis } from '../redis-server';
import { REPLICATION_PACE, waitFor } from '../wait';

/** A node's address, as ioredis and `redis-cli` take it. */
export interface NodeAddress {
  readonly host: string;
  readonly port: number;
}

/** A Redis Cluster of this test's own: three masters, the first of them with one replica. */
export interface ReplicatedCluster {
  readonly masters: readonly NodeAddress[];
  /** The replica of `masters[0]`. */
  readonly replica: NodeAddress;
  /**
   * With `{ spare: true }`: a fourth master, joined with no slot, as a node added to grow a cluster
   * is. No client learns of it from `CLUSTER SLOTS` until a slot is moved to it.
   */
  readonly spare?: NodeAddress;
  /** A plain connection to one node (no redirects followed); closed by `stop()`. */
  node(address: NodeAddress): Redis;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';

/**
 * Spawn four redis-server processes in cluster mode, join three as masters with
 * `redis-cli --cluster create` and the fourth as a replica of the first, and wait until every
 * node reports `cluster_state:ok` and the replica acknowledges the first master's writes. The
 * suite's shared cluster has no replica, and its slots must not move under other test files.
 * With `spare`, a fifth joins as a master without slots (`redis-cli --cluster add-node`).
 */
export async function startReplicatedCluster(options: { readonly spare?: boolean } = {}): Promise<ReplicatedCluster> {
  const servers: SpawnedRedis[] = [];
  const connections = new Map<number, Redis>();
  const node = (address: NodeAddress) => {
    const existing = connections.get(address.port);
    if (existing) return existing;
    const client = new Redis({ host: address.host, port: address.port, maxRetriesPerRequest: 1 });
    connections.set(address.port, client);
    return client;
  };
  const stop = async () => {
    for (const client of connections.values()) client.disconnect();
    await Promise.all(servers.map((s) => s.stop()));
  };
  try {
    for (let i = 0; i < (options.spare ? 5 : 4); i++) {
      // A master whose last slot moves away stays a master (by default it turns replica): the
      // spare gives back the slot a test moved to it and stays unknown to clients.
      const flags = ['--cluster-node-timeout', '5000', '--cluster-allow-replica-migration', 'no'];
      servers.push(await spawnRedisServer(flags, { clusterBus: true }));
    }
    const [first, ...rest] = servers.map(({ port }) => ({ host: HOST, port }));
    const masters = [first, rest[0], rest[1]];
    const [replica, spare] = [rest[2], rest[3] as NodeAddress | undefined];
    cli('--cluster', 'create', ...masters.map(text), '--cluster-replicas', '0', '--cluster-yes');
    cli('--cluster', 'add-node', text(replica), text(first), '--cluster-slave', '--cluster-master-id', (await node(first).cluster('MYID')) as string);
    if (spare) cli('--cluster', 'add-node', text(spare), text(first));
    for (const address of [...masters, replica, ...(spare ? [spare] : [])]) {
      await waitFor(
        `${text(address)} to report cluster_state:ok`,
        async () => /cluster_state:ok/.test((await node(address).cluster('INFO')) as string),
        REPLICATION_PACE,
      );
    }
    await waitFor('the replica to acknowledge the first master', async () => (await node(first).wait(1, 100)) === 1, REPLICATION_PACE);
    return { masters, replica, ...(spare ? { spare } : {}), node, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A {@link ReplicatedCluster} for the tests of one `describe`: spawned before them, stopped after; call the result in a test or hook. */
export function useReplicatedCluster(options: { readonly spare?: boolean } = {}): () => ReplicatedCluster {
  let spawned: ReplicatedCluster | undefined;
  beforeAll(async () => {
    spawned = await startReplicatedCluster(options);
  }, 60_000);
  afterAll(() => spawned?.stop());
  return () => {
    if (spawned === undefined) throw new Error('the cluster did not start (see beforeAll)');
    return spawned;
  };
}

/** ASK, TRYAGAIN and MOVED replies of every master of `cluster` (the spare too) since they started. */
export async function detourReplies(cluster: ReplicatedCluster): Promise<number> {
  const all = [...cluster.masters, ...(cluster.spare ? [cluster.spare] : [])];
  const counts = await Promise.all(all.flatMap((node) => ['ASK', 'TRYAGAIN', 'MOVED'].map((type) => errorReplies(cluster, node, type))));
  return counts.reduce((a, b) => a + b, 0);
}

/** A Cluster client of `cluster`'s masters that has read the slot map, as a client in use a while has. */
export async function clientOf(cluster: ReplicatedCluster): Promise<Cluster> {
  const client = new Cluster([...cluster.masters]);
  await client.ping();
  return client;
}

/**
 * Move `slot` from `source` to `target` by hand, as `redis-cli --cluster reshard` does
 * (SETSLOT IMPORTING and MIGRATING, MIGRATE, SETSLOT NODE on every master). With `keys`, stop half
 * way: the slot is left migrating with just those keys moved, so the source answers `ASK` for
 * them (and for any key it does not hold). Without, every key moves and a client whose slot map
 * still names the source is answered `MOVED`.
 */
export async function migrateSlot(cluster: ReplicatedCluster, slot: number, source: NodeAddress, target: NodeAddress, keys?: readonly string[]): Promise<void> {
  const [from, to] = [cluster.node(source), cluster.node(target)];
  const [fromId, toId] = [(await from.cluster('MYID')) as string, (await to.cluster('MYID')) as string];
  await to.cluster('SETSLOT', slot, 'IMPORTING', fromId);
  await from.cluster('SETSLOT', slot, 'MIGRATING', toId);
  const moving = keys ?? ((await from.cluster('GETKEYSINSLOT', slot, 1000)) as string[]);
  if (moving.length > 0) await from.migrate(target.host, target.port, '', 0, 5_000, 'KEYS', ...moving);
  if (keys !== undefined) return;
  for (const address of [target, ...cluster.masters, ...(cluster.spare ? [cluster.spare] : [])])
    await cluster.node(address).cluster('SETSLOT', slot, 'NODE', toId);
}

/** A fresh target whose scope the master at `owner` serves in `cluster`'s slot map, and its slot. */
export async function targetOn(cluster: Cluster, guard: FireOnceGuard, owner: NodeAddress): Promise<{ target: DispatchTarget; slot: number }> {
  const ranges = await cluster.cluster('SLOTS');
  for (;;) {
    const target = { scope: `s-${randomUUID()}`, step: 'dispatch', jobType: 'job' };
    const slot = keySlot(guard.keys.lock(target.scope, target.step));
    if (ranges.some(([from, to, node]) => slot >= from && slot <= to && node[1] === owner.port)) return { target, slot };
  }
}

/** Calls of `command` (e.g. `wait`) that the node at `address` has served since it started. */
export async function commandCalls(cluster: ReplicatedCluster, address: NodeAddress, command: string): Promise<number> {
  const stats = await cluster.node(address).info('commandstats');
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
}

/** Errors of `type` (e.g. `TRYAGAIN`) that the node at `address` has replied since it started. */
export async function errorReplies(cluster: ReplicatedCluster, address: NodeAddress, type: string): Promise<number> {
  const stats = await cluster.node(address).info('errorstats');
  return Number(new RegExp(`errorstat_${type}:count=(\\d+)`).exec(stats)?.[1] ?? 0);
}

function cli(...args: string[]): void {
  const run = spawnSync('redis-cli', args, { encoding: 'utf8', timeout: 60_000 });
  if (run.error || run.status !== 0) {
    throw new Error(`redis-cli ${args.join(' ')} failed (exit ${run.status}): ${run.error?.message ?? ''}${run.stdout}${run.stderr}`);
  }
}

const text = (address: NodeAddress) => `${address.host}:${address.port}`;
