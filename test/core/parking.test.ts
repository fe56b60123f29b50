// ParkingLot on a real redis-server: a waiter parked on one holder's lock is handed over by the
// holder who takes over once that lock expired, however long the new holder's job runs.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { FireOnceGuard } from '../../src';
import { ParkingLot, WAITERS_GRACE_MS } from '../../src/core';
import { testPrefix } from '../support/redis';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';

describe('ParkingLot', () => {
  let server: SpawnedRedis;
  let redis: Redis;

  beforeAll(async () => {
    server = await spawnRedisServer();
    redis = new Redis(server.url);
  });
  afterAll(async () => {
    await redis.quit();
    await server.stop();
  });

  it("keeps a waiter parked on an expired holder's lock for the holder that took over, past the grace", async () => {
    const guard = new FireOnceGuard({ redis, keyPrefix: testPrefix('parking') });
    const lot = new ParkingLot(guard);
    const target = { scope: 'session-1', step: 'summarise', jobType: 'summary' };
    const first = await guard.acquire(target, { lockTtlMs: 30_000 });
    if (first.kind !== 'acquired') throw new Error(`expected to acquire, got ${first.kind}`);
    const parked = await lot.park(target, Buffer.from('waiter-1'));
    if (parked.kind !== 'parked') throw new Error(`expected to park, got ${parked.kind}`);
    const { spot } = parked;

    // The first holder's worker dies and its lock expires; another invocation takes over with a
    // fixed lock of 10 minutes, which nobody renews while its job runs.
    await redis.del(first.lease.lockKey);
    const second = await guard.acquire(target, { lockTtlMs: 600_000 });
    if (second.kind !== 'acquired') throw new Error(`expected to acquire, got ${second.kind}`);

    // The waiter's worker reaps while the new lock stands: the waiters stay parked, and their list
    // now outlives the new lock.
    expect(await lot.reap(spot)).toEqual({ kind: 'held' });
    const lockTtl = await redis.pttl(spot.lockKey);
    expect(await redis.pttl(spot.waitersKey)).toBeGreaterThan(lockTtl);
    expect(await redis.pttl(spot.waitersKey)).toBeLessThanOrEqual(lockTtl + WAITERS_GRACE_MS);

    // Time passes: the grace the list got when the waiter parked runs out (compressed here to
    // 200 ms) while the new job runs; the waiter's worker reaps, as it does every poll interval.
    await redis.pexpire(spot.waitersKey, 200);
    expect(await lot.reap(spot)).toEqual({ kind: 'held' });
    await sleep(300);

    // The new holder's commit hands the waiter over, with the result it stores.
    const committed = await guard.commit(second.lease, Buffer.from('summary'));
    expect(committed).toMatchObject({ ours: true, stored: true });
    expect(committed.waiters.map((w) => w.toString())).toEqual(['waiter-1']);
  });
});
