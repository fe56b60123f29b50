import { Worker } from '@temporalio/worker';
import { FireOncePlugin, type FireOncePluginOptions } from '../../src';
import { FireOnceKeys, parseEvent } from '../../src/core';
import { firstActivityAttempt } from '../support/temporal';
import { waitFor } from '../support/wait';
import { guardedActivities } from './fixtures/activities';
import type { ParkableOptions } from './fixtures/parkable-workflows';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';

describe('Temporal features: worker slots, heartbeat timeouts, workers of other options', () => {
  const { harness: h, context, withWorker } = useFeatures('slots');
  const JOB_MS = 3_000;
  const start = (ctx: FeatureContext, scope: string, options: ParkableOptions, taskQueue = ctx.taskQueue) =>
    ctx.client.workflow.start('parkableRun', { taskQueue, workflowId: `parkable-${newScope('run')}`, args: [scope, JOB_MS, options] });

  /** A worker on `taskQueue` with the plugin of `options` and the guarded fixture activities. */
  const workerOf = (ctx: FeatureContext, base: ReturnType<typeof context>['base'], taskQueue: string, plugin: Partial<FireOncePluginOptions>, max?: number) =>
    Worker.create({
      connection: base.connection,
      taskQueue,
      workflowBundle: base.workflowBundle,
      activities: guardedActivities(h.redis, ctx.prefix),
      plugins: [new FireOncePlugin({ redis: h.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50, ...plugin })],
      ...(max === undefined ? {} : { maxConcurrentActivityTaskExecutions: max }),
    });

  it('maxConcurrentActivityTaskExecutions 1: parked waiters give the one slot back, so 3 park on it while the holder runs elsewhere', async () => {
    const { ctx, base } = context();
    const other = `${ctx.taskQueue}-b`;
    const scope = newScope('one-slot');
    const options: ParkableOptions = { job: 'dispatchJob', heartbeatTimeoutMs: 1_000 };
    const [a, b] = await Promise.all([ctx.taskQueue, other].map((q) => workerOf(ctx, base, q, {}, 1)));
    const results = await a.runUntil(async () => {
      const holder = await start(ctx, scope, options);
      await ctx.started('dispatchJob', scope);
      return b.runUntil(async () => {
        const waiters = await Promise.all([1, 2, 3].map(() => start(ctx, scope, options, other)));
        await waitFor('3 parked waiters', async () => (await ctx.redis.llen(new FireOnceKeys(ctx.prefix).waiters(scope, 'dispatchJob'))) === 3);
        expect(await ctx.count('dispatchJob', scope, 'finished')).toBe(0); // all parked on B's one slot while the job ran
        return Promise.all([holder, ...waiters].map(async (w) => (await w.result()).result!));
      });
    });
    oneResult(results, scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(1);
  });

  it('a holder whose job outlives its heartbeat timeout: the retry parks on its lock and gets its result, 1 dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('hb-holder');
      const options: ParkableOptions = { job: 'dispatchJob', heartbeatTimeoutMs: 1_000 }; // the job never heartbeats
      const holder = await start(ctx, scope, options);
      await ctx.started('dispatchJob', scope);
      const later = await start(ctx, scope, options);
      oneResult(await Promise.all([holder, later].map(async (w) => (await w.result()).result!)), scope);
      expect(await firstActivityAttempt(holder)).toBeGreaterThan(1); // its first attempt timed out
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
      // The holder's own retry parked, rather than waiting in its slot or dispatching.
      const log = new FireOnceKeys(ctx.prefix).log();
      await waitFor('the retry to be logged as parked', async () =>
        (await ctx.redis.xrange(log, '-', '+'))
          .map(([, fields]) => parseEvent(fields))
          .some((e) => e.workflowId === holder.workflowId && e.decision === 'in-flight-parked' && (e.attempt ?? 0) > 1),
      );
    }));

  it('workers of other plugin options on two task queues share the keys: park and wait, lease and fixed, cache and none, 1 dispatch', async () => {
    const { ctx, base } = context();
    const other = `${ctx.taskQueue}-b`;
    const scope = newScope('mixed');
    const options: ParkableOptions = { job: 'dispatchJob', heartbeatTimeoutMs: 1_000 };
    const a = await workerOf(ctx, base, ctx.taskQueue, { onInFlight: 'park', lockMode: 'lease', leaseMs: 1_000 });
    const b = await workerOf(ctx, base, other, {
      onInFlight: 'wait',
      lockMode: 'fixed',
      localCache: { maxEntries: 10 },
      publishWakeUps: false,
      pollIntervalMs: 200,
    });
    const results = await a.runUntil(
      b.runUntil(async () => {
        const first = await start(ctx, scope, options, other);
        await ctx.started('dispatchJob', scope);
        const runs = await Promise.all([ctx.taskQueue, other, ctx.taskQueue, other].map((q) => start(ctx, scope, options, q)));
        const all = await Promise.all([first, ...runs].map(async (w) => (await w.result()).result!));
        const later = await Promise.all([ctx.taskQueue, other].map(async (q) => (await (await start(ctx, scope, options, q)).result()).result!));
        return [...all, ...later];
      }),
    );
    oneResult(results, scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(1);
  });
});
