import { Redis, type RedisOptions } from 'ioredis';
import { FireOnceGuard, fireOnce } from '../../src';
import { connectRedis, deletePrefix, refusedPort, testPrefix } from '../support/redis';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { waitFor } from '../support/wait';
import { asFailure, decoded, differences, dispatchCounter, runActivity, scanKeys, seedBystander, settle, snapshot } from '../support/bystander';

// A Redis that cannot be used: the guard fails closed with the retryable FireOnceStoreUnavailable
// and nothing is dispatched. Servers whose state a row changes (password, replica, maxmemory,
// script cache) are spawned by the row itself; the dispatch counter stays on the suite's Redis,
// so it counts even when the Redis under test refuses everything.
describe('bad input: Redis', () => {
  let main: Redis;
  let prefix: string;
  let counter: ReturnType<typeof dispatchCounter>;
  const cleanups: (() => Promise<void> | void)[] = [];

  beforeAll(() => {
    main = connectRedis();
  });
  beforeEach(() => {
    prefix = testPrefix('bad-redis');
    counter = dispatchCounter(main, prefix);
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await deletePrefix(main, prefix);
  });
  afterAll(() => main.quit());

  async function server(args: string[] = []): Promise<SpawnedRedis> {
    const spawned = await spawnRedisServer(args);
    cleanups.push(() => spawned.stop());
    return spawned;
  }

  function client(url: string, options: RedisOptions = {}): Redis {
    const redis = new Redis(url, options);
    redis.on('error', () => undefined); // the guard must report it, not an unhandled event
    cleanups.push(() => redis.disconnect());
    return redis;
  }

  const activities = {
    job: fireOnce(
      async (scope: string) => {
        await counter.hit();
        return `ran for ${scope}`;
      },
      { scope: ([scope]) => scope },
    ),
  };

  /** Run the guarded activity against `redis`: the failure it ends with. */
  async function failureOn(redis: Redis) {
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix, storeTimeoutMs: 1_000 });
    const { value, error } = await settle(runActivity({ config: { guard }, activities, activityType: 'job', args: ['s'] }));
    if (error === undefined) {
      const keys = await scanKeys(redis, `${prefix}:*`).catch(() => []);
      throw new Error(
        `expected FireOnceStoreUnavailable, but the activity ran (${await counter.total()} dispatch) and returned ${JSON.stringify(decoded(value))}; the guard wrote ${JSON.stringify(keys)}`,
      );
    }
    const failure = asFailure(error);
    expect(failure.type).toBe('FireOnceStoreUnavailable');
    expect(failure.nonRetryable).toBe(false);
    expect(await counter.total()).toBe(0);
    return failure;
  }

  it('connection refused (nothing listens on the port) → FireOnceStoreUnavailable, nothing dispatched', async () => {
    const failure = await failureOn(client(`redis://127.0.0.1:${await refusedPort()}`));
    expect(failure.message).toMatch(/^Redis did not answer within 1000 ms|ECONNREFUSED/);
    expect(failure.details?.[0]).toMatchObject({ scope: 's', step: 'job' });
  });

  it('wrong URL (a host name that does not resolve) → FireOnceStoreUnavailable, nothing dispatched', async () => {
    const failure = await failureOn(client('redis://fire-once-no-such-host.invalid:6379'));
    expect(failure.message).toMatch(/^Redis did not answer within 1000 ms|ENOTFOUND/);
  });

  it('wrong password → FireOnceStoreUnavailable naming WRONGPASS, nothing dispatched, artifacts intact', async () => {
    const srv = await server(['--requirepass', 'right-password']);
    const admin = client(srv.url, { password: 'right-password' });
    await seedBystander(new FireOnceGuard({ redis: admin, keyPrefix: prefix }));
    const before = await snapshot(admin, prefix);
    const failure = await failureOn(client(srv.url, { password: 'wrong-password' }));
    expect(failure.message).toMatch(/WRONGPASS/);
    expect(failure.message).not.toMatch(/wrong-password|right-password/);
    expect(await differences(admin, before)).toEqual([]);
  });

  it('no password where one is required → FireOnceStoreUnavailable naming NOAUTH, nothing dispatched, artifacts intact', async () => {
    const srv = await server(['--requirepass', 'right-password']);
    const admin = client(srv.url, { password: 'right-password' });
    await seedBystander(new FireOnceGuard({ redis: admin, keyPrefix: prefix }));
    const before = await snapshot(admin, prefix);
    const failure = await failureOn(client(srv.url));
    expect(failure.message).toMatch(/NOAUTH/);
    expect(await differences(admin, before)).toEqual([]);
  });

  it('a read-only replica → FireOnceStoreUnavailable naming READONLY, nothing dispatched or written, artifacts intact', async () => {
    const primary = await server();
    const replica = await server(['--replicaof', '127.0.0.1', String(primary.port)]);
    await client(primary.url).config('SET', 'repl-diskless-sync-delay', '0');
    const primaryClient = client(primary.url);
    const replicaClient = client(replica.url);
    // No replica sync for the seed: the replica may still be in its first sync.
    await seedBystander(new FireOnceGuard({ redis: primaryClient, keyPrefix: prefix, replicaSync: false }));
    const before = await snapshot(primaryClient, prefix);
    await waitFor('the replica to sync the seed', async () => (await replicaClient.dbsize()) >= before.size, { timeoutMs: 10_000, everyMs: 20 });
    expect(await differences(replicaClient, before)).toEqual([]); // replicated, so the replica is a fair test
    const failure = await failureOn(replicaClient);
    expect(failure.message).toMatch(/READONLY You can't write against a read only replica/);
    expect(await differences(primaryClient, before)).toEqual([]);
    expect(await differences(replicaClient, before)).toEqual([]);
    expect(await primaryClient.dbsize()).toBe(before.size);
  });

  it('out of memory (maxmemory 1, noeviction) → FireOnceStoreUnavailable naming OOM, nothing dispatched or written, artifacts intact', async () => {
    const srv = await server(['--maxmemory-policy', 'noeviction']);
    const admin = client(srv.url);
    await seedBystander(new FireOnceGuard({ redis: admin, keyPrefix: prefix }));
    const before = await snapshot(admin, prefix);
    await admin.config('SET', 'maxmemory', '1');
    try {
      const failure = await failureOn(admin);
      expect(failure.message).toMatch(/OOM command not allowed when used memory > 'maxmemory'/);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    expect(await differences(admin, before)).toEqual([]);
    expect(await admin.dbsize()).toBe(before.size);
  });

  it('out of memory at commit (maxmemory reached while the job ran) → FireOnceStoreUnavailable, no artifact written past maxmemory', async () => {
    const srv = await server(['--maxmemory-policy', 'noeviction']);
    const admin = client(srv.url);
    const guard = new FireOnceGuard({ redis: admin, keyPrefix: prefix, storeTimeoutMs: 1_000 });
    const outcome = await guard.acquire({ scope: 's', step: 'job', jobType: 'job' });
    if (outcome.kind !== 'acquired') throw new Error('expected to acquire');
    await admin.config('SET', 'maxmemory', '1');
    try {
      expect(await admin.set(`${prefix}:plain`, 'x').catch((e: Error) => e.message)).toMatch(/^OOM/); // Redis refuses plain writes
      const err = await guard.commit(outcome.lease, Buffer.alloc(256 * 1024, 7)).then(
        (stillOurs) => new Error(`commit succeeded past maxmemory (stillOurs=${stillOurs})`),
        (e: unknown) => e,
      );
      expect({ name: (err as Error).name, message: (err as Error).message }).toEqual({
        name: 'FireOnceStoreUnavailable',
        message: expect.stringMatching(/OOM/),
      });
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    expect(await admin.exists(guard.keys.artifact('s', 'job'))).toBe(0);
  });

  it("out of memory at a worker's commit → the result is delivered, and the lock is held for lockTtlMs, not left to its lease", async () => {
    // With the lock left to its lease (2 s here, 30 s by default), the next run of the step found
    // neither lock nor artifact once it ran out, and dispatched the job again.
    const srv = await server(['--maxmemory-policy', 'noeviction']);
    const admin = client(srv.url);
    const guard = new FireOnceGuard({ redis: admin, keyPrefix: prefix, storeTimeoutMs: 1_000, lockTtlMs: 600_000 });
    const fillsRedis = {
      job: fireOnce(
        async (scope: string) => {
          await counter.hit();
          await admin.config('SET', 'maxmemory', '1'); // Redis is full by the time the job ends
          return `ran for ${scope}`;
        },
        { scope: ([scope]) => scope },
      ),
    };
    try {
      const { value, error } = await settle(runActivity({ config: { guard, leaseMs: 2_000 }, activities: fillsRedis, activityType: 'job', args: ['s'] }));
      expect({ value: decoded(value), error }).toEqual({ value: 'ran for s', error: undefined });
      expect(await admin.exists(guard.keys.artifact('s', 'job'))).toBe(0);
      expect(await admin.pttl(guard.keys.lock('s', 'job'))).toBeGreaterThan(60_000);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    expect((await guard.acquire({ scope: 's', step: 'job', jobType: 'job' })).kind).toBe('held');
    expect(await counter.total()).toBe(1);
  });

  it('out of memory when acquire follows a committed step whose artifact is gone → FireOnceStoreUnavailable, nothing written', async () => {
    const srv = await server(['--maxmemory-policy', 'noeviction']);
    const admin = client(srv.url);
    const guard = new FireOnceGuard({ redis: admin, keyPrefix: prefix, storeTimeoutMs: 1_000 });
    const target = { scope: 's', step: 'job', jobType: 'job' };
    const first = await guard.acquire(target);
    if (first.kind !== 'acquired') throw new Error('expected to acquire');
    await guard.commit(first.lease, Buffer.from('result'));
    await admin.del(guard.keys.artifact('s', 'job')); // the artifact is gone; the commit took the lock with it
    await admin.config('SET', 'maxmemory', '1');
    try {
      const err = await guard.acquire(target).then(
        (outcome) => new Error(`acquire answered ${outcome.kind} past maxmemory`),
        (e: unknown) => e,
      );
      expect({ name: (err as Error).name, message: (err as Error).message }).toEqual({
        name: 'FireOnceStoreUnavailable',
        message: expect.stringMatching(/OOM/),
      });
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    expect(await admin.exists(first.lease.lockKey, guard.keys.artifact('s', 'job'))).toBe(0);
  });

  it("out of memory while another call holds the lock → acquire still answers held, and the lock stays the holder's", async () => {
    const srv = await server(['--maxmemory-policy', 'noeviction']);
    const admin = client(srv.url);
    const guard = new FireOnceGuard({ redis: admin, keyPrefix: prefix, storeTimeoutMs: 1_000 });
    const target = { scope: 's', step: 'job', jobType: 'job' };
    const holder = await guard.acquire({ ...target, holder: 'first' });
    if (holder.kind !== 'acquired') throw new Error('expected to acquire');
    const lock = await admin.get(holder.lease.lockKey);
    await admin.config('SET', 'maxmemory', '1');
    try {
      // Redis refuses every write under OOM; a lock that stands is still reported, with its holder.
      const second = await guard.acquire({ ...target, holder: 'second' });
      expect(second).toMatchObject({ kind: 'held', holder: 'first', sameHolder: false, fencingToken: holder.lease.fencingToken });
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    expect(await admin.get(holder.lease.lockKey)).toBe(lock);
  });

  it('Lua scripts flushed (SCRIPT FLUSH) mid-run, between acquire and commit → recovers: one dispatch, artifact stored', async () => {
    const srv = await server();
    const redis = client(srv.url);
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    await seedBystander(guard);
    const before = await snapshot(redis, prefix);
    const flushing = {
      job: fireOnce(
        async (scope: string) => {
          await counter.hit();
          await redis.script('FLUSH'); // after acquire ran its script, before commit runs its own
          return `ran for ${scope}`;
        },
        { scope: ([scope]) => scope },
      ),
    };
    expect(decoded(await runActivity({ config: { guard }, activities: flushing, activityType: 'job', args: ['s'] }))).toBe('ran for s');
    await redis.script('FLUSH');
    expect(decoded(await runActivity({ config: { guard }, activities: flushing, activityType: 'job', args: ['s'] }))).toBe('ran for s');
    expect(await counter.total()).toBe(1);
    expect(await redis.exists(guard.keys.artifact('s', 'job'))).toBe(1);
    expect(await differences(redis, before)).toEqual([]);
  });
});
