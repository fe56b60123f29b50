import type { Redis } from 'ioredis';
import { FireOnceConfigError, FireOnceGuard, FireOnceLockLost } from '../../src';
import { WakeHub, startRenewal, waitForTurn } from '../../src/core';
import { useGuardFixture } from '../support/redis';
import { lockToken, writeLock } from '../support/records';
import { waitFor } from '../support/wait';

describe('leases, fencing and wake-ups on Redis alone', () => {
  const fx = useGuardFixture('lease');
  let redis: Redis;
  let guard: FireOnceGuard;
  beforeEach(() => ({ redis, guard } = fx));
  const target = { scope: 'session-1', step: 'dispatch', jobType: 'summary' };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('keeps a lease alive across many lease periods while renewing, then lets it expire once stopped', async () => {
    // Renewed every 500 ms: the lock lapses only if the event loop stalls for a second, which a
    // loaded 2-core machine's jest workers do not (a 900 ms lease left 600 ms).
    const outcome = await guard.acquire(target, { lockTtlMs: 1_500 });
    if (outcome.kind !== 'acquired') throw new Error('expected acquired');
    const renewal = startRenewal(guard, outcome.lease, 1_500, () => undefined);
    await sleep(6_000); // four leases
    expect((await guard.acquire(target)).kind).toBe('held');
    expect(renewal.signal.aborted).toBe(false);
    renewal.stop();
    // Once stopped, the lock ends within a lease (the wait is a bound, not a timing claim).
    await waitFor('the lock to expire once renewing stopped', async () => (await guard.acquire(target)).kind === 'acquired', {
      timeoutMs: 5_000,
      everyMs: 100,
    });
  });

  it.each([[NaN], [0], [-5], [1.5], [undefined]])(
    'refuses a lease of %p with FireOnceConfigError: it would never renew the lock, nor signal it lost',
    async (leaseMs) => {
      const outcome = await guard.acquire(target, { lockTtlMs: 200 });
      if (outcome.kind !== 'acquired') throw new Error('expected acquired');
      const lost: FireOnceLockLost[] = [];
      let renewal: ReturnType<typeof startRenewal> | undefined;
      try {
        expect(() => (renewal = startRenewal(guard, outcome.lease, leaseMs as number, (err) => lost.push(err)))).toThrow(
          new FireOnceConfigError(`startRenewal: leaseMs must be a positive integer (got ${String(leaseMs)})`),
        );
      } finally {
        renewal?.stop();
      }
    },
  );

  it('signals the loss after a whole lease of failed renewals, and keeps renewing a lock Redis still holds for it', async () => {
    // Every renewal runs on the primary and then fails for want of a replica's acknowledgement (no
    // replica is attached here): the lock is this holder's all along, and must not be left to lapse.
    const unacknowledged = new FireOnceGuard({ redis, keyPrefix: guard.keys.prefix, replicaSync: { replicas: 1, timeoutMs: 50 } });
    const outcome = await guard.acquire(target, { lockTtlMs: 1_200 });
    if (outcome.kind !== 'acquired') throw new Error('expected acquired');
    const lost: FireOnceLockLost[] = [];
    const renewal = startRenewal(unacknowledged, outcome.lease, 1_200, (err) => lost.push(err));
    try {
      await sleep(4_800); // four leases
      expect(lost.map((err) => err.message)).toEqual([expect.stringContaining('no renewal succeeded for a whole lease (1200 ms)')]);
      expect(renewal.signal.aborted).toBe(true);
      expect((await guard.acquire(target)).kind).toBe('held');
      expect(await lockToken(redis, outcome.lease.lockKey)).toBe(outcome.lease.token);
    } finally {
      renewal.stop();
    }
  });

  // The signal is built on first read: read before the loss it aborts then, read after it is born aborted.
  it.each(['before', 'after'])('aborts the signal with FireOnceLockLost when the lock is taken away (signal first read %s)', async (when) => {
    const outcome = await guard.acquire(target, { lockTtlMs: 300 });
    if (outcome.kind !== 'acquired') throw new Error('expected acquired');
    const lost: FireOnceLockLost[] = [];
    const renewal = startRenewal(guard, outcome.lease, 300, (err) => lost.push(err));
    const early = when === 'before' ? renewal.signal : undefined;
    expect(early?.aborted).not.toBe(true);
    await writeLock(redis, outcome.lease.lockKey, 'a-newer-holder');
    expect(await renewal.renewNow()).toBe(false);
    expect(renewal.signal.aborted).toBe(true);
    expect(renewal.signal.reason).toBeInstanceOf(FireOnceLockLost);
    expect(renewal.signal.reason).toBe(lost[0]);
    if (early !== undefined) expect(early).toBe(renewal.signal);
    expect(lost).toHaveLength(1);
    expect(await lockToken(redis, outcome.lease.lockKey)).toBe('a-newer-holder');
    // Renewing stops there: no more compare-and-expire calls, each refused, for the rest of the job.
    const extend = jest.spyOn(guard, 'extend');
    try {
      await sleep(400); // four renewal periods
      expect(await renewal.renewNow()).toBe(false);
      expect(extend).not.toHaveBeenCalled();
    } finally {
      extend.mockRestore();
      renewal.stop();
    }
  });

  it('fencing tokens let a downstream store refuse a paused holder whose lock expired', async () => {
    // A downstream store that remembers the highest token it has seen, and refuses lower ones.
    let highest = 0;
    const stored: string[] = [];
    const write = (token: number, value: string) => {
      if (token < highest) return false;
      highest = token;
      stored.push(value);
      return true;
    };
    const a = await guard.acquire(target, { lockTtlMs: 50 });
    if (a.kind !== 'acquired') throw new Error('expected A to acquire');
    await sleep(120); // A is paused (GC, network) past its TTL...
    const b = await guard.acquire(target);
    if (b.kind !== 'acquired') throw new Error('expected B to acquire');
    expect(b.lease.fencingToken).toBeGreaterThan(a.lease.fencingToken);
    expect(write(b.lease.fencingToken, 'B')).toBe(true);
    expect(write(a.lease.fencingToken, 'A, late')).toBe(false); // ...and its late write is refused
    expect(stored).toEqual(['B']);
  });

  it('wakes a waiter by pub/sub when the holder commits, on one shared subscriber connection', async () => {
    const hub = new WakeHub(redis);
    try {
      const holder = await guard.acquire(target);
      if (holder.kind !== 'acquired') throw new Error('expected acquired');
      const held = await guard.acquire(target);
      if (held.kind !== 'held') throw new Error('expected held');
      let rings = 0;
      let joined = 0;
      const join = hub.join.bind(hub);
      jest.spyOn(hub, 'join').mockImplementation(async (channel, waiter) => {
        const leave = await join(channel, (message) => (rings++, waiter(message)));
        joined++;
        return leave;
      });
      const waiters = [1, 2, 3].map(() => waitForTurn(guard, target, held, {}, { pollIntervalMs: 60_000, deadline: Date.now() + 60_000, wake: hub }));
      await waitFor('the three waiters to join', async () => joined === 3);
      const [, subscribers] = (await redis.pubsub('NUMSUB', guard.keys.wakeChannel(target.scope))) as [string, number];
      expect(Number(subscribers)).toBe(1); // three waiters, one subscription
      await guard.commit(holder.lease, Buffer.from('done'));
      const outcomes = await Promise.all(waiters);
      expect(outcomes.map((o) => o.kind)).toEqual(['fast-forward', 'fast-forward', 'fast-forward']);
      expect(rings).toBe(3);
    } finally {
      hub.close();
    }
  });
});
