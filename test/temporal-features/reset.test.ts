import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import type { JobResult } from './fixtures/activities';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';

/**
 * Reset `handle`'s run to the end of its first workflow task (before it scheduled anything), as
 * `temporal workflow reset --type FirstWorkflowTask` does; the new run re-executes from there.
 * Returns a handle on the new run.
 */
async function resetToFirstWorkflowTask(ctx: FeatureContext, handle: WorkflowHandle): Promise<WorkflowHandle> {
  const events = (await handle.fetchHistory()).events ?? [];
  const firstTask = events.find((e) => e.workflowTaskCompletedEventAttributes);
  if (!firstTask?.eventId) throw new Error(`${handle.workflowId} has no completed workflow task to reset to`);
  const firstRunId = (await handle.describe()).runId;
  const { runId } = await ctx.client.workflowService.resetWorkflowExecution({
    namespace: ctx.client.options.namespace,
    workflowExecution: { workflowId: handle.workflowId, runId: firstRunId },
    workflowTaskFinishEventId: firstTask.eventId,
    requestId: randomUUID(),
    reason: 'temporal-fire-once reset test',
  });
  if (!runId || runId === firstRunId) throw new Error(`reset of ${handle.workflowId} started no new run`);
  return ctx.client.workflow.getHandle(handle.workflowId, runId);
}

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
});
