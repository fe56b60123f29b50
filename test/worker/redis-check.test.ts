import { Runtime, type Worker } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FIRE_ONCE_DEFAULTS, FireOnceConfigError, FireOnceGuard, FireOncePlugin, FireOnceStoreUnavailable } from '../../src';
import { refusedPort } from '../support/redis';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { spawnSentinel } from '../support/sentinel';

// The plugin's start check: FireOncePlugin.runWorker (what Worker.run goes through) refuses a
// Redis that can evict the guard's keys before the worker runs, unless allowEvictingRedis is
// set; then it logs the risk once at WARN through the runtime's logger, however many workers run.
describe('FireOncePlugin refuses an evicting Redis at worker start', () => {
  let evicting: SpawnedRedis;
  let safe: SpawnedRedis;
  const clients: Redis[] = [];
  const client = (url: string) => {
    const redis = new Redis(url, { maxRetriesPerRequest: 1 });
    clients.push(redis);
    return redis;
  };

  beforeAll(async () => {
    [evicting, safe] = await Promise.all([spawnRedisServer(['--maxmemory-policy', 'volatile-lru']), spawnRedisServer()]);
  });
  afterAll(async () => {
    for (const redis of clients) redis.disconnect();
    await Promise.all([evicting?.stop(), safe?.stop()]);
  });
  afterEach(() => jest.restoreAllMocks());

  it('allowEvictingRedis defaults to false and must be a boolean', () => {
    expect(FIRE_ONCE_DEFAULTS.allowEvictingRedis).toBe(false);
    expect(() => new FireOncePlugin({ redis: client(safe.url), allowEvictingRedis: 'yes' as never })).toThrow(
      new FireOnceConfigError('allowEvictingRedis must be a boolean (got "yes")'),
    );
  });

  it('with volatile-lru: runWorker rejects with FireOnceConfigError before the worker runs, and again on the next start', async () => {
    const plugin = new FireOncePlugin({ redis: client(evicting.url) });
    const next = jest.fn(async () => undefined);
    for (let start = 0; start < 2; start++) {
      const err = await plugin.runWorker({} as Worker, next).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceConfigError);
      expect((err as Error).message).toMatch(/has maxmemory-policy volatile-lru: .*Set `maxmemory-policy noeviction`/);
    }
    expect(next).not.toHaveBeenCalled();
  });

  it('with allowEvictingRedis: true the worker runs, and the risk is logged once at WARN for two workers', async () => {
    const warn = jest.spyOn(Runtime.instance().logger, 'warn').mockImplementation(() => undefined);
    const plugin = new FireOncePlugin({ redis: client(evicting.url), allowEvictingRedis: true });
    const next = jest.fn(async () => undefined);
    await Promise.all([plugin.runWorker({} as Worker, next), plugin.runWorker({} as Worker, next)]);
    await plugin.runWorker({} as Worker, next);
    expect(next).toHaveBeenCalledTimes(3);
    expect(warn.mock.calls).toEqual([
      [
        expect.stringMatching(/^fire-once: Redis at 127\.0\.0\.1:\d+ has maxmemory-policy volatile-lru: .*starting anyway because allowEvictingRedis is true$/),
        { nodes: [{ address: `127.0.0.1:${evicting.port}`, policy: 'volatile-lru' }] },
      ],
    ]);
  });

  it('an unreachable Redis fails the start with FireOnceStoreUnavailable after storeTimeoutMs', async () => {
    const redis = new Redis(await refusedPort(), '127.0.0.1', { lazyConnect: true, retryStrategy: () => 100 });
    redis.on('error', () => undefined);
    const next = jest.fn(async () => undefined);
    const err = await new FireOncePlugin({ redis, storeTimeoutMs: 300 }).runWorker({} as Worker, next).catch((e: unknown) => e);
    redis.disconnect();
    expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
    // It names the node and why (not a check's inner step alone).
    expect((err as Error).message).toMatch(
      /^Redis at 127\.0\.0\.1:\d+ did not answer within 300 ms while .* \(last error: connect ECONNREFUSED 127\.0\.0\.1:\d+\)$/,
    );
    expect(next).not.toHaveBeenCalled();
  });

  it.each([
    ['a wrong password', ':wrong@', /WRONGPASS/],
    ['no password', '', /NOAUTH/],
  ])(
    '%s: runWorker rejects with FireOnceStoreUnavailable naming the credentials, allowEvictingRedis or not, and never an eviction risk',
    async (_name, auth, code) => {
      const guarded = await spawnRedisServer(['--requirepass', 'right-password']);
      try {
        const next = jest.fn(async () => undefined);
        for (const allowEvictingRedis of [false, true]) {
          const redis = new Redis(guarded.url.replace('redis://', `redis://${auth}`), { maxRetriesPerRequest: 1 });
          redis.on('error', () => undefined);
          const err = await new FireOncePlugin({ redis, allowEvictingRedis }).runWorker({} as Worker, next).catch((e: unknown) => e);
          redis.disconnect();
          expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
          expect((err as Error).message).toMatch(/^Redis refused this client's credentials \(/);
          expect((err as Error).message).toMatch(code);
          expect((err as Error).message).not.toMatch(/maxmemory-policy|allowEvictingRedis/);
        }
        expect(next).not.toHaveBeenCalled();
      } finally {
        await guarded.stop();
      }
    },
  );

  it('with noeviction the worker runs and nothing is logged, opt-out or not', async () => {
    const warn = jest.spyOn(Runtime.instance().logger, 'warn').mockImplementation(() => undefined);
    const next = jest.fn(async () => undefined);
    await new FireOncePlugin({ redis: client(safe.url) }).runWorker({} as Worker, next);
    await new FireOncePlugin({ redis: client(safe.url), allowEvictingRedis: true }).runWorker({} as Worker, next);
    expect(next).toHaveBeenCalledTimes(2);
    expect(warn).not.toHaveBeenCalled();
    // A stand-in another plugin or a test hands on, with a loaded converter but no interceptors.
    const standIn = { options: { loadedDataConverter: { payloadConverter: {}, payloadCodecs: [] } } } as unknown as Worker;
    await new FireOncePlugin({ redis: client(safe.url) }).runWorker(standIn, next);
    expect(next).toHaveBeenCalledTimes(3);
  });

  it('a client naming a database the server does not have: runWorker rejects with FireOnceConfigError, where ioredis went on in database 0', async () => {
    // Another deployment's result in database 0, under the same prefix and IDs.
    const target = { scope: 'order-7', step: 'charge', jobType: 'charge' };
    const other = new FireOnceGuard({ redis: client(safe.url), keyPrefix: 'db-check' });
    const lease = await other.acquire(target);
    if (lease.kind !== 'acquired') throw new Error(`expected to acquire, got ${lease.kind}`);
    await other.commit(lease.lease, Buffer.from('"charged by the other deployment"'));

    // Database 16 of a server with 16 (0 to 15): ioredis reports the refused SELECT as an error
    // event and goes on in database 0.
    const redis = new Redis(`${safe.url}/16`, { maxRetriesPerRequest: 1 });
    clients.push(redis);
    const connectErrors: string[] = [];
    redis.on('error', (err: Error) => connectErrors.push(err.message));
    const plugin = new FireOncePlugin({ redis, keyPrefix: 'db-check' });
    let dispatches = 0;
    const served: string[] = [];
    const next = jest.fn(async () => {
      const outcome = await new FireOnceGuard({ redis, keyPrefix: 'db-check' }).acquire(target);
      if (outcome.kind === 'acquired') dispatches += 1;
      if (outcome.kind === 'fast-forward') served.push(outcome.artifact.toString());
    });
    const err = await plugin.runWorker({} as Worker, next).catch((e: unknown) => e);
    expect(connectErrors).toEqual([expect.stringMatching(/DB index is out of range/)]);
    expect(served).toEqual([]);
    expect(dispatches).toBe(0);
    expect(next).not.toHaveBeenCalled();
    expect(err).toBeInstanceOf(FireOnceConfigError);
    expect((err as Error).message).toMatch(/^the Redis client names database 16, which Redis at 127\.0\.0\.1:\d+ refused \(.*DB index is out of range\)/);
    // A database the server has: the worker runs, in that database, and dispatches.
    const db15 = client(`${safe.url}/15`);
    const ok = jest.fn(async () => {
      const outcome = await new FireOnceGuard({ redis: db15, keyPrefix: 'db-check' }).acquire(target);
      if (outcome.kind === 'acquired') dispatches += 1;
    });
    await new FireOncePlugin({ redis: db15, keyPrefix: 'db-check' }).runWorker({} as Worker, ok);
    expect(ok).toHaveBeenCalledTimes(1);
    expect(dispatches).toBe(1);
  });

  it("a client of a Sentinel's address: runWorker rejects with FireOnceConfigError saying so, allowEvictingRedis or not", async () => {
    const sentinel = await spawnSentinel({ host: '127.0.0.1', port: safe.port });
    try {
      for (const allowEvictingRedis of [false, true]) {
        const redis = client(sentinel.url);
        let dispatches = 0;
        const next = jest.fn(async () => {
          const outcome = await new FireOnceGuard({ redis, keyPrefix: 'sentinel-check' }).acquire({ scope: 's', step: 'send', jobType: 'send' });
          if (outcome.kind === 'acquired') dispatches += 1;
        });
        const err = await new FireOncePlugin({ redis, allowEvictingRedis }).runWorker({} as Worker, next).catch((e: unknown) => e);
        expect(dispatches).toBe(0);
        expect(next).not.toHaveBeenCalled();
        expect(err).toBeInstanceOf(FireOnceConfigError);
        expect((err as Error).message).toBe(
          `Redis at 127.0.0.1:${sentinel.port} is a Sentinel, which holds no keys and runs no scripts: give ioredis the sentinels and the master's name ` +
            `(new Redis({ sentinels: [{ host, port }], name: 'orders' }), see docs/deployment.md), not a sentinel's address; it monitors orders at 127.0.0.1:${safe.port}`,
        );
      }
    } finally {
      await sentinel.stop();
    }
  });

  it('a worker stops even when Redis went away before its last dispatch-log batch, with a client that retries for ever', async () => {
    const warn = jest.spyOn(Runtime.instance().logger, 'warn').mockImplementation(() => undefined);
    const server = await spawnRedisServer();
    const redis = new Redis(server.url, { maxRetriesPerRequest: null });
    redis.on('error', () => undefined);
    const plugin = new FireOncePlugin({ redis, storeTimeoutMs: 300 });
    try {
      const stopped = plugin.runWorker({} as Worker, async () => {
        await server.stop();
        // The last batch: ioredis queues it, waiting to reconnect, for as long as the client allows.
        plugin.dispatchLog!.record({ decision: 'fast-forwarded', scope: 's', step: 'job', jobType: 'job', workflowId: 'wf', runId: 'run' });
      });
      const outcome = await Promise.race([stopped.then(() => 'stopped'), new Promise((r) => setTimeout(() => r('still flushing after 10 s'), 10_000))]);
      expect(outcome).toBe('stopped');
      expect(warn).toHaveBeenCalledWith(expect.stringMatching(/^fire-once: 1 dispatch-log entries had no answer from Redis within storeTimeoutMs \(300 ms\)/), {
        unanswered: 1,
      });
    } finally {
      redis.disconnect();
    }
  });
});
