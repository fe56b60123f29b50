import type { WorkflowHandle } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { FireOnceKeys } from '../../src/core';
import { waitFor } from '../support/wait';
import type { ParkableOptions } from './fixtures/parkable-workflows';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';

describe('Temporal features: parked waiters under cancellation types and activity options', () => {
  const { withWorker } = useFeatures('parkopt');
  const JOB_MS = 3_000;

  const start = (ctx: FeatureContext, scope: string, options: ParkableOptions) => ctx.start('parkableRun', [scope, JOB_MS, options]);
  const parked = (ctx: FeatureContext, scope: string, job: string, n: number) =>
    waitFor(`${n} parked waiter(s)`, async () => (await ctx.redis.llen(new FireOnceKeys(ctx.prefix).waiters(scope, job))) === n);
  const activityOf = (ctx: FeatureContext, h: WorkflowHandle) => ({
    namespace: ctx.client.options.namespace,
    execution: { workflowId: h.workflowId },
    id: '1',
    identity: 'fire-once test',
  });

  it.each(['TRY_CANCEL', 'WAIT_CANCELLATION_COMPLETED', 'ABANDON'] as const)(
    '%s on a parked waiter: its run ends at once, the holder’s one dispatch serves the rest',
    (cancellationType) =>
      withWorker(async (ctx) => {
        const scope = newScope(`cancel-${cancellationType}`);
        const options: ParkableOptions = { job: 'heartbeatingJob', cancellationType, heartbeatTimeoutMs: 1_000 };
        const holder = await start(ctx, scope, options);
        await ctx.started('heartbeatingJob', scope);
        const waiter = await start(ctx, scope, options);
        await parked(ctx, scope, 'heartbeatingJob', 1);
        await waiter.cancel();
        expect(await waiter.result()).toEqual({ cancelled: true });
        expect(await ctx.count('heartbeatingJob', scope, 'finished')).toBe(0);
        const later = await start(ctx, scope, options);
        oneResult([(await holder.result()).result!, (await later.result()).result!], scope);
        expect(await ctx.count('heartbeatingJob', scope)).toBe(1);
      }),
  );

  // [name, options, [starts, finished]]: an abandoned job runs on and commits; a job told of its cancellation stops, and releases.
  const holders: [string, ParkableOptions, [number, number]][] = [
    [
      'ABANDON on a holder whose job does not heartbeat: its job runs on and commits, the parked waiters get its result',
      { job: 'dispatchJob', cancellationType: 'ABANDON' },
      [1, 1],
    ],
    [
      'TRY_CANCEL on a holder whose job heartbeats: its job stops and releases the lock, the parked waiters share one new dispatch',
      // 2 s, not 1: on a loaded machine the new dispatch's heartbeats (sent at most every 0.8 of
      // the timeout) came late once, its attempt timed out and a third dispatch ran (3 starts).
      { job: 'heartbeatingJob', cancellationType: 'TRY_CANCEL', heartbeatTimeoutMs: 2_000 },
      [2, 1],
    ],
  ];

  it.each(holders)('%s', (_name, options, counts) =>
    withWorker(async (ctx) => {
      const scope = newScope(`holder-${options.cancellationType!}`);
      const holder = await start(ctx, scope, options);
      await ctx.started(options.job, scope);
      const waiters = await Promise.all([start(ctx, scope, options), start(ctx, scope, options)]);
      await parked(ctx, scope, options.job, 2);
      await holder.cancel();
      expect(await holder.result()).toEqual({ cancelled: true });
      oneResult(await Promise.all(waiters.map(async (h) => (await h.result()).result!)), scope);
      expect([await ctx.count(options.job, scope), await ctx.count(options.job, scope, 'finished')]).toEqual(counts);
    }),
  );

  it('continue-as-new while the job is parked: the new run schedules it again and gets the holder’s result', () =>
    withWorker(async (ctx) => {
      const scope = newScope('can-parked');
      const holder = await ctx.start('canWhileParkedRun', [scope, JOB_MS, false]);
      await ctx.started('dispatchJob', scope);
      const mover = await ctx.start('canWhileParkedRun', [scope, JOB_MS, true]);
      await parked(ctx, scope, 'dispatchJob', 1);
      await mover.signal('moveOn');
      oneResult(await Promise.all([holder.result(), ctx.client.workflow.getHandle(mover.workflowId).result()]), scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));

  // `temporal activity reset` and `temporal activity update-options` (the same RPCs through the client) on a parked waiter.
  const changes = {
    'activity reset of a parked waiter': {
      heartbeatTimeoutMs: 1_000,
      change: (ctx: FeatureContext, h: WorkflowHandle) => ctx.client.workflowService.resetActivity(activityOf(ctx, h)),
    },
    'activity update-options shortening a parked waiter’s heartbeat timeout from 20 s to 1 s': {
      heartbeatTimeoutMs: 20_000,
      change: (ctx: FeatureContext, h: WorkflowHandle) =>
        ctx.client.workflowService.updateActivityOptions({
          ...activityOf(ctx, h),
          activityOptions: { heartbeatTimeout: msToTs('1s') },
          updateMask: { paths: ['heartbeat_timeout'] },
        }),
    },
  };

  it.each(Object.keys(changes) as (keyof typeof changes)[])('%s: it still gets the holder’s result, 1 dispatch', (name) =>
    withWorker(async (ctx) => {
      const scope = newScope('changed-parked');
      const options: ParkableOptions = { job: 'dispatchJob', heartbeatTimeoutMs: changes[name].heartbeatTimeoutMs };
      const holder = await start(ctx, scope, options);
      await ctx.started('dispatchJob', scope);
      const waiter = await start(ctx, scope, options);
      await parked(ctx, scope, 'dispatchJob', 1);
      await changes[name].change(ctx, waiter);
      oneResult(await Promise.all([holder, waiter].map(async (h) => (await h.result()).result!)), scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }),
  );
});
