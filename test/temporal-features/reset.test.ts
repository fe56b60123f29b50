import type { JobResult } from './fixtures/activities';
import type { CancelOutcome } from './fixtures/workflows';
import { newScope, oneResult, resetToFirstWorkflowTask, useFeatures } from '../support/features';

// Reset re-executes a workflow from an earlier point in a new run, which schedules the guarded
// job again: the guard must turn that into a fast-forward (after completion) or a wait for the
// still-running first dispatch (mid-flight), never a second dispatch.
describe('Temporal features: reset', () => {
  const { withWorker } = useFeatures('reset');

  it('after completion: the reset run fast-forwards to the first run’s result, without dispatching', () =>
    withWorker(async (ctx) => {
      const scope = newScope('reset-done');
      const handle = await ctx.start('dispatchRun', [scope, 50]);
      const before = await handle.result();
      const reset = await resetToFirstWorkflowTask(ctx, handle);
      const after = (await reset.result()) as JobResult;
      expect(oneResult([before, after], scope)).toBe(before.nonce);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));

  it('mid-flight: the reset run waits for the first run’s job, still running, and gets its result', () =>
    withWorker(async (ctx) => {
      const scope = newScope('reset-mid');
      const handle = await ctx.start('dispatchRun', [scope, 1_500]);
      await ctx.started('dispatchJob', scope);
      const reset = await resetToFirstWorkflowTask(ctx, handle); // terminates the first run; its job runs on
      expect(await ctx.count('dispatchJob', scope, 'finished')).toBe(0); // still in flight
      const after = (await reset.result()) as JobResult;
      const later = await (await ctx.start('dispatchRun', [scope, 1_500])).result(); // same arguments, or it is a payload conflict
      oneResult([after, later], scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
      expect(await ctx.count('dispatchJob', scope, 'finished')).toBe(1);
    }));

  // A job that heartbeats hears at its next heartbeat that its run is gone, and stops: a failure,
  // so its lock is released, and the reset run dispatches again. Still one finished job.
  it('mid-flight, a job that heartbeats: it is cancelled at its next heartbeat, and the reset run dispatches again', () =>
    withWorker(async (ctx) => {
      const scope = newScope('reset-mid-heartbeat');
      const handle = await ctx.start('cancellableRun', [scope, 2_500, 1_000]);
      await ctx.started('heartbeatingJob', scope);
      const reset = await resetToFirstWorkflowTask(ctx, handle);
      const after = (await reset.result()) as CancelOutcome;
      expect(after.cancelled).toBe(false);
      const later = (await (await ctx.start('cancellableRun', [scope, 2_500, 1_000])).result()) as CancelOutcome;
      oneResult([after.result!, later.result!], scope);
      expect(await ctx.count('heartbeatingJob', scope)).toBe(2);
      expect(await ctx.count('heartbeatingJob', scope, 'finished')).toBe(1);
    }));
});
