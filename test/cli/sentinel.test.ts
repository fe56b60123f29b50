import { FireOnceGuard } from '../../src';
import { EXIT } from '../../src/cli/exit-codes';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { spawnSentinel, type SpawnedSentinel } from '../support/sentinel';
import { runCli } from './run-cli';

// Behind Sentinel, the address operators have at hand is often a sentinel's. A sentinel answers
// PING and INFO but holds no keys and runs no scripts: the CLI must say that it was given a
// sentinel, and which master to give it instead, not judge the sentinel as a data node.
jest.setTimeout(120_000);

describe('fire-once CLI given a Redis Sentinel instead of a data node', () => {
  let sentinel: SpawnedSentinel | undefined;
  let sentinelUrl: string;
  let master: { host: string; port: number };
  const redis = connectRedis();
  const prefix = testPrefix('sentinel');

  beforeAll(async () => {
    master = { host: redis.options.host ?? '127.0.0.1', port: redis.options.port ?? 6379 };
    sentinel = await spawnSentinel(master);
    sentinelUrl = sentinel.url;
    // A lock in flight on the master, which the sentinel's address must not hide.
    await new FireOnceGuard({ redis, keyPrefix: prefix }).acquire({ scope: 's', step: 'send', jobType: 'send' });
  });
  afterAll(async () => {
    await sentinel?.stop();
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
