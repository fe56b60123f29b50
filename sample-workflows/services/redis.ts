import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fire-once-redis-'));
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...(options.extraArgs ?? [])],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  try {
    await ping(url, `redis-server did not start on port ${port}. ${HOW_TO_GET_REDIS}`, child);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    url,
    spawned: true,
    source: 'path',
    description: `redis-server from PATH (${onPath})`,
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
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
