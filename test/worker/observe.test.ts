import { ApplicationFailure, type MetricCounter, type MetricHistogram, type MetricMeter, type MetricTags } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { Redis } from 'ioredis';
import { FireOnceGuard, fireOnce } from '../../src';
import { DispatchLog, METRICS, createFireOnceActivityInterceptor, fireOnceActivityMap, formatWaiter, parseEvent } from '../../src/core';
import type { Client } from '@temporalio/client';
import { connectRedis, deletePrefix, testPrefix, useGuardFixture } from '../support/redis';
import { spawnRedisServer } from '../support/redis-server';
import { waitFor } from '../support/wait';

/** A MetricMeter that records every data point with its merged tags. */
function recordingMeter(points: { name: string; value: number; tags: MetricTags }[], base: MetricTags = {}): MetricMeter {
  const metric = (name: string) => ({
    name,
    kind: 'counter' as const,
    valueType: 'int' as const,
    add: (value: number, extra: MetricTags = {}) => void points.push({ name, value, tags: { ...base, ...extra } }),
    record: (value: number, extra: MetricTags = {}) => void points.push({ name, value, tags: { ...base, ...extra } }),
    set: () => undefined,
    withTags: () => metric(name),
  });
  return {
    createCounter: (name) => metric(name) as unknown as MetricCounter,
    createHistogram: (name) => metric(name) as unknown as MetricHistogram,
    createGauge: (name) => metric(name) as never,
    withTags: (tags) => recordingMeter(points, { ...base, ...tags }),
  };
}

describe('dispatch log and metrics', () => {
  const fx = useGuardFixture('obs');
  let redis: Redis;
  let guard: FireOnceGuard;
  beforeEach(() => ({ redis, guard } = fx));

  it('appends each decision with its IDs, never a payload, and counts it by decision without the scope tag', async () => {
    const secret = 'secret-argument-9931';
    const log = new DispatchLog(redis, guard.keys, 1_000);
    const points: { name: string; value: number; tags: MetricTags }[] = [];
    const activities = {
      job: fireOnce(async (scope: string, _text: string) => `result for ${scope} ${secret}`, { scope: ([s]) => s }),
    };
    const run = async (attempt: number) => {
      const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), dispatchLog: log });
      const env = new MockActivityEnvironment(
        {
          namespace: 'default',
          activityType: 'job',
          attempt,
          activityId: `act-${attempt}`,
          workflowExecution: { workflowId: 'wf-1', runId: `run-${attempt}` },
          startToCloseTimeoutMs: 10_000,
          currentAttemptScheduledTimestampMs: Date.now(),
        },
        { interceptors: [factory], metricMeter: recordingMeter(points) },
      );
      return env.run(activities.job, 'session-7', secret);
    };
    await run(1);
    await run(2);
    await log.flush(); // appends are batched, never awaited by the guard
    const entries = await redis.xrange(guard.keys.log(), '-', '+');
    const events = entries.map(([, fields]) => parseEvent(fields));
    expect(events.map((e) => e.decision)).toEqual(['dispatched', 'committed', 'fast-forwarded']);
    expect(events[0]).toMatchObject({
      scope: 'session-7',
      step: 'job',
      jobType: 'job',
      workflowId: 'wf-1',
      runId: 'run-1',
      activityId: 'act-1',
      attempt: 1,
      namespace: 'default',
    });
    expect(events[1].fencingToken).toBe(events[0].fencingToken);
    expect(events[0].fencingToken).toBeGreaterThan(1e15); // the server clock, in microseconds
    expect(events[0].holder).toMatch(/^[0-9a-f]{12}$/);
    expect(events[2]).toMatchObject({ runId: 'run-2', attempt: 2 });
    expect(JSON.stringify(entries)).not.toContain(secret);

    const decisions = points.filter((p) => p.name === METRICS.decisions);
    expect(decisions.map((p) => p.tags.decision)).toEqual(['dispatched', 'committed', 'fast-forwarded']);
    expect(decisions[0].tags).toMatchObject({ activity_type: 'job', step: 'job', job_type: 'job' });
    expect(points.every((p) => !('scope' in p.tags))).toBe(true);
    expect(points.filter((p) => p.name === METRICS.acquireLatency)).toHaveLength(2);
  });

  it("tags each activity's metrics with that activity's own meter tags, one worker serving both", async () => {
    // The worker's activity meter carries the activity's tags, and interceptors may add their own
    // (getMetricTags). A guard that kept the first activity's instruments would report its tags.
    const points: { name: string; value: number; tags: MetricTags }[] = [];
    const activities = { job: fireOnce(async (scope: string) => `result for ${scope}`, { scope: ([s]) => s }) };
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities) });
    for (const workflowType of ['Checkout', 'Refund']) {
      const env = new MockActivityEnvironment(
        { activityType: 'job', workflowType, startToCloseTimeoutMs: 10_000, currentAttemptScheduledTimestampMs: Date.now() },
        { interceptors: [factory], metricMeter: recordingMeter(points, { workflow_type: workflowType }) },
      );
      await env.run(activities.job, `session-${workflowType}`);
    }
    const tagsOf = (decision: string) => points.filter((p) => p.name === METRICS.decisions && p.tags.decision === decision).map((p) => p.tags.workflow_type);
    expect(tagsOf('dispatched')).toEqual(['Checkout', 'Refund']);
    expect(tagsOf('committed')).toEqual(['Checkout', 'Refund']);
    expect(points.filter((p) => p.name === METRICS.acquireLatency).map((p) => p.tags.workflow_type)).toEqual(['Checkout', 'Refund']);
  });

  it('appends every event of a flush whole and in order, across batches of at most 200', async () => {
    const log = new DispatchLog(redis, guard.keys, 10_000);
    const expected = Array.from({ length: 450 }, (_, i) => [`s${i}`, i % 2 === 1 ? 'committed' : 'dispatched', i, i % 3 === 0] as const);
    for (const [scope, decision, attempt, late] of expected) log.record({ decision, scope, step: 'x', jobType: 'j', attempt, ...(late ? { late } : {}) });
    await log.flush();
    const events = (await redis.xrange(guard.keys.log(), '-', '+')).map(([, fields]) => parseEvent(fields));
    expect(events.map((e) => [e.scope, e.decision, e.attempt, e.late ?? false])).toEqual(expected);
    expect(log.dropped).toBe(0);
  });

  it('caps the stream at about maxLen entries', async () => {
    const log = new DispatchLog(redis, guard.keys, 100);
    for (let i = 0; i < 1_000; i++) log.record({ decision: 'dispatched', scope: `s${i}`, step: 'x', jobType: 'x' });
    await log.flush();
    const length = await redis.xlen(guard.keys.log());
    expect(length).toBeGreaterThanOrEqual(100);
    expect(length).toBeLessThan(1_000);
  });
});

describe('observeOnly', () => {
  it('observeOnly never fails a call: one the guard would refuse (no scope) runs, unlogged, with a WARN saying why', async () => {
    const redis = connectRedis();
    const prefix = testPrefix('observe-only-refused');
    try {
      const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
      const log = new DispatchLog(redis, guard.keys, 1_000);
      let runs = 0;
      const activities = { job: fireOnce(async (s: string) => (runs++, s), { observeOnly: true }) }; // no scope option, no header
      const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), dispatchLog: log });
      const env = new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [factory] });
      const warnings: unknown[][] = [];
      const warn = jest.spyOn(env.context.log, 'warn').mockImplementation((...args: unknown[]) => void warnings.push(args));
      expect(await env.run(activities.job, 's')).toBe('s');
      warn.mockRestore();
      await log.flush();
      expect(runs).toBe(1);
      expect(await redis.xlen(guard.keys.log())).toBe(0);
      expect(warnings).toEqual([
        [expect.stringMatching(/^fire-once: observeOnly: the guard would refuse this call \(FireOnceMissingScope: /), expect.anything()],
      ]);
    } finally {
      await deletePrefix(redis, prefix);
      await redis.quit();
    }
  });

  it('logs every call as dispatched but never guards', async () => {
    const redis = connectRedis();
    const prefix = testPrefix('observe-only');
    try {
      const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
      const log = new DispatchLog(redis, guard.keys, 1_000);
      let runs = 0;
      const activities = { job: fireOnce(async (s: string) => (runs++, s), { scope: ([s]) => s, observeOnly: true }) };
      for (let i = 0; i < 3; i++) {
        const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), dispatchLog: log });
        const env = new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [factory] });
        expect(await env.run(activities.job, 's')).toBe('s');
      }
      await log.flush();
      const events = (await redis.xrange(guard.keys.log(), '-', '+')).map(([, f]) => parseEvent(f));
      expect(runs).toBe(3);
      expect(events.map((e) => e.decision)).toEqual(['dispatched', 'dispatched', 'dispatched']);
      expect(await redis.exists(guard.keys.lock('s', 'job'))).toBe(0);
    } finally {
      await deletePrefix(redis, prefix);
      await redis.quit();
    }
  });
});

// Redis stalls (CLIENT PAUSE, on a server of the test's own) just as the job ends: the store call
// that settles the lock times out after storeTimeoutMs, and lands when Redis answers again. What
// it did then must still be done, and said.
describe('a settling call that timed out and landed later', () => {
  let server: Awaited<ReturnType<typeof spawnRedisServer>>;
  let redis: Redis;
  let admin: Redis;
  let guard: FireOnceGuard;
  beforeEach(async () => {
    server = await spawnRedisServer();
    [redis, admin] = [new Redis(server.url), new Redis(server.url)];
    guard = new FireOnceGuard({ redis, keyPrefix: testPrefix('observe-late'), storeTimeoutMs: 200 });
  });
  afterEach(async () => {
    redis.disconnect();
    admin.disconnect();
    await server.stop();
  });
  /** Every client's next command waits 1.5 s: the store call times out after 200 ms, and lands well after. */
  const stall = () => admin.call('CLIENT', 'PAUSE', '1500');

  it('a release: logged as released-on-failure, late', async () => {
    const log = new DispatchLog(redis, guard.keys, 1_000);
    const activities = {
      job: fireOnce(
        async (_scope: string) => {
          await stall();
          throw ApplicationFailure.nonRetryable('the job failed');
        },
        { scope: ([s]) => s },
      ),
    };
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), dispatchLog: log });
    const env = new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [factory] });
    await expect(env.run(activities.job, 's')).rejects.toThrow('the job failed');
    const events = await waitFor('the late release in the log', async () => {
      await log.flush();
      const logged = (await redis.xrange(guard.keys.log(), '-', '+')).map(([, f]) => parseEvent(f));
      return logged.some((e) => e.decision === 'released-on-failure') && logged;
    });
    expect(events.map((e) => [e.decision, e.late])).toEqual([
      ['dispatched', undefined],
      ['released-on-failure', true],
    ]);
    expect(await redis.exists(guard.keys.lock('s', 'job'))).toBe(0);
  });

  it('the hold of a result over maxArtifactBytes: its parked waiter is handed the result', async () => {
    const big = 'x'.repeat(5_000);
    const activities = {
      job: fireOnce(
        async (scope: string) => {
          await redis.rpush(guard.keys.waiters(scope, 'job'), formatWaiter('', Buffer.from('waiter-token'))); // parked meanwhile
          await stall();
          return big;
        },
        { scope: ([s]) => s, lockTtlMs: 60_000 },
      ),
    };
    // The worker's Temporal client, as the hand-over uses it: what it is asked to do is recorded.
    const handed: string[] = [];
    const client = {
      withAbortSignal: (_signal: AbortSignal, fn: () => Promise<unknown>) => fn(),
      activity: {
        complete: async (token: Uint8Array) => void handed.push(`complete ${Buffer.from(token).toString()}`),
        fail: async (token: Uint8Array) => void handed.push(`fail ${Buffer.from(token).toString()}`),
      },
    } as unknown as Client;
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), maxArtifactBytes: 1_000 });
    const env = new MockActivityEnvironment({ namespace: 'default', activityType: 'job' }, { interceptors: [factory], client });
    await env.run(activities.job, 's'); // delivered at once; the hold (keep) is still stalled
    expect(handed).toEqual([]);
    await waitFor('the late hold to hand the waiter over', async () => handed.length > 0);
    expect(handed).toEqual(['complete waiter-token']);
    expect(await redis.pttl(guard.keys.lock('s', 'job'))).toBeGreaterThan(30_000); // held for lockTtlMs
  });
});
