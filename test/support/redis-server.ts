import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, retryOnTakenPort, stopChild } from '../../sample-workflows/services';

/** A redis-server this test spawned itself, on a free loopback port. */
export interface SpawnedRedis {
  readonly port: number;
  /** `redis://` or `rediss://` (TLS) URL of the server, without credentials. */
  readonly url: string;
  /** A scratch directory of its own, removed by stop(). */
  readonly dir: string;
  /** Everything the server wrote so far, for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

const HOW_TO_GET_REDIS = 'Install redis-server (Debian/Ubuntu: `apt-get install -y redis-server`; macOS: `brew install redis`).';

/**
 * Spawn `redis-server` with `args` on a free port (no persistence) and wait until it says it is
 * ready. With `tls`, the port is a TLS port and plain TCP is off; `args` must then carry the
 * certificate options. Tests use this, not the suite's shared Redis, whenever they change server
 * state (passwords, ACL users, replicas, maxmemory, TLS) so that no other test can see it.
 */
export async function spawnRedisServer(args: readonly string[] = [], options: { readonly tls?: boolean } = {}): Promise<SpawnedRedis> {
  if (spawnSync('redis-server', ['--version']).error) {
    throw new Error(`redis-server is not on PATH; these tests start their own servers. ${HOW_TO_GET_REDIS}`);
  }
  return retryOnTakenPort(
    () => spawnOnce(args, options),
    (err) => err instanceof PortTaken,
  );
}

/** redis-server exited because its port was taken. */
class PortTaken extends Error {}

async function spawnOnce(args: readonly string[], options: { readonly tls?: boolean }): Promise<SpawnedRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fire-once-bad-input-'));
  const listen = options.tls ? ['--port', '0', '--tls-port', String(port)] : ['--port', String(port)];
  const child = spawn('redis-server', [...listen, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
      const timer = setTimeout(() => reject(new Error(`redis-server on port ${port} was not ready after 10 s:\n${output}`)), 10_000);
      const onData = () => {
        if (!output.includes('Ready to accept connections')) return;
        clearTimeout(timer);
        resolve();
      };
      child.stdout.on('data', onData);
      child.once('exit', (code) => {
        clearTimeout(timer);
        const Failure = output.includes('Address already in use') ? PortTaken : Error;
        reject(new Failure(`redis-server exited with ${code} before it was ready (args ${args.join(' ')}):\n${output}`));
      });
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { port, url: `${options.tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`, dir, output: () => output, stop };
}
