import { Redis } from 'ioredis';
import { FireOnceConfigError, FireOnceGuard } from '../../../src';
import { checkEvictionPolicy, checkWorkerRedis, type EvictionCheckOptions } from '../../../src/core';
import { testPrefix } from '../../support/redis';
import { spawnRedisServer, type SpawnedRedis } from '../../support/redis-server';
import { spawnSentinel } from '../../support/sentinel';

// The start check of a worker wired by hand (docs/usage.md, "Wiring by hand"): the same three
// refusals the plugin makes at worker start, on real redis-servers and a real sentinel. Each test
// starts a hand-wired worker as documented, checkWorkerRedis first, then one guarded dispatch,
// counted here.
describe('checkWorkerRedis: the start check of a hand-wired worker', () => {
  let safe: SpawnedRedis;
  let evicting: SpawnedRedis;
  const clients: Redis[] = [];
  const connect = (url: string) => {
    const client = new Redis(url, { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined); // a refused SELECT comes as an error event
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    [safe, evicting] = await Promise.all([spawnRedisServer(), spawnRedisServer(['--maxmemory-policy', 'allkeys-lru'])]);
  });
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await Promise.all([safe?.stop(), evicting?.stop()]);
  });

  /** A hand-wired worker's start, then one invocation: the error that stopped it, and its dispatches. */
  async function start(redis: Redis, allowEvictingRedis = false): Promise<{ error?: unknown; dispatches: number }> {
    let dispatches = 0;
    try {
      await checkWorkerRedis(redis, { allowEvictingRedis, warn: () => undefined });
      const outcome = await new FireOnceGuard({ redis, keyPrefix: testPrefix('hand-wired') }).acquire({ scope: 's', step: 'send', jobType: 'send' });
      if (outcome.kind === 'acquired') dispatches++;
      return { dispatches };
    } catch (error) {
      return { error, dispatches };
    }
  }

  it('a data node that cannot evict, in the database it names: the worker starts and dispatches', async () => {
    expect(await start(connect(`${safe.url}/3`))).toEqual({ dispatches: 1 });
  });

  it('a client naming a database the server does not have: refused, where ioredis would go on in database 0', async () => {
    const { error, dispatches } = await start(connect(`${safe.url}/16`));
    expect(dispatches).toBe(0);
    expect(error).toBeInstanceOf(FireOnceConfigError);
    expect((error as Error).message).toMatch(/^the Redis client names database 16, which Redis at 127\.0\.0\.1:\d+ refused \(ERR DB index is out of range\)/);
  });

  it('a client its caller switched to another database after connecting stays there: the check selects nothing', async () => {
    const redis = connect(`${safe.url}/3`);
    await redis.select(5);
    const before = await redis.call('CLIENT', 'INFO');
    expect(before).toMatch(/ db=5 /);
    expect(await start(redis)).toEqual({ dispatches: 1 });
    expect(await redis.call('CLIENT', 'INFO')).toMatch(/ db=5 /);
  });

  it("a client of a Sentinel's address: refused, naming the masters, allowEvictingRedis or not", async () => {
    const sentinel = await spawnSentinel({ host: '127.0.0.1', port: safe.port });
    try {
      for (const allowEvictingRedis of [false, true]) {
        const { error, dispatches } = await start(connect(sentinel.url), allowEvictingRedis);
        expect(dispatches).toBe(0);
        expect(error).toBeInstanceOf(FireOnceConfigError);
        expect((error as Error).message).toMatch(
          new RegExp(`^Redis at 127\\.0\\.0\\.1:${sentinel.port} is a Sentinel, .* it monitors orders at 127\\.0\\.0\\.1:${safe.port}$`),
        );
      }
    } finally {
      await sentinel.stop();
    }
  });

  // As the plugin's options, and as Python's check_worker_redis (defect 135): a flag read from an
  // environment variable is a string, and a timeout of 0 would blame Redis for not answering.
  // Each row runs against the evicting server: a value let through shows as the eviction refusal,
  // a Redis that did not answer, or a TypeError, not as a refusal that names it.
  it.each<[string, () => [unknown, unknown], string]>([
    ['a string flag "false"', () => [connect(evicting.url), { allowEvictingRedis: 'false' }], 'allowEvictingRedis must be a boolean (got "false")'],
    ['a string flag "true"', () => [connect(evicting.url), { allowEvictingRedis: 'true' }], 'allowEvictingRedis must be a boolean (got "true")'],
    ['a flag 1', () => [connect(evicting.url), { allowEvictingRedis: 1 }], 'allowEvictingRedis must be a boolean (got 1)'],
    ['a timeout of 0', () => [connect(evicting.url), { timeoutMs: 0 }], 'timeoutMs must be a positive integer (got 0)'],
    ['a timeout of -5', () => [connect(evicting.url), { timeoutMs: -5 }], 'timeoutMs must be a positive integer (got -5)'],
    ['a timeout "5000"', () => [connect(evicting.url), { timeoutMs: '5000' }], 'timeoutMs must be a positive integer (got "5000")'],
    ['a timeout NaN', () => [connect(evicting.url), { timeoutMs: NaN }], 'timeoutMs must be a positive integer (got NaN)'],
    ['a timeout of 10^9 ms', () => [connect(evicting.url), { timeoutMs: 1e9 }], 'timeoutMs must be at most 60000 ms (got 1000000000)'],
    ['a warn that is no function', () => [connect(evicting.url), { allowEvictingRedis: true, warn: 'log' }], 'warn must be a function (got "log")'],
    ['a misspelt option', () => [connect(evicting.url), { allowEvicting: true }], 'unknown option "allowEvicting"'],
    ['options that are no object', () => [connect(evicting.url), 'allow'], 'options must be an object (got "allow")'],
    ['a URL for a client', () => ['redis://127.0.0.1:6379', {}], 'redis must be an ioredis Redis or Cluster instance (got "redis://127.0.0.1:6379")'],
    ['no client', () => [undefined, {}], 'redis must be an ioredis Redis or Cluster instance (got undefined)'],
  ])('an argument it cannot use is refused naming it, before Redis is read: %s', async (_name, given, named) => {
    for (const [where, check] of [
      ['checkWorkerRedis', checkWorkerRedis],
      ['checkEvictionPolicy', checkEvictionPolicy],
    ] as const) {
      const [redis, options] = given();
      let dispatches = 0;
      const refused = await (async () => {
        await check(redis as Redis, options as EvictionCheckOptions);
        const outcome = await new FireOnceGuard({ redis: redis as Redis, keyPrefix: testPrefix('hand-wired') }).acquire({
          scope: 's',
          step: 'send',
          jobType: 'send',
        });
        if (outcome.kind === 'acquired') dispatches++;
      })().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(FireOnceConfigError);
      expect((refused as Error).message).toBe(`${where}: ${named}`);
      expect(dispatches).toBe(0);
    }
  });

  it('a Redis that can evict: refused; with allowEvictingRedis, reported through warn and started', async () => {
    const refused = await start(connect(evicting.url));
    expect(refused.dispatches).toBe(0);
    expect(refused.error).toBeInstanceOf(FireOnceConfigError);
    expect((refused.error as Error).message).toMatch(/has maxmemory-policy allkeys-lru/);
    const warnings: string[] = [];
    await checkWorkerRedis(connect(evicting.url), { allowEvictingRedis: true, warn: (message) => warnings.push(message) });
    expect(warnings).toEqual([expect.stringMatching(/^fire-once: Redis at .* has maxmemory-policy allkeys-lru: .*allowEvictingRedis is true$/)]);
  });
});
