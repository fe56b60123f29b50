import { randomUUID } from 'node:crypto';
import { Client, Connection, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, defaultPayloadConverter } from '@temporalio/common';
import type { Redis } from 'ioredis';
import { FireOnceGuard } from '../../src';
import { FireOnceKeys, formatArtifact, parseEvent } from '../../src/core';
import { payloadToBytes } from '../../src/worker/artifact';
import { argsHash } from '../../src/worker/args-hash';
import { counterKey, externalArtifactKey, type JobResult } from './fixtures/activities';
import type * as workflows from './fixtures/workflows';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { firstActivityAttempt } from '../support/temporal';
import { waitFor } from '../support/wait';
import { spawnWorker, type WorkerProcess } from '../support/workers';

// Parked waiters ('park', the default) on a real Temporal dev server and a real Redis, with two
// worker processes on two task queues, so that a waiter parked by one process is completed by the
// other's commit. Dispatches are counted by INCRs in the activity bodies.
describe("parked waiters ('park') on a real Temporal server, across two worker processes", () => {
  const prefix = testPrefix('park');
  // Queue c's worker reaps only every 15 s (MAX_REAP_EVERY_MS), after a first reap at its first tick.
  const queues = { a: `fire-once-park-a-${randomUUID()}`, b: `fire-once-park-b-${randomUUID()}`, c: `fire-once-park-c-${randomUUID()}` };
  const keys = new FireOnceKeys(prefix);
  const pace = { everyMs: 25 }; // how often waitFor polls
  const MAX_ARTIFACT_BYTES = 16_384; // bigJob's results go over it; every other fixture's stay far below
  let redis: Redis;
  let connection: Connection;
  let client: Client;
  let workers: WorkerProcess[] = [];

  beforeAll(async () => {
    redis = connectRedis();
    const env = {
      TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS as string,
      REDIS_URL: process.env.REDIS_URL as string,
      KEY_PREFIX: prefix,
      MAX_ARTIFACT_BYTES: String(MAX_ARTIFACT_BYTES),
    };
    const script = 'test/integration/fixtures/worker-process.ts';
    workers = await Promise.all([
      spawnWorker(script, { ...env, TASK_QUEUE: queues.a }),
      spawnWorker(script, { ...env, TASK_QUEUE: queues.b }),
      spawnWorker(script, { ...env, TASK_QUEUE: queues.c, POLL_INTERVAL_MS: '60000' }),
    ]);
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS as string });
    client = new Client({ connection });
  }, 180_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await connection?.close();
    await deletePrefix(redis, prefix);
    await redis.quit();
  });

  const dispatches = async (counterId: string) => Number((await redis.get(counterKey(prefix, counterId))) ?? 0);
  const start = <W extends 'parkedRun' | 'parkedFailFirstRun' | 'parkedExternalRun' | 'parkedBigRun' | 'parkedUnstorableRun' | 'parkedCodecRefusedRun'>(
    workflow: W,
    args: Parameters<(typeof workflows)[W]>,
  ): Promise<WorkflowHandle> => client.workflow.start(workflow, { taskQueue: queues.a, workflowId: `${workflow}-${randomUUID()}`, args } as never);
  /** The decisions the dispatch log holds for `scope`. */
  const decisions = async (scope: string) => {
    const entries = await redis.xrange(keys.log(), '-', '+');
    const counts: Record<string, number> = {};
    for (const [, fields] of entries) {
      const event = parseEvent(fields);
      if (event.scope === scope) counts[event.decision] = (counts[event.decision] ?? 0) + 1;
    }
    return counts;
  };
  /** Why the previous attempt of the run's activity ended: the last started attempt's `lastFailure`. */
  const previousFailure = async (handle: WorkflowHandle) => {
    const { events } = await handle.fetchHistory();
    const started = (events ?? []).filter((e) => e.activityTaskStartedEventAttributes).at(-1)?.activityTaskStartedEventAttributes;
    const last = started?.lastFailure;
    return last?.applicationFailureInfo?.type ?? (last?.timeoutFailureInfo ? 'timeout' : last ? 'other' : 'none');
  };
  /** Why the previous attempt of the run's pending activity ended (Temporal records a retried attempt's start only once it closes). */
  const pendingFailure = async (handle: WorkflowHandle) => {
    const last = (await handle.describe()).raw.pendingActivities?.[0]?.lastFailure;
    return last?.applicationFailureInfo?.type ?? (last ? 'other' : 'none');
  };
  const firstAttempt = firstActivityAttempt;
  const parkedNow = (scope: string, step: string) => redis.llen(keys.waiters(scope, step));

  it('20 runs of one scope with a 1.5 s job: waiters park, 1 dispatch, every run gets its result', async () => {
    const scope = `s-${randomUUID()}`;
    const counterId = randomUUID();
    const handles = await Promise.all(Array.from({ length: 20 }, (_, i) => start('parkedRun', [scope, counterId, 1_500, i % 2 ? queues.a : queues.b])));
    const results = await Promise.all(handles.map((h) => h.result() as Promise<JobResult>));
    expect(await dispatches(counterId)).toBe(1);
    expect(new Set(results.map((r) => r.nonce)).size).toBe(1);
    await waitFor('the dispatch log to have the commit', async () => (await decisions(scope)).committed === 1, pace);
    const seen = await decisions(scope);
    expect(seen.dispatched).toBe(1);
    expect(seen['in-flight-parked']).toBeGreaterThan(0);
    expect(seen['in-flight-waited'] ?? 0).toBe(0); // nobody waited in a slot
    expect(await redis.exists(keys.waiters(scope, 'slowJob'), keys.lock(scope, 'slowJob'))).toBe(0);
  });

  it("waiters parked by one worker process are completed by the other's commit", async () => {
    const scope = `s-${randomUUID()}`;
    const counterId = randomUUID();
    const holder = await start('parkedRun', [scope, counterId, 2_000, queues.a]); // only process A runs queue A
    await waitFor('the holder to dispatch', async () => (await dispatches(counterId)) === 1, pace);
    const waiters = await Promise.all(Array.from({ length: 5 }, () => start('parkedRun', [scope, counterId, 2_000, queues.b])));
    await waitFor('the 5 waiters to park', async () => (await parkedNow(scope, 'slowJob')) === 5, pace);
    const results = await Promise.all([holder, ...waiters].map((h) => h.result() as Promise<JobResult>));
    expect(await dispatches(counterId)).toBe(1);
    expect(new Set(results.map((r) => r.nonce)).size).toBe(1);
  });

  it('external-artifact mode: waiters park while the job runs outside, and the reap completes them once its artifact appears', async () => {
    const scope = `s-${randomUUID()}`;
    const counterId = randomUUID();
    const holder = await start('parkedExternalRun', [scope, counterId, queues.a]);
    await waitFor('the holder to dispatch', async () => (await dispatches(counterId)) === 1, pace);
    // The dispatch activity returns once the job is handed out; the lock stands until the job's artifact exists.
    const waiters = await Promise.all(Array.from({ length: 5 }, () => start('parkedExternalRun', [scope, counterId, queues.b])));
    await waitFor('the 5 waiters to park', async () => (await parkedNow(scope, 'externalDispatch')) === 5, pace);
    await redis.set(externalArtifactKey(prefix, scope, 'report'), `report-for-${scope}`); // the job, outside, writes it
    const results = await Promise.all([holder, ...waiters].map((h) => h.result()));
    expect(results).toEqual(results.map(() => `report-for-${scope}`));
    expect(await dispatches(counterId)).toBe(1);
    await waitFor('the dispatch log to have the 5 parkings', async () => ((await decisions(scope))['in-flight-parked'] ?? 0) >= 5, pace);
    const seen = await decisions(scope);
    expect(seen['in-flight-parked']).toBe(5);
    expect(seen['in-flight-waited'] ?? 0).toBe(0);
    expect(await redis.exists(keys.waiters(scope, 'externalDispatch'))).toBe(0);
    // Completed by the reap on its first attempt, not ended by a timeout and fast-forwarded on a retry.
    expect(await Promise.all(waiters.map(firstAttempt))).toEqual(waiters.map(() => 1));
  });

  it('a release on failure fails the parked waiters at once; one of them acquires, the rest get its result', async () => {
    const scope = `s-${randomUUID()}`;
    const counterId = randomUUID();
    const holder = await start('parkedFailFirstRun', [scope, counterId, 1_000, queues.a]);
    await waitFor('the holder to dispatch', async () => (await dispatches(counterId)) === 1, pace);
    const waiters = await Promise.all(Array.from({ length: 5 }, () => start('parkedFailFirstRun', [scope, counterId, 1_000, queues.b])));
    await waitFor('the 5 waiters to park', async () => (await parkedNow(scope, 'failFirstJob')) === 5, pace);
    const failure = await holder.result().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect(((failure as WorkflowFailedError).cause?.cause as ApplicationFailure).type).toBe('FixtureFailure');
    const results = await Promise.all(waiters.map((h) => h.result() as Promise<JobResult>));
    expect(await dispatches(counterId)).toBe(2); // the failed one, and exactly one by a waiter
    expect(new Set(results.map((r) => r.nonce)).size).toBe(1);
    // Each waiter's first attempt was failed by the release (retryable FireOnceInFlight), not
    // ended by its heartbeat timeout.
    expect(await Promise.all(waiters.map(previousFailure))).toEqual(waiters.map(() => 'FireOnceInFlight'));
  });

  it('a parked waiter whose workflow is cancelled or terminated leaves nothing broken', async () => {
    const scope = `s-${randomUUID()}`;
    const counterId = randomUUID();
    const holder = await start('parkedRun', [scope, counterId, 3_000, queues.a]);
    await waitFor('the holder to dispatch', async () => (await dispatches(counterId)) === 1, pace);
    const [cancelled, terminated, kept] = await Promise.all(Array.from({ length: 3 }, () => start('parkedRun', [scope, counterId, 3_000, queues.b])));
    await waitFor('the 3 waiters to park', async () => (await parkedNow(scope, 'slowJob')) === 3, pace);
    await cancelled.cancel();
    await terminated.terminate('test');
    const cancelledOutcome = await cancelled.result().catch((e: unknown) => e);
    expect((cancelledOutcome as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    await expect(terminated.result()).rejects.toBeInstanceOf(WorkflowFailedError);
    const [held, waited] = (await Promise.all([holder.result(), kept.result()])) as JobResult[];
    expect(waited.nonce).toBe(held.nonce);
    expect(await dispatches(counterId)).toBe(1);
    expect(await redis.exists(keys.waiters(scope, 'slowJob'), keys.lock(scope, 'slowJob'))).toBe(0);
    // Both worker processes still serve: a new run fast-forwards on each queue.
    const later = await Promise.all([queues.a, queues.b].map(async (q) => (await start('parkedRun', [scope, counterId, 3_000, q])).result()));
    expect((later as JobResult[]).map((r) => r.nonce)).toEqual([held.nonce, held.nonce]);
    expect(await dispatches(counterId)).toBe(1);
  });

  /** A holder on queue A, then 5 waiters parked by process B. */
  async function holderAndParkedWaiters(startOne: (queue: string) => Promise<WorkflowHandle>, counterId: string, scope: string, step: string) {
    const holder = await startOne(queues.a);
    await waitFor('the holder to dispatch', async () => (await dispatches(counterId)) === 1, pace);
    const waiters = await Promise.all(Array.from({ length: 5 }, () => startOne(queues.b)));
    await waitFor('the 5 waiters to park', async () => (await parkedNow(scope, step)) === 5, pace);
    return { holder, waiters };
  }

  it('a result over maxArtifactBytes, delivered but not stored, completes the parked waiters with it: 1 dispatch, not a second once the lock expires', async () => {
    const scope = `s-${randomUUID()}`;
    const counterId = randomUUID();
    const { holder, waiters } = await holderAndParkedWaiters(
      (q) => start('parkedBigRun', [scope, counterId, 1_500, 2 * MAX_ARTIFACT_BYTES, q]),
      counterId,
      scope,
      'bigJob',
    );
    const results = (await Promise.all([holder, ...waiters].map((h) => h.result()))) as (JobResult & { padding: string })[];
    expect(new Set(results.map((r) => r.nonce)).size).toBe(1);
    expect(results.map((r) => r.padding.length)).toEqual(results.map(() => 2 * MAX_ARTIFACT_BYTES));
    expect(await dispatches(counterId)).toBe(1);
    // Completed by the hold's hand-over on their first attempt, not by a timeout and a retry.
    expect(await Promise.all(waiters.map(firstAttempt))).toEqual(waiters.map(() => 1));
    // Nothing stored; the lock still holds later invocations off, and no waiter is left on it.
    expect(await redis.exists(keys.artifact(scope, 'bigJob'))).toBe(0);
    expect(await redis.exists(keys.lock(scope, 'bigJob'))).toBe(1);
    expect(await parkedNow(scope, 'bigJob')).toBe(0);
  });

  it('a result the converter refuses fails the parked waiters as it fails the holder, for good: 1 dispatch', async () => {
    const scope = `s-${randomUUID()}`;
    const counterId = randomUUID();
    const { holder, waiters } = await holderAndParkedWaiters(
      (q) => start('parkedUnstorableRun', [scope, counterId, 1_500, q]),
      counterId,
      scope,
      'unstorableJob',
    );
    const outcomes = await Promise.all([holder, ...waiters].map((h) => h.result().catch((e: unknown) => e)));
    for (const outcome of outcomes) {
      expect(outcome).toBeInstanceOf(WorkflowFailedError);
      const failure = (outcome as WorkflowFailedError).cause?.cause as ApplicationFailure;
      expect([failure.type, failure.nonRetryable]).toEqual(['FireOnceUnstorableResult', true]);
    }
    expect(await dispatches(counterId)).toBe(1);
    expect(await Promise.all(waiters.map(firstAttempt))).toEqual(waiters.map(() => 1));
    expect(await parkedNow(scope, 'unstorableJob')).toBe(0);
  });

  it('a result the payload codec refuses fails the parked waiters as Temporal fails the holder, retryably, at once', async () => {
    const scope = `s-${randomUUID()}`;
    const counterId = randomUUID();
    const { holder, waiters } = await holderAndParkedWaiters(
      (q) => start('parkedCodecRefusedRun', [scope, counterId, 1_500, q]),
      counterId,
      scope,
      'codecRefusedJob',
    );
    try {
      // The holder's own completion goes through the same codec, so Temporal fails its attempt
      // with the codec's error. The waiters get that failure now, not after the lock (held for
      // lockTtlMs, 15 minutes) and their heartbeat timeout.
      const runs = [holder, ...waiters];
      await waitFor('every run to be on a later attempt', async () => (await Promise.all(runs.map(pendingFailure))).every((f) => f !== 'none'), pace);
      expect(await Promise.all(runs.map(pendingFailure))).toEqual(runs.map(() => 'CodecRefusedError'));
      expect(await dispatches(counterId)).toBe(1);
      expect(await redis.exists(keys.artifact(scope, 'codecRefusedJob'))).toBe(0);
    } finally {
      // Their retries wait on the held lock; end them rather than wait out its TTL.
      await Promise.all([holder, ...waiters].map((h) => h.terminate('test done').catch(() => undefined)));
    }
  });

  it('a stored result its worker cannot read, found by a reap, fails the parked waiters at once, as a fast-forward to it fails', async () => {
    // Another process (a Python worker, another codec) holds each scope's step, and 'slowJob'
    // waiters park on it. That process then stores what this fleet cannot read, deletes its lock
    // and leaves the waiters to their worker's reap.
    const unreadable: Record<string, (key: string) => Promise<unknown>> = {
      'not a string': (key) => redis.hset(key, 'result', 'x'),
      'not a record': (key) => redis.set(key, 'no record of this library'),
      'not a payload': (key) => redis.set(key, '3::no serialised payload'),
    };
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    const counterId = randomUUID();
    const runs = await Promise.all(
      Object.entries(unreadable).map(async ([what, write]) => {
        const scope = `s-${randomUUID()}`;
        const held = await guard.acquire({ scope, step: 'slowJob', jobType: 'slowJob', holder: 'elsewhere' });
        expect(held.kind).toBe('acquired');
        const waiter = await start('parkedRun', [scope, counterId, 100, queues.b]);
        await waitFor(`the waiter to park (${what})`, async () => (await parkedNow(scope, 'slowJob')) === 1, pace);
        await write(keys.artifact(scope, 'slowJob'));
        await redis.del(keys.lock(scope, 'slowJob'));
        return { what, waiter };
      }),
    );
    for (const { what, waiter } of runs) {
      const outcome = await waiter.result().catch((e: unknown) => e);
      expect([what, ((outcome as WorkflowFailedError).cause?.cause as ApplicationFailure | undefined)?.type]).toEqual([what, 'FireOnceCorruptArtifact']);
      // Failed on the attempt that parked: not stranded until a timeout, not retried.
      expect([what, await firstAttempt(waiter)]).toEqual([what, 1]);
    }
    expect(await dispatches(counterId)).toBe(0);
  });

  /**
   * Three waiters of slowJob(counterId, 100), on `queue`, park on the lock of an invocation
   * elsewhere that holds `scope`'s step with no args hash (waiters of any arguments park on it).
   */
  async function parkOnLockElsewhere(queue: string) {
    const scope = `s-${randomUUID()}`;
    const counterId = randomUUID();
    const held = await new FireOnceGuard({ redis, keyPrefix: prefix }).acquire({ scope, step: 'slowJob', jobType: 'slowJob', holder: 'elsewhere' });
    expect(held.kind).toBe('acquired');
    const waiters = await Promise.all(Array.from({ length: 3 }, () => start('parkedRun', [scope, counterId, 100, queue])));
    await waitFor('the 3 waiters to park', async () => (await parkedNow(scope, 'slowJob')) === 3, pace);
    return { scope, counterId, waiters };
  }

  /** Each waiter was failed at once so that it retried, and its retry met a result of other arguments: FireOnceKeyConflict. */
  async function expectConflictOnRetry(waiters: WorkflowHandle[]) {
    for (const waiter of waiters) {
      const outcome = await waiter.result().catch((e: unknown) => e);
      expect(((outcome as WorkflowFailedError).cause?.cause as ApplicationFailure | undefined)?.type ?? outcome).toBe('FireOnceKeyConflict');
      expect(await previousFailure(waiter)).toBe('FireOnceInFlight');
    }
  }

  it('a holder that took the step over with other arguments completes only waiters of the same arguments: the rest retry and meet the conflict', async () => {
    // The holder elsewhere dies; before the waiters' worker reaps again, an invocation of
    // slowJob(counterId, 150) takes the step over, and its commit hands it their list.
    const { scope, counterId, waiters } = await parkOnLockElsewhere(queues.c);
    await new Promise((r) => setTimeout(r, 2_500)); // past queue c's first reap (at its first tick, 1 s in): the next is 15 s away
    await redis.del(keys.lock(scope, 'slowJob')); // its lock expired
    const taker = await start('parkedRun', [scope, counterId, 150, queues.a]);
    expect(((await taker.result()) as JobResult).counterId).toBe(counterId);
    await expectConflictOnRetry(waiters);
    expect(await dispatches(counterId)).toBe(1);
  });

  it('a stored result of other arguments, found by a reap, is not given to the waiters: they retry and meet the conflict', async () => {
    // As a holder in another process (a Python worker, say) that took the step over with other
    // arguments leaves it: its result stored, its lock gone, the waiters put back on their list.
    const { scope, counterId, waiters } = await parkOnLockElsewhere(queues.b);
    const otherArgs = argsHash({}, [counterId, 150], defaultPayloadConverter);
    const payload = payloadToBytes(defaultPayloadConverter.toPayload({ counterId, nonce: 'made with other arguments' }));
    await redis.set(keys.artifact(scope, 'slowJob'), formatArtifact(otherArgs, payload));
    await redis.del(keys.lock(scope, 'slowJob'));
    await expectConflictOnRetry(waiters);
    expect(await dispatches(counterId)).toBe(0);
  });
});
