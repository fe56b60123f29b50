import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { FireOnceKeys } from '../../src/core';
import { waitFor } from '../support/wait';
import type { retriedRun } from './fixtures/workflows';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';

const STARTED = temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;

// `temporal activity pause | unpause | reset` (the same RPCs through the client here) on the
// guarded activity of a run: the holder, whose job heartbeats and stops when the worker tells it
// the activity was paused or reset, and a waiter in its slot. A parked waiter paused is in
// test/integration/parked-heartbeat.test.ts. Every run uses retriedRun (retries, 2 s heartbeat timeout).
describe('Temporal features: activity pause and reset', () => {
  const { withWorker } = useFeatures('pause');
  const JOB_MS = 3_000;

  const start = (ctx: FeatureContext, scope: string) =>
    ctx.start('retriedRun', [scope, JOB_MS, 'heartbeatingJob']) as Promise<WorkflowHandle<typeof retriedRun>>;
  const activityOf = (ctx: FeatureContext, h: WorkflowHandle) => ({
    namespace: ctx.client.options.namespace,
    execution: { workflowId: h.workflowId },
    id: '1', // the run's one activity
    identity: 'fire-once test',
  });
  const pending = async (h: WorkflowHandle) => (await h.describe()).raw.pendingActivities?.[0];
  /** The type of the failure that ended the activity's last attempt, once one has. */
  const lastFailureType = async (h: WorkflowHandle) => {
    await waitFor(`an attempt of ${h.workflowId} to end`, async () => (await pending(h))?.lastFailure != null);
    const failure = (await pending(h))?.lastFailure;
    return failure?.applicationFailureInfo?.type ?? (failure?.timeoutFailureInfo ? 'timeout' : 'other');
  };
  const parked = (ctx: FeatureContext, scope: string, n: number) =>
    waitFor(`${n} parked waiter(s)`, async () => (await ctx.redis.llen(new FireOnceKeys(ctx.prefix).waiters(scope, 'heartbeatingJob'))) === n);

  it('pausing the holder stops its job and releases the lock: the parked waiters retry, one dispatches, and the holder, unpaused, gets its result', () =>
    withWorker(async (ctx) => {
      const scope = newScope('pause-holder');
      const holder = await start(ctx, scope);
      await ctx.started('heartbeatingJob', scope);
      const waiters = await Promise.all([start(ctx, scope), start(ctx, scope)]);
      await parked(ctx, scope, 2);

      await ctx.client.workflowService.pauseActivity(activityOf(ctx, holder));
      expect(await lastFailureType(holder)).toBe('ActivityPause'); // its job heard it by heartbeat and stopped
      const served = await Promise.all(waiters.map((h) => h.result())); // while the holder stays paused
      expect((await pending(holder))?.paused).toBe(true);

      await ctx.client.workflowService.unpauseActivity(activityOf(ctx, holder));
      oneResult([await holder.result(), ...served], scope); // it fast-forwards to the new dispatch's result
      expect([await ctx.count('heartbeatingJob', scope), await ctx.count('heartbeatingJob', scope, 'finished')]).toEqual([2, 1]);
    }));

  it('pausing a holder whose job does not heartbeat: the job never hears of it and commits, and the parked waiter gets its result', () =>
    withWorker(async (ctx) => {
      const scope = newScope('pause-quiet-holder');
      const run = () => ctx.start('parkableRun', [scope, JOB_MS, { job: 'dispatchJob' }]);
      const holder = await run();
      await ctx.started('dispatchJob', scope);
      const waiter = await run();
      await waitFor('1 parked waiter', async () => (await ctx.redis.llen(new FireOnceKeys(ctx.prefix).waiters(scope, 'dispatchJob'))) === 1);

      await ctx.client.workflowService.pauseActivity(activityOf(ctx, holder));
      expect((await pending(holder))?.paused).toBe(true);
      oneResult(await Promise.all([holder, waiter].map(async (h) => (await h.result()).result!)), scope);
      expect([await ctx.count('dispatchJob', scope), await ctx.count('dispatchJob', scope, 'finished')]).toEqual([1, 1]);
    }));

  it('resetting the holder stops its job and releases the lock; its new attempt and the waiters share one new dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('reset-holder');
      const holder = await start(ctx, scope);
      await ctx.started('heartbeatingJob', scope);
      const waiter = await start(ctx, scope);
      await parked(ctx, scope, 1);

      await ctx.client.workflowService.resetActivity(activityOf(ctx, holder));
      oneResult(await Promise.all([holder, waiter].map((h) => h.result())), scope);
      expect([await ctx.count('heartbeatingJob', scope), await ctx.count('heartbeatingJob', scope, 'finished')]).toEqual([2, 1]);
    }));

  it("pausing a waiter in its slot ('wait') ends its wait as a running activity's; unpaused, it gets the holder's result", () =>
    withWorker(
      async (ctx) => {
        const scope = newScope('pause-wait');
        const holder = await start(ctx, scope);
        await ctx.started('heartbeatingJob', scope);
        const waiter = await start(ctx, scope);
        await waitFor('the waiter to wait in its slot', async () => (await pending(waiter))?.state === STARTED);

        await ctx.client.workflowService.pauseActivity(activityOf(ctx, waiter));
        expect(await lastFailureType(waiter)).toBe('ActivityPause'); // heard at its next heartbeat, not a timeout
        expect(await ctx.count('heartbeatingJob', scope, 'finished')).toBe(0); // before the holder's job ended
        await ctx.client.workflowService.unpauseActivity(activityOf(ctx, waiter));
        oneResult(await Promise.all([holder, waiter].map((h) => h.result())), scope);
        expect(await ctx.count('heartbeatingJob', scope)).toBe(1);
      },
      { plugin: { onInFlight: 'wait' } },
    ));
});
