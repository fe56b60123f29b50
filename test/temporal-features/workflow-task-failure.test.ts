import type { WorkflowHandle } from '@temporalio/client';
import { SCOPE_HEADER, scopeFromHeader } from '../../src/common/header';
import { FIRST_TASK_BUG } from './fixtures/workflows';
import { newScope, oneResult, useFeatures } from '../support/features';

/** What a run's history holds: the messages of its failed workflow tasks, then the scope header of each activity it scheduled. */
async function failuresThenScopes(handle: WorkflowHandle): Promise<{ failedTasks: string[]; scheduledUnder: (string | undefined)[] }> {
  const events = (await handle.fetchHistory()).events ?? [];
  const failed = events.filter((e) => e.workflowTaskFailedEventAttributes);
  const scheduled = events.filter((e) => e.activityTaskScheduledEventAttributes);
  // The failed task comes first: the activity in the history is the retry's, not the failed attempt's.
  expect(Math.max(...failed.map((e) => Number(e.eventId)))).toBeLessThan(Math.min(...scheduled.map((e) => Number(e.eventId))));
  return {
    failedTasks: failed.map((e) => e.workflowTaskFailedEventAttributes!.failure?.message ?? ''),
    scheduledUnder: scheduled.map((e) => scopeFromHeader(e.activityTaskScheduledEventAttributes!.header?.fields?.[SCOPE_HEADER] ?? undefined)),
  };
}

// A workflow task that fails (a plain Error thrown by workflow code) is retried by Temporal. The
// worker evicts the run and the retry re-runs the workflow function in a fresh sandbox: the scope
// the failed attempt set, and the job it scheduled, are gone with it. The retry sets the scope
// again, and the job it schedules carries it.
describe('Temporal features: a workflow task that fails after setDispatchScope', () => {
  const { withWorker } = useFeatures('wft-failure');

  it('retried: the job the retry schedules carries the scope; 3 runs at once and a later one share one dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('wft-failure');
      const concurrent = await Promise.all([0, 1, 2].map(() => ctx.start('firstTaskFailsRun', [scope, 500])));
      const results = await Promise.all(concurrent.map((h) => h.result()));
      const later = await ctx.start('firstTaskFailsRun', [scope, 500]);
      results.push(await later.result());
      for (const handle of [...concurrent, later]) {
        expect(await failuresThenScopes(handle)).toEqual({ failedTasks: [FIRST_TASK_BUG], scheduledUnder: [scope] });
      }
      oneResult(results, scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));
});
