import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { ServiceUnavailableError } from './errors';

/**
 * Where a Redis came from: `REDIS_URL`, `redis-server` on PATH, or (the demo only) the embedded
 * one that redis-memory-server runs.
 */
export type RedisSource = 'env' | 'path' | 'embedded';

/** A Redis the caller can use, and how to stop it if we started it. */
export interface RedisService {
  readonly url: string;
  /** True when we started the redis-server ourselves (no REDIS_URL). */
  readonly spawned: boolean;
  readonly source: RedisSource;
  /** Which Redis this is, for the one line that says so: `redis-server from PATH (/usr/bin/redis-server)`. */
  readonly description: string;
  stop(): Promise<void>;
}

/** How to get a Redis; every "no Redis" message ends with it. */
export const HOW_TO_GET_REDIS =
  'Install redis-server (Debian/Ubuntu: `apt-get install -y redis-server`; macOS: `brew install redis`), ' +
  'or start one with `docker compose up -d redis` and set REDIS_URL=redis://127.0.0.1:6379.';

/** What {@link startRedis} may do. */
export interface StartRedisOptions {
  /** Extra `redis-server` arguments for a Redis we start (not for `REDIS_URL`). */
  readonly extraArgs?: readonly string[];
  /**
   * With neither `REDIS_URL` nor `redis-server` on PATH, fall back to redis-memory-server (see
   * `embedded-redis.ts`). Only the demo sets it: the tests and benches fail with how to get Redis.
   * @defaultValue false
   */
  readonly embeddedFallback?: boolean;
  /** Told what is happening while a slow fallback runs (the first embedded run builds Redis). */
  readonly progress?: (line: string) => void;
}

/** A free TCP port on the loopback interface. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * Run `spawn` again while it fails with an error `portTaken` accepts, at most 3 times in all:
 * a port {@link freePort} found free can be taken before the server binds it (servers start side
 * by side, and every outgoing connection takes a local port from the same range). `spawn` must
 * pick its ports anew on each call.
 */
export async function retryOnTakenPort<T>(spawn: () => Promise<T>, portTaken: (err: unknown) => boolean): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawn();
    } catch (err) {
      if (!portTaken(err) || attempt === 3) throw err;
    }
  }
}

/**
 * Use `REDIS_URL` when it is set; otherwise spawn `redis-server` from PATH on a free port, with
 * no persistence, and stop it in `stop()`; otherwise, with `embeddedFallback`, run one through
 * redis-memory-server. Throws {@link ServiceUnavailableError} saying how to get Redis when none
 * of these works.
 */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisService> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    await ping(fromEnv, `REDIS_URL=${fromEnv} did not answer PING. ${HOW_TO_GET_REDIS}`);
    return { url: fromEnv, spawned: false, source: 'env', description: 'REDIS_URL', stop: async () => undefined };
  }
  const onPath = redisServerOnPath();
  if (onPath === undefined) {
    if (options.embeddedFallback) {
      // Loaded here only: nothing but the demo's last resort loads redis-memory-server.
      const { startEmbeddedRedis } = await import('./embedded-redis');
      return startEmbeddedRedis({ extraArgs: options.extraArgs ?? [], progress: options.progress ?? (() => undefined) });
    }
    throw new ServiceUnavailableError(`redis-server is not on PATH and REDIS_URL is not set. ${HOW_TO_GET_REDIS}`);
  }
  const server = await spawnRedisServerOnFreePort(options.extraArgs ?? []);
  return { url: server.url, spawned: true, source: 'path', description: `redis-server from PATH (${onPath})`, stop: server.stop };
}

/** A `redis-server` spawned on a free loopback port, with no persistence and a directory of its own. */
export interface SpawnedRedisServer {
  readonly port: number;
  /** Its TLS port, with the `tlsPort` option. */
  readonly tlsPort?: number;
  /** `redis://` or `rediss://` (TLS) URL of the server, without credentials. */
  readonly url: string;
  /** Its scratch directory, removed by `stop()`. */
  readonly dir: string;
  /** Everything the server wrote so far, for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

/** redis-server exited because its port was taken. */
class PortTaken extends Error {}

/**
 * Spawn `redis-server` with `args` on a free port and resolve once it says it is ready to accept
 * connections. Waiting for its own words, not for a PING, matters: if the port was taken in the
 * meantime, a PING would be answered by whoever took it. A server that exits because its port
 * was taken is started again on a new port ({@link retryOnTakenPort}). With `tls`, the port is a
 * TLS port and plain TCP is off; `args` must then carry the certificate options.
 */
export function spawnRedisServerOnFreePort(args: readonly string[], options: SpawnOptions = {}): Promise<SpawnedRedisServer> {
  return retryOnTakenPort(
    () => spawnOnce(args, options),
    (err) => err instanceof PortTaken,
  );
}

/** How {@link spawnRedisServerOnFreePort} listens. */
export interface SpawnOptions {
  /** Listen on a TLS port only. */
  readonly tls?: boolean;
  /**
   * Run in cluster mode, with a cluster bus port of its own picked on each attempt like the
   * client port (the default, port + 10000, may be taken or above 65535).
   */
  readonly clusterBus?: boolean;
  /**
   * Also listen for TLS on a port of its own, picked on each attempt ({@link SpawnedRedisServer.tlsPort}),
   * beside the plain port; `args` must carry the certificate options.
   */
  readonly tlsPort?: boolean;
  /**
   * Run as a sentinel (`redis-server <config> --sentinel`) whose config file holds these lines
   * after its port, bind and dir; `args` follow `--sentinel`. It is ready once it names its ID.
   */
  readonly sentinel?: readonly string[];
  /** Picks the ports of each attempt; {@link freePort} unless a test stands in a taken one. */
  readonly pickPort?: () => Promise<number>;
}

async function spawnOnce(args: readonly string[], options: SpawnOptions): Promise<SpawnedRedisServer> {
  const pickPort = options.pickPort ?? freePort;
  const port = await pickPort();
  const dir = mkdtempSync(join(tmpdir(), 'fire-once-redis-'));
  const tlsPort = options.tlsPort ? await pickPort() : undefined;
  const busPort = options.clusterBus ? await pickPort() : undefined;
  const command = options.sentinel
    ? sentinelCommand(port, dir, options.sentinel, args)
    : serverCommand({ port, tlsPort, busPort, tls: options.tls }, dir, args);
  const ready = options.sentinel ? 'Sentinel ID is' : 'Ready to accept connections';
  const child = spawn('redis-server', command, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const append = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout.on('data', append);
  child.stderr.on('data', append);
  const stop = async () => {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new ServiceUnavailableError(`redis-server on port ${port} was not ready after 10 s:\n${output}`)), 10_000);
      child.stdout.on('data', () => {
        if (!output.includes(ready)) return;
        clearTimeout(timer);
        resolve();
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        const Failure = output.includes('Address already in use') ? PortTaken : ServiceUnavailableError;
        reject(new Failure(`redis-server exited with ${code} before it was ready (args ${args.join(' ')}):\n${output}`));
      });
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    port,
    ...(tlsPort === undefined ? {} : { tlsPort }),
    url: `${options.tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`,
    dir,
    output: () => output,
    stop,
  };
}

/** The ports of one data node: its client port (a TLS one with `tls`), and a TLS and a cluster bus port beside it if set. */
interface NodePorts {
  readonly port: number;
  readonly tlsPort: number | undefined;
  readonly busPort: number | undefined;
  readonly tls: boolean | undefined;
}

/** A data node's command line: no persistence, its own dir, and the ports it listens on. */
function serverCommand({ port, tlsPort, busPort, tls }: NodePorts, dir: string, args: readonly string[]): string[] {
  const listen = tls
    ? ['--port', '0', '--tls-port', String(port)]
    : ['--port', String(port), ...(tlsPort === undefined ? [] : ['--tls-port', String(tlsPort)])];
  const bus = busPort === undefined ? [] : ['--cluster-enabled', 'yes', '--cluster-port', String(busPort)];
  return [...listen, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...bus, ...args];
}

/** A sentinel's command line, with a config file of its own in `dir`: a sentinel rewrites it. */
function sentinelCommand(port: number, dir: string, lines: readonly string[], args: readonly string[]): string[] {
  const config = join(dir, 'sentinel.conf');
  writeFileSync(config, [`port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, ...lines, ''].join('\n'));
  return [config, '--sentinel', ...args];
}

/** The `redis-server` that PATH finds and that runs, or `undefined`. */
function redisServerOnPath(): string | undefined {
  if (spawnSync('redis-server', ['--version']).error) return undefined;
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  return which.stdout?.trim() || 'redis-server';
}

/** Resolve once `url` answers PING; reject with `failure` after 10 s or if `child` exits first. */
export async function ping(url: string, failure: string, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child?.exitCode != null) throw new ServiceUnavailableError(failure);
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.ping();
      return;
    } catch {
      if (Date.now() > deadline) throw new ServiceUnavailableError(failure);
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      client.disconnect();
    }
  }
}

/** SIGTERM a child and wait for it to exit (SIGKILL after 5 s). */
export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
