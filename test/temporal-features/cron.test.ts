import type { WorkflowExecutionInfo } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { waitFor } from '../support/wait';
import type { Inherited } from './fixtures/workflows';
import { newScope, oneResult, useFeatures } from '../support/features';

// A cron workflow's later runs are started by the server, not by a workflow or a client with the
// plugin: only the header of the first run's start can carry the scope to them.
describe('Temporal features: cron workflows', () => {
  const { withWorker } = useFeatures('cron');

  it('a cron child that never sets a scope: every run inherits it from the header the server copies, and all share one dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('cron');
      const childId = await (await ctx.start('cronParentRun', [scope, 50, '@every 1s'])).result();
      const completed = async () => {
        const runs: WorkflowExecutionInfo[] = [];
        for await (const run of ctx.client.workflow.list({ query: `WorkflowId="${childId}"` })) if (run.status.name === 'COMPLETED') runs.push(run);
        return runs;
      };
      await waitFor('3 cron runs to complete', async () => (await completed()).length >= 3);
      await ctx.client.workflow.getHandle(childId).terminate('enough runs');

      // A cron run's handle reads as continued-as-new: its result is in its history's completion event.
      const resultOf = async (runId: string) => {
        const { events } = await ctx.client.workflow.getHandle(childId, runId).fetchHistory();
        const payload = events?.find((e) => e.workflowExecutionCompletedEventAttributes)?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0];
        return defaultPayloadConverter.fromPayload<Inherited>(payload!);
      };
      const results = await Promise.all((await completed()).map((run) => resultOf(run.runId)));
      expect(new Set(results.map((r) => r.inheritedScope))).toEqual(new Set([scope]));
      oneResult(
        results.map((r) => r.result),
        scope,
      );
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));
});
