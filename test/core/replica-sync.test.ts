import { Redis } from 'ioredis';
import { FireOnceConfigError, FireOnceGuard, FireOnceStoreUnavailable, type FireOnceGuardOptions } from '../../src';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { testPrefix } from '../support/redis';
import { REPLICATION_PACE, waitFor } from '../support/wait';

// replicaSync on a primary with one replica, both spawned here. The replica is cut off with
// REPLICAOF NO ONE (as a partition or a dead replica would), so WAIT finds nobody to acknowledge.
describe('replica sync: WAIT pipelined behind every write', () => {
  let primary: SpawnedRedis;
  let replica: SpawnedRedis;
  let redis: Redis;
  let onReplica: Redis;

  const attach = async () => {
    await onReplica.call('REPLICAOF', '127.0.0.1', String(primary.port));
    await waitFor('the replica to acknowledge', async () => (await redis.wait(1, 200)) === 1, REPLICATION_PACE);
  };
  const detach = async () => {
    await onReplica.call('REPLICAOF', 'NO', 'ONE');
    await waitFor('the primary to see no replica', async () => /connected_slaves:0/.test(await redis.info('replication')), REPLICATION_PACE);
  };
  const guardWith = (options: Partial<FireOnceGuardOptions> = {}) => new FireOnceGuard({ redis, keyPrefix: testPrefix('replica-sync'), ...options });
  const target = (scope: string) => ({ scope, step: 'dispatch', jobType: 'job' });
  const waitCalls = async () => Number(/cmdstat_wait:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);

  beforeAll(async () => {
    primary = await spawnRedisServer();
    replica = await spawnRedisServer();
    redis = new Redis(primary.url);
    onReplica = new Redis(replica.url);
    await attach();
  }, 30_000);
  afterAll(async () => {
    redis?.disconnect();
    onReplica?.disconnect();
    await replica?.stop();
    await primary?.stop();
  });

  it("'auto' (the default) waits for the attached replica: an acquire resolves only once the replica has the lock", async () => {
    // 'auto' as the default resolves it, with room for a loaded machine's replica to answer.
    expect(guardWith().options.replicaSync).toEqual({ replicas: 'auto', timeoutMs: 200 });
    const guard = guardWith({ replicaSync: { replicas: 'auto', timeoutMs: 4_000 } });
    const before = await waitCalls();
    const outcome = await guard.acquire(target('synced'));
    if (outcome.kind !== 'acquired') throw new Error(outcome.kind);
    expect(await waitCalls()).toBe(before + 1);
    expect(await onReplica.get(outcome.lease.lockKey)).toBe(await redis.get(outcome.lease.lockKey));
    await guard.commit(outcome.lease, Buffer.from('done'));
    expect(await waitCalls()).toBe(before + 2);
  });

  it('with the replica cut off, an acquire fails closed, retryable, and leaves no lock; a commit is still delivered; a renewal fails', async () => {
    const guard = guardWith({ replicaSync: { replicas: 1, timeoutMs: 100 } });
    // Taken while the replica is attached, with room for it to answer on a loaded machine.
    const patient = new FireOnceGuard({ redis, keyPrefix: guard.options.keyPrefix, replicaSync: { replicas: 1, timeoutMs: 4_000 } });
    const held = await patient.acquire(target('held-before'));
    if (held.kind !== 'acquired') throw new Error(held.kind);
    await detach();
    try {
      const err = await guard.acquire(target('cut-off')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((err as FireOnceStoreUnavailable).retryable).toBe(true);
      expect((err as Error).message).toBe('only 0 of 1 replica(s) acknowledged the lock within 100 ms (replicaSync)');
      await waitFor('the unreplicated lock to be undone', async () => (await redis.exists(guard.keys.lock('cut-off', 'dispatch'))) === 0, REPLICATION_PACE);

      await expect(guard.extend(held.lease, 60_000)).rejects.toThrow('only 0 of 1 replica(s) acknowledged the lease renewal');
      expect((await guard.commit(held.lease, Buffer.from('result'))).ours).toBe(true);
      expect((await guard.acquire(target('held-before'))).kind).toBe('fast-forward');

      // false: the old asynchronous behaviour, the hazard documented in docs/production-redis.md.
      expect((await guardWith({ replicaSync: false }).acquire(target('unsynced'))).kind).toBe('acquired');
    } finally {
      await attach();
    }
  });

  it('a WAIT the Redis user may not send fails the acquire closed and undoes its lock', async () => {
    await redis.call('ACL', 'SETUSER', 'no-wait', 'reset', 'on', '>pw', '~*', '&*', '+@all', '-wait');
    const restricted = new Redis(primary.url, { username: 'no-wait', password: 'pw' });
    try {
      const guard = new FireOnceGuard({ redis: restricted, keyPrefix: testPrefix('replica-sync') });
      const err = await guard.acquire(target('no-wait')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((err as Error).message).toMatch(/NOPERM/);
      await waitFor('the lock to be undone', async () => (await redis.exists(guard.keys.lock('no-wait', 'dispatch'))) === 0, REPLICATION_PACE);
    } finally {
      restricted.disconnect();
    }
  });

  // A user denied INFO (the start check reads the eviction policy with CONFIG GET instead): 'auto'
  // cannot count the replicas, and writing without a WAIT could lose the lock in a failover.
  it("'auto' under a user that may not run INFO fails the acquire closed, saying why; a fixed count still works", async () => {
    await redis.call('ACL', 'SETUSER', 'no-info', 'reset', 'on', '>pw', '~*', '&*', '+@all', '-info');
    const restricted = new Redis(primary.url, { username: 'no-info', password: 'pw' });
    try {
      const guard = new FireOnceGuard({ redis: restricted, keyPrefix: testPrefix('replica-sync') });
      // Each write counts again: the second fails the same way, never as a write with no WAIT.
      for (const scope of ['uncounted-1', 'uncounted-2']) {
        const err = await guard.acquire(target(scope)).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
        expect((err as Error).message).toMatch(
          /replicaSync 'auto' could not count the primary's replicas with INFO replication \(NOPERM.*grant the Redis user \+info/,
        );
        await waitFor('the lock to be undone', async () => (await redis.exists(guard.keys.lock(scope, 'dispatch'))) === 0, REPLICATION_PACE);
      }
      const fixed = new FireOnceGuard({ redis: restricted, keyPrefix: guard.keys.prefix, replicaSync: { replicas: 1, timeoutMs: 4_000 } });
      expect((await fixed.acquire(target('uncounted-1'))).kind).toBe('acquired');
    } finally {
      restricted.disconnect();
    }
  });

  it('a WAIT refused after a commit, a release or a hold ran does not hide what the script did', async () => {
    await redis.call('ACL', 'SETUSER', 'no-wait', 'reset', 'on', '>pw', '~*', '&*', '+@all', '-wait');
    const restricted = new Redis(primary.url, { username: 'no-wait', password: 'pw' });
    try {
      const full = guardWith({ replicaSync: false }); // the set-up's own writes need no replica
      const guard = new FireOnceGuard({ redis: restricted, keyPrefix: full.keys.prefix, replicaSync: { replicas: 1, timeoutMs: 100 } });
      const leaseOf = async (scope: string) => {
        const outcome = await full.acquire(target(scope)); // acquired where WAIT is allowed
        if (outcome.kind !== 'acquired') throw new Error(outcome.kind);
        await redis.rpush(outcome.lease.waitersKey, `waiter-of-${scope}`);
        return outcome.lease;
      };
      // Each script runs and takes the waiter list before WAIT is refused: its reply, with the
      // waiters to hand over, is what the caller must get, not an error that says nothing changed.
      const committed = await guard.commit(await leaseOf('wait-refused-commit'), Buffer.from('result'));
      expect({ ...committed, waiters: committed.waiters.map(String) }).toEqual({ ours: true, stored: true, waiters: ['waiter-of-wait-refused-commit'] });
      const released = await guard.release(await leaseOf('wait-refused-release'));
      expect({ ...released, waiters: released.waiters.map(String) }).toEqual({ ours: true, waiters: ['waiter-of-wait-refused-release'] });
      const kept = await guard.keep(await leaseOf('wait-refused-keep'), 60_000);
      expect({ ...kept, waiters: kept.waiters.map(String) }).toEqual({ ours: true, waiters: ['waiter-of-wait-refused-keep'] });
      // A renewal counts on its replicas, so it still fails, and says why.
      await expect(guard.extend(await leaseOf('wait-refused-extend'), 60_000)).rejects.toThrow(/lease renewal.*NOPERM/);
    } finally {
      restricted.disconnect();
    }
  });

  it('a renewal after SCRIPT FLUSH waits for the replica after the script, not before it: unacknowledged, it fails', async () => {
    const guard = guardWith({ replicaSync: { replicas: 1, timeoutMs: 1_000 } });
    const patient = new FireOnceGuard({ redis, keyPrefix: guard.options.keyPrefix, replicaSync: { replicas: 1, timeoutMs: 4_000 } });
    const held = await patient.acquire(target('flushed'));
    if (held.kind !== 'acquired') throw new Error(held.kind);
    // The guard under test renews once with the replica answering: the renewal script is now
    // cached by Redis, and the guard's next renewal names it by SHA1 (EVALSHA), not by its source.
    expect(await guard.extend(held.lease, 60_000)).toBe(true);
    // The replica has everything written so far: a WAIT with nothing new to wait for answers at once.
    await waitFor('the replica to acknowledge', async () => (await redis.wait(1, 200)) === 1, REPLICATION_PACE);
    await new Promise((r) => setTimeout(r, 1_500)); // and has said so in its once-a-second REPLCONF ACK
    const pid = Number(/process_id:(\d+)/.exec(await onReplica.info('server'))?.[1]);
    const admin = new Redis(primary.url); // an operator's connection, not the guard's
    process.kill(pid, 'SIGSTOP');
    try {
      await new Promise((r) => setTimeout(r, 300));
      await admin.script('FLUSH'); // the guard's next EVALSHA is answered NOSCRIPT, and the script is sent again
      await expect(guard.extend(held.lease, 60_000)).rejects.toThrow('only 0 of 1 replica(s) acknowledged the lease renewal');
    } finally {
      process.kill(pid, 'SIGCONT');
      admin.disconnect();
    }
    // And the replica, answering again, acknowledges the next renewal after a flush.
    await redis.script('FLUSH');
    expect(await patient.extend(held.lease, 60_000)).toBe(true);
  });

  it("'auto' sends no WAIT when no replica is attached", async () => {
    const lone = await spawnRedisServer();
    const client = new Redis(lone.url);
    try {
      const guard = new FireOnceGuard({ redis: client, keyPrefix: testPrefix('replica-sync') });
      expect((await guard.acquire(target('alone'))).kind).toBe('acquired');
      expect(await client.info('commandstats')).not.toContain('cmdstat_wait');
    } finally {
      client.disconnect();
      await lone.stop();
    }
  });

  it.each([
    ['"yes"', 'yes', "replicaSync must be 'auto', false or { replicas: n or 'auto', timeoutMs } (got \"yes\")"],
    ['true', true, "replicaSync must be 'auto', false or { replicas: n or 'auto', timeoutMs } (got true)"],
    ['replicas "all"', { replicas: 'all' }, 'replicaSync.replicas must be a positive integer (got "all")'],
    ['0 replicas', { replicas: 0 }, 'replicaSync.replicas must be a positive integer (got 0)'],
    ['a timeout of 2 minutes', { replicas: 1, timeoutMs: 120_000 }, 'replicaSync.timeoutMs must be at most 60000 ms (got 120000)'],
    ['an unknown key', { replicas: 1, timeout: 5 }, 'replicaSync: unknown option "timeout"'],
    [
      'a timeout the store timeout cuts off',
      { replicas: 1, timeoutMs: 5_000 },
      'replicaSync.timeoutMs (5000 ms) must be below storeTimeoutMs (5000 ms), which bounds each write and its WAIT together',
    ],
  ])('refuses %s with FireOnceConfigError', (_name, replicaSync, message) => {
    expect(() => guardWith({ replicaSync: replicaSync as never })).toThrow(new FireOnceConfigError(message));
  });

  it('waits half of a storeTimeoutMs shorter than 400 ms, unless told how long', () => {
    expect(guardWith({ storeTimeoutMs: 150 }).options.replicaSync).toEqual({ replicas: 'auto', timeoutMs: 75 });
    expect(guardWith({ storeTimeoutMs: 150, replicaSync: { replicas: 2 } }).options.replicaSync).toEqual({ replicas: 2, timeoutMs: 75 });
    expect(guardWith({ storeTimeoutMs: 150, replicaSync: { replicas: 1, timeoutMs: 100 } }).options.replicaSync).toEqual({ replicas: 1, timeoutMs: 100 });
    expect(guardWith({ storeTimeoutMs: 1_000 }).options.replicaSync).toEqual({ replicas: 'auto', timeoutMs: 200 });
    // docs/production-redis.md: "200 ms, or half of storeTimeoutMs when that is shorter than 400
    // ms", so that the write keeps at least half of the store timeout besides its WAIT.
    expect(guardWith({ storeTimeoutMs: 300 }).options.replicaSync).toEqual({ replicas: 'auto', timeoutMs: 150 });
    expect(guardWith({ storeTimeoutMs: 399, replicaSync: { replicas: 2 } }).options.replicaSync).toEqual({ replicas: 2, timeoutMs: 199 });
    expect(guardWith({ storeTimeoutMs: 400 }).options.replicaSync).toEqual({ replicas: 'auto', timeoutMs: 200 });
    expect(guardWith({ storeTimeoutMs: 300, replicaSync: { replicas: 1, timeoutMs: 250 } }).options.replicaSync).toEqual({ replicas: 1, timeoutMs: 250 });
    expect(() => guardWith({ storeTimeoutMs: 150, replicaSync: { replicas: 1, timeoutMs: 150 } })).toThrow(
      new FireOnceConfigError('replicaSync.timeoutMs (150 ms) must be below storeTimeoutMs (150 ms), which bounds each write and its WAIT together'),
    );
  });
});

// A replica still in its first full sync cannot acknowledge a WAIT: 'auto' counts only the replicas
// streaming (state=online), or every acquire would fail for as long as a replica resyncs.
describe("replica sync 'auto' beside a replica in its first sync", () => {
  it('counts only the replicas online: an acquire takes the lock without a WAIT', async () => {
    // Diskless sync, delayed a minute: the replica waits for its snapshot (wait_bgsave) all along.
    const primary = await spawnRedisServer(['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '60']);
    const replica = await spawnRedisServer();
    const redis = new Redis(primary.url);
    const onReplica = new Redis(replica.url);
    try {
      await onReplica.call('REPLICAOF', '127.0.0.1', String(primary.port));
      await waitFor(
        'the replica to wait for its first sync',
        async () => /^slave0:.*state=wait_bgsave/m.test(await redis.info('replication')),
        REPLICATION_PACE,
      );
      const guard = new FireOnceGuard({ redis, keyPrefix: testPrefix('replica-first-sync') });
      const outcome = await guard.acquire({ scope: 'first-sync', step: 'dispatch', jobType: 'job' });
      expect(outcome.kind).toBe('acquired');
      expect(/cmdstat_wait:/.test(await redis.info('commandstats'))).toBe(false);
    } finally {
      redis.disconnect();
      onReplica.disconnect();
      await replica.stop();
      await primary.stop();
    }
  });
});
