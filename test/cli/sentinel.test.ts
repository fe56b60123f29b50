import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, stopChild } from '../../sample-workflows/services';
import { FireOnceGuard } from '../../src';
import { EXIT } from '../../src/cli/exit-codes';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { waitFor } from '../support/wait';
import { runCli } from './run-cli';

// Behind Sentinel, the address operators have at hand is often a sentinel's. A sentinel answers
// PING and INFO but holds no keys and runs no scripts: the CLI must say that it was given a
// sentinel, and which master to give it instead, not judge the sentinel as a data node.
jest.setTimeout(120_000);

describe('fire-once CLI given a Redis Sentinel instead of a data node', () => {
  let dir: string;
  let sentinel: ChildProcess | undefined;
  let sentinelUrl: string;
  let master: { host: string; port: number };
  const redis = connectRedis();
  const prefix = testPrefix('sentinel');

  beforeAll(async () => {
    master = { host: redis.options.host ?? '127.0.0.1', port: redis.options.port ?? 6379 };
    dir = mkdtempSync(join(tmpdir(), 'fire-once-cli-sentinel-'));
    const port = await freePort();
    writeFileSync(join(dir, 'sentinel.conf'), `port ${port}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor orders ${master.host} ${master.port} 1\n`);
    sentinel = spawn('redis-server', [join(dir, 'sentinel.conf'), '--sentinel'], { stdio: 'ignore' });
    sentinelUrl = `redis://127.0.0.1:${port}`;
    const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => undefined);
    await waitFor('the sentinel to answer', async () => {
      if (probe.status !== 'ready') await probe.connect();
      return (await probe.ping()) === 'PONG';
    });
    probe.disconnect();
    // A lock in flight on the master, which the sentinel's address must not hide.
    await new FireOnceGuard({ redis, keyPrefix: prefix }).acquire({ scope: 's', step: 'send', jobType: 'send' });
  });
  afterAll(async () => {
    if (sentinel) await stopChild(sentinel);
    rmSync(dir, { recursive: true, force: true });
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it.each([
    ['report', ['report']],
    ['inspect', ['inspect', 's']],
    ['release', ['release', 's', '--step', 'send', '--force']],
    ['doctor', ['doctor']],
  ])('%s exits 2, naming the master the sentinel monitors, and changes nothing', async (_name, args) => {
    const run = await runCli([...args, '--prefix', prefix, '--redis', sentinelUrl]);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `fire-once: --redis names a Redis Sentinel (${sentinelUrl}), which holds no keys: point it at the master it monitors (orders at ${master.host}:${master.port})\n`,
    );
    expect(run.code).toBe(EXIT.usage);
    expect(await redis.exists(`${prefix}:v3:{default/s}:l:send`)).toBe(1);
  });
});
