import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { waitFor } from '../support/wait';
import type { JobResult } from './fixtures/activities';
import { newScope, oneResult, useFeatures } from '../support/features';

const STARTED = temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;

/** Resolve once a worker has picked up the run's activity (it is running, or waiting its turn). */
const activityRunning = (handle: WorkflowHandle) =>
  waitFor(`an activity of ${handle.workflowId} to be running`, async () =>
    ((await handle.describe()).raw.pendingActivities ?? []).some((a) => a.state === STARTED),
  );

// Cancelling a workflow cancels the guarded activity it waits for, but Temporal delivers an
// activity's cancellation only in the reply to a heartbeat: the job must heartbeat (and have a
// heartbeatTimeout for a prompt reply), and a run waiting its turn heartbeats for itself only
// when its activity has a heartbeatTimeout. Every run uses cancellableRun, whose activity waits
// for the cancellation to be acknowledged (WAIT_CANCELLATION_COMPLETED).
describe('Temporal features: cancellation', () => {
  const { withWorker } = useFeatures('cancel');
  const JOB_MS = 2_000;

  it('of the dispatching run: the job learns it by heartbeat and stops, the lock is released, the next run dispatches once more', () =>
    withWorker(async (ctx) => {
      const scope = newScope('cancel-holder');
      const holder = await ctx.start('cancellableRun', [scope, JOB_MS, 1_000]);
      await ctx.started('heartbeatingJob', scope);
      await holder.cancel();
      expect(await holder.result()).toEqual({ cancelled: true });
      expect(await ctx.count('heartbeatingJob', scope, 'finished')).toBe(0); // the job stopped

      const next = await (await ctx.start('cancellableRun', [scope, JOB_MS, 1_000])).result();
      const later = await (await ctx.start('cancellableRun', [scope, JOB_MS, 1_000])).result();
      oneResult([next.result!, later.result!], scope);
      // Two starts, one of them cancelled: exactly one dispatch ran to completion.
      expect([await ctx.count('heartbeatingJob', scope), await ctx.count('heartbeatingJob', scope, 'finished')]).toEqual([2, 1]);
    }));

  it('of a waiting run with a heartbeatTimeout: its wait ends at once, and the holder’s one dispatch serves every other run', () =>
    withWorker(async (ctx) => {
      const scope = newScope('cancel-waiter');
      const holder = await ctx.start('cancellableRun', [scope, JOB_MS, 1_000]);
      await ctx.started('heartbeatingJob', scope);
      const waiter = await ctx.start('cancellableRun', [scope, JOB_MS, 1_000]);
      await activityRunning(waiter);
      await waiter.cancel();
      expect(await waiter.result()).toEqual({ cancelled: true });
      expect(await ctx.count('heartbeatingJob', scope, 'finished')).toBe(0); // ended before the holder's job did

      const first = await holder.result();
      const later = await (await ctx.start('cancellableRun', [scope, JOB_MS, 1_000])).result();
      oneResult([first.result!, later.result!], scope);
      expect(await ctx.count('heartbeatingJob', scope)).toBe(1);
    }));

  it('of a waiting run without a heartbeatTimeout: the cancellation never reaches it, it waits for the holder’s result', () =>
    withWorker(async (ctx) => {
      const scope = newScope('cancel-no-hb');
      const holder = await ctx.start('cancellableRun', [scope, JOB_MS, 1_000]);
      await ctx.started('heartbeatingJob', scope);
      const waiter = await ctx.start('cancellableRun', [scope, JOB_MS, undefined]);
      await activityRunning(waiter);
      await waiter.cancel();
      const waited = await waiter.result();
      expect(await ctx.count('heartbeatingJob', scope, 'finished')).toBe(1); // it ended only after the holder's job
      expect(waited).toEqual({ cancelled: false, result: expect.anything() as JobResult });

      oneResult([(await holder.result()).result!, waited.result!], scope);
      expect(await ctx.count('heartbeatingJob', scope)).toBe(1);
    }));
});
