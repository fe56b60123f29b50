// A parked waiter's list lives the lock's PTTL plus WAITERS_GRACE_MS. On a real redis-server:
// the list is handed over by a holder who took over once the lock the waiter parked on expired,
// however long that holder's job runs, and the waiter's worker reaps within the grace, whatever
// pollIntervalMs is (ParkedWatch, under jest's fake clock: timers and Date only, real Redis I/O).
import { setTimeout as sleep } from 'node:timers/promises';
import { ActivityCompletionError, ActivityNotFoundError, type Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { Redis } from 'ioredis';
import { FireOnceConfigError, FireOnceGuard } from '../../src';
import { ParkedWatch, ParkingLot, WAITERS_GRACE_MS, parseWaiter, type ParkingSpot, type ReapOutcome } from '../../src/core';
import { settleWaiters, type Completer } from '../../src/worker/hand-over';
import { HAND_BACK_WINDOW_MS } from '../../src/worker/parked-watch';
import { payloadToBytes } from '../../src/worker/artifact';
import { testPrefix } from '../support/redis';
import { spawnRedisServer, type SpawnedRedis } from '../support/redis-server';
import { waitFor } from '../support/wait';

describe("parked waiters' list", () => {
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
  afterEach(() => {
    jest.useRealTimers();
  });

  const target = { scope: 'session-1', step: 'summarise', jobType: 'summary' };

  /** A holder acquires with `lockTtlMs`, and 'waiter-1' parks on its lock. */
  async function parkOnHeldLock(lockTtlMs: number, storeTimeoutMs?: number) {
    const guard = new FireOnceGuard({ redis, keyPrefix: testPrefix('parking'), ...(storeTimeoutMs ? { storeTimeoutMs } : {}) });
    const lot = new ParkingLot(guard);
    const holder = await guard.acquire(target, { lockTtlMs });
    if (holder.kind !== 'acquired') throw new Error(`expected to acquire, got ${holder.kind}`);
    const parked = await lot.park(target, Buffer.from('waiter-1'));
    if (parked.kind !== 'parked') throw new Error(`expected to park, got ${parked.kind}`);
    return { guard, lot, lease: holder.lease, spot: parked.spot as ParkingSpot };
  }

  it('is handed over by the holder who took over from an expired one, past the grace', async () => {
    const { guard, lot, lease, spot } = await parkOnHeldLock(30_000);

    // The first holder's worker dies and its lock expires; another invocation takes over with a
    // fixed lock of 10 minutes, which nobody renews while its job runs.
    await redis.del(lease.lockKey);
    const second = await guard.acquire(target, { lockTtlMs: 600_000 });
    if (second.kind !== 'acquired') throw new Error(`expected to acquire, got ${second.kind}`);

    // The waiter's worker reaps while the new lock stands: the waiters stay parked, and their list
    // now outlives the new lock.
    expect(await lot.reap(spot)).toEqual({ kind: 'held' });
    const lockTtl = await redis.pttl(spot.lockKey);
    expect(await redis.pttl(spot.waitersKey)).toBeGreaterThan(lockTtl);
    // Plus 1 ms: before Redis 7 a script reads the clock afresh for each command, so the reap's
    // PEXPIRE may run a millisecond after the PTTL it adds the grace to (seen on Redis 5).
    expect(await redis.pttl(spot.waitersKey)).toBeLessThanOrEqual(lockTtl + WAITERS_GRACE_MS + 1);

    // Time passes: the grace the list got when the waiter parked runs out (compressed here to
    // 200 ms) while the new job runs; the waiter's worker reaps, as it does every poll interval.
    await redis.pexpire(spot.waitersKey, 200);
    expect(await lot.reap(spot)).toEqual({ kind: 'held' });
    await sleep(300);

    // The new holder's commit hands the waiter over, with the result it stores.
    const committed = await guard.commit(second.lease, Buffer.from('summary'));
    expect(committed).toMatchObject({ ours: true, stored: true });
    expect(committed.waiters.map((w) => parseWaiter(w).token.toString())).toEqual(['waiter-1']);
  });

  it.each([[NaN], [0], [-5], [1.5], [undefined]])(
    'a ParkedWatch given a reap period of %p refuses it with FireOnceConfigError: it would reap every millisecond',
    (reapEveryMs) => {
      const lot = new ParkingLot(new FireOnceGuard({ redis, keyPrefix: testPrefix('parking') }));
      expect(() => new ParkedWatch(lot, reapEveryMs as number)).toThrow(
        new FireOnceConfigError(`ParkedWatch: reapEveryMs must be a positive integer (got ${String(reapEveryMs)})`),
      );
    },
  );

  it('is reaped at least every quarter of the grace, even with the longest pollIntervalMs', async () => {
    const { lot, spot } = await parkOnHeldLock(600_000);
    const reaps = jest.spyOn(lot, 'reap'); // observes only: every reap still runs on Redis
    // While the lock stands a reap hands nothing over, so the completer is called only by close(), which fails the waiter.
    const client = { activity: { fail: async () => undefined } } as unknown as Client;
    const completer = { client, log: { info: () => undefined }, payloadConverter: undefined, payloadCodecs: [] } as unknown as Completer;
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask', 'performance'] });
    const watch = new ParkedWatch(lot, 60_000); // pollIntervalMs at its maximum
    try {
      watch.watch(spot, completer, Buffer.from('waiter-1'), undefined);
      for (const quarter of [1, 2, 3, 4]) {
        await jest.advanceTimersByTimeAsync(WAITERS_GRACE_MS / 4);
        expect({ after: `${quarter}/4 of the grace`, reaps: reaps.mock.calls.length }).toEqual({ after: `${quarter}/4 of the grace`, reaps: quarter });
        expect(await reaps.mock.results[quarter - 1].value).toEqual({ kind: 'held' }); // the reap itself, on Redis
      }
    } finally {
      await watch.close();
    }
  });

  it('a reap that times out hands over the waiters it took once it lands', async () => {
    const { lot, lease, spot } = await parkOnHeldLock(30_000, 100);
    await lot.park(target, Buffer.from('waiter-2')); // parked by another worker, not watched here
    await redis.del(lease.lockKey); // the holder died: its lock is gone, with no release
    // What the worker's Temporal client is asked to do, recorded (the hand-over itself is what is tested).
    const failed: Record<string, string> = {};
    const client = {
      activity: {
        fail: async (token: Uint8Array, failure: { type?: string }) => void (failed[Buffer.from(token).toString()] ??= failure.type ?? ''),
        complete: async () => undefined,
      },
    };
    const quiet = { warn: () => undefined, error: () => undefined, debug: () => undefined };
    const completer = { client, log: quiet, payloadConverter: undefined, payloadCodecs: [] } as unknown as Completer;
    const pauser = new Redis(server.url);
    const watch = new ParkedWatch(lot, 50);
    try {
      await pauser.call('CLIENT', 'PAUSE', '600'); // Redis stalls past the guard's storeTimeoutMs (100 ms)
      watch.watch(spot, completer, Buffer.from('waiter-1'), undefined);
      await waitFor('the reap to fail the waiter it took', async () => failed['waiter-2'] !== undefined, { timeoutMs: 10_000, everyMs: 25 });
      // The watch fails its own waiter closed at the timeout; the reap lands after the stall and
      // takes the list, and the waiter it took for the other worker is failed so that it retries.
      expect(failed).toEqual({ 'waiter-1': 'FireOnceStoreUnavailable', 'waiter-2': 'FireOnceInFlight' });
      expect(await redis.exists(spot.waitersKey)).toBe(0);
    } finally {
      await watch.close();
      await pauser.quit();
    }
  });

  it("a reap in flight as its worker stops leaves another worker's newer waiter on that step watched, and hands over through that worker", async () => {
    // Two workers share one watch (one plugin). A parks waiter-1 and its reap starts; A stops
    // (close with its client: waiter-1 failed, its entry dropped); B parks waiter-2 on the same
    // step; the lock expires; then A's reap lands. It must not drop B's entry, nor hand the list
    // over through A's client, whose connection is closed once A's run() resolves.
    const { lot, spot } = await parkOnHeldLock(200);
    const real = lot.reap.bind(lot);
    let reapStarted!: () => void;
    const started = new Promise<void>((resolve) => (reapStarted = resolve));
    let letReapLand!: () => void;
    const gate = new Promise<void>((resolve) => (letReapLand = resolve));
    let calls = 0;
    // The first reap (A's) waits for the gate, then runs on Redis; later ones (B's, while A's is
    // held) find the lock standing, so that only A's reap takes the list.
    jest.spyOn(lot, 'reap').mockImplementation(async (s) => {
      if (++calls > 1) return { kind: 'held' };
      reapStarted();
      await gate;
      return real(s);
    });
    const recorder = () => {
      const seen: string[] = [];
      const client = { activity: { fail: async (token: Uint8Array) => void seen.push(Buffer.from(token).toString()), complete: async () => undefined } };
      const quiet = { warn: () => undefined, error: () => undefined, debug: () => undefined, info: () => undefined };
      return { seen, completer: { client, log: quiet, payloadConverter: defaultPayloadConverter, payloadCodecs: [] } as unknown as Completer };
    };
    const [a, b] = [recorder(), recorder()];
    const watch = new ParkedWatch(lot, 50);
    try {
      watch.watch(spot, a.completer, Buffer.from('waiter-1'), undefined);
      await started;
      await watch.close(1_000, a.completer.client);
      expect(a.seen).toEqual(['waiter-1']); // A's own waiter, failed as A stopped
      const parked = await lot.park(target, Buffer.from('waiter-2'));
      expect(parked.kind).toBe('parked');
      watch.watch(spot, b.completer, Buffer.from('waiter-2'), undefined);
      await waitFor('the lock to expire', async () => (await redis.pttl(spot.lockKey)) === -2, { timeoutMs: 10_000, everyMs: 25 });
      letReapLand();
      await waitFor('the list to be handed over', async () => b.seen.length + a.seen.length > 1, { timeoutMs: 10_000, everyMs: 25 });
      expect({ throughA: a.seen, throughB: b.seen.sort() }).toEqual({ throughA: ['waiter-1'], throughB: ['waiter-1', 'waiter-2'] });
      expect(watch.size).toBe(1); // waiter-2 is still B's to watch until the hand-back window ends
    } finally {
      await watch.close();
    }
  });

  it('keeps a parked waiter watched through a failed heartbeat, and stops only when Temporal says it is gone', async () => {
    const { lot, spot } = await parkOnHeldLock(600_000);
    // Temporal's answers to the waiter's heartbeats, in order: unreachable past the client's
    // retries, then fine, then NOT_FOUND (the attempt ended), held back until the test lets it
    // through, so that what is checked in between does not depend on the machine's speed.
    let beats = 0;
    let answerNotFound!: () => void;
    const notFound = new Promise<void>((resolve) => (answerNotFound = resolve));
    const warnings: string[] = [];
    const client = {
      activity: {
        heartbeat: async () => {
          beats += 1;
          if (beats === 1) throw new ActivityCompletionError('Unexpected failure');
          if (beats === 3) {
            await notFound;
            throw new ActivityNotFoundError('Not found');
          }
        },
      },
    };
    const log = { warn: (m: string) => warnings.push(m), error: () => undefined, debug: () => undefined };
    const completer = { client, log, payloadConverter: undefined, payloadCodecs: [] } as unknown as Completer;
    const watch = new ParkedWatch(lot, 60_000);
    try {
      watch.watch(spot, completer, Buffer.from('waiter-1'), 300); // beats every 100 ms
      await waitFor('3 heartbeats', async () => beats >= 3, { timeoutMs: 10_000 }); // beaten again after a failed heartbeat, and after a good one
      expect(beats).toBeGreaterThanOrEqual(3);
      expect(watch.size).toBe(1); // still watched
      answerNotFound();
      await waitFor('the waiter to be unwatched', async () => watch.size === 0, { timeoutMs: 10_000 });
      expect(watch.size).toBe(0); // gone: no longer watched
      expect(warnings).toEqual(['fire-once: could not heartbeat a parked waiter; trying again at each beat']);
    } finally {
      await watch.close();
    }
  });

  it("hands a dispatch's outcome only to waiters parked with its arguments; the rest, and bare tokens of 0.2.3, as the entries say", async () => {
    const guard = new FireOnceGuard({ redis, keyPrefix: testPrefix('parking') });
    const lot = new ParkingLot(guard);
    const call = { ...target, scope: 'session-args' };
    const holder = await guard.acquire(call); // no args hash: waiters of any arguments park on it
    if (holder.kind !== 'acquired') throw new Error(`expected to acquire, got ${holder.kind}`);
    for (const [argsHash, token] of [
      ['A', 'same-args'],
      ['B', 'other-args'],
      ['', 'no-args-checked'],
    ])
      expect((await lot.park({ ...call, argsHash }, Buffer.from(token))).kind).toBe('parked');
    await redis.rpush(holder.lease.waitersKey, '\n\x04bare'); // a task token as 0.2.3 parked it
    const { waiters } = await guard.release(holder.lease);
    const settled: Record<string, string> = {};
    const client = {
      activity: { fail: async (token: Uint8Array, failure: { type?: string }) => void (settled[Buffer.from(token).toString()] = failure.type ?? '') },
    };
    const quiet = { warn: () => undefined };
    const completer = { client, log: quiet, payloadConverter: undefined, payloadCodecs: [] } as unknown as Completer;
    await settleWaiters(completer, waiters, 'A', 'summarise', async (tokens) => {
      for (const token of tokens) settled[token.toString()] = 'the outcome of A';
    });
    expect(settled).toEqual({
      'same-args': 'the outcome of A',
      'other-args': 'FireOnceInFlight',
      'no-args-checked': 'the outcome of A',
      '\n\x04bare': 'the outcome of A',
    });
  });

  /** Watch 'waiter-1' on `spot` with a client that records what it is asked to do, and spy on the reaps (every reap still runs on Redis). */
  function watchWaiter(lot: ParkingLot, spot: ParkingSpot) {
    const handed: string[] = [];
    const client = {
      activity: {
        complete: async (token: Uint8Array) => void handed.push(`completed ${Buffer.from(token).toString()}`),
        fail: async (token: Uint8Array) => void handed.push(`failed ${Buffer.from(token).toString()}`),
      },
    };
    const quiet = { warn: () => undefined, error: () => undefined, debug: () => undefined };
    const completer = { client, log: quiet, payloadConverter: defaultPayloadConverter, payloadCodecs: [] } as unknown as Completer;
    const reaps = jest.spyOn(lot, 'reap');
    const watch = new ParkedWatch(lot, 50);
    watch.watch(spot, completer, Buffer.from('waiter-1'), undefined);
    /** The outcome of the next reap to start. */
    const nextReap = async () => {
      const before = reaps.mock.calls.length;
      while (reaps.mock.calls.length === before) await sleep(5);
      return (await reaps.mock.results[before].value) as ReapOutcome;
    };
    const handedWithin = (ms: number) => waitFor('an outcome handed to the waiter', async () => handed.length > 0 && handed, { timeoutMs: ms, everyMs: 25 });
    return { watch, nextReap, handedWithin };
  }

  it('hands over a waiter put back on its list just after a reap found the list taken, as a holder that cannot complete it does', async () => {
    const { guard, lot, lease, spot } = await parkOnHeldLock(30_000);
    const { watch, nextReap, handedWithin } = watchWaiter(lot, spot);
    try {
      // A holder that cannot complete the waiter (a Python worker, one of another namespace)
      // commits, which takes the list; this worker reaps before the holder puts it back.
      const committed = await guard.commit(lease, payloadToBytes(defaultPayloadConverter.toPayload('summary')));
      expect(await nextReap()).toMatchObject({ kind: 'done', waiters: [] });
      await guard.handBack(lease, committed.waiters);
      expect(await handedWithin(5_000)).toEqual(['completed waiter-1']);
    } finally {
      await watch.close();
    }
  });

  it('looks for a put-back waiter afresh on each lock it waits on, however long ago it last missed it', async () => {
    const { guard, lot, lease, spot } = await parkOnHeldLock(30_000);
    const { watch, nextReap, handedWithin } = watchWaiter(lot, spot);
    try {
      // Such a holder fails and releases; this worker's reap misses the waiter, and before the
      // holder puts it back, another invocation takes the lock: the waiter now waits on that one.
      const released = await guard.release(lease);
      expect(await nextReap()).toMatchObject({ kind: 'free', waiters: [] });
      const second = await guard.acquire(target);
      if (second.kind !== 'acquired') throw new Error(`expected to acquire, got ${second.kind}`);
      await guard.handBack(lease, released.waiters);
      expect(await nextReap()).toEqual({ kind: 'held' });
      await sleep(HAND_BACK_WINDOW_MS + 200);
      // Longer than the window after the first miss, a holder that cannot complete it commits.
      const committed = await guard.commit(second.lease, payloadToBytes(defaultPayloadConverter.toPayload('summary')));
      expect(await nextReap()).toMatchObject({ kind: 'done', waiters: [] });
      await guard.handBack(second.lease, committed.waiters);
      expect(await handedWithin(5_000)).toEqual(['completed waiter-1']);
    } finally {
      await watch.close();
    }
  });

  it('puts back the waiters parked on a lock whose acquire is undone (no replica acknowledged it), for their reap', async () => {
    const prefix = testPrefix('parking');
    const synced = new FireOnceGuard({ redis, keyPrefix: prefix, replicaSync: { replicas: 1, timeoutMs: 400 } }); // no replica here acknowledges
    const lot = new ParkingLot(new FireOnceGuard({ redis, keyPrefix: prefix, replicaSync: false }));
    const call = { ...target, scope: 'session-undone' };
    const spot = lot.spot(call);
    const acquiring = synced.acquire(call).then(
      () => 'acquired',
      (err: Error) => err.name,
    );
    while ((await redis.exists(spot.lockKey)) === 0) await sleep(5);
    expect((await lot.park(call, Buffer.from('waiter-1'))).kind).toBe('parked');
    expect(await acquiring).toBe('FireOnceStoreUnavailable');
    // The undo's compare-and-delete took the list with the lock, and puts it back: the reap of the
    // waiter's worker finds the lock gone and fails it, so that it retries.
    await waitFor('the waiter list to be put back', async () => (await redis.llen(spot.waitersKey)) > 0, { timeoutMs: 2_000 });
    expect(await redis.exists(spot.lockKey)).toBe(0);
    const reaped = await lot.reap(spot);
    expect(reaped.kind === 'free' && reaped.waiters.map((w) => parseWaiter(w).token.toString())).toEqual(['waiter-1']);
  });
});
