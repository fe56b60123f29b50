import { randomUUID } from 'node:crypto';
import { WithStartWorkflowOperation, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import { dispatchUpdate, finishSignal, type handlerFirstRun, type handlersRun } from './fixtures/workflows';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';

/** `dispatchUpdate` sent with the start of `workflow` (started, or found running, under `workflowId`). */
function updateWithStart(ctx: FeatureContext, workflow: 'handlersRun' | 'handlerFirstRun', workflowId: string, scope: string, ms: number) {
  const startWorkflowOperation = new WithStartWorkflowOperation<typeof handlersRun | typeof handlerFirstRun>(workflow, {
    workflowId,
    taskQueue: ctx.taskQueue,
    args: [scope],
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
  return ctx.client.workflow.executeUpdateWithStart(dispatchUpdate, { args: [ms], startWorkflowOperation });
}

/** The update was accepted in the run's first workflow task: the first task's completion is followed by its acceptance. */
async function acceptedInFirstTask(handle: WorkflowHandle): Promise<boolean> {
  const events = (await handle.fetchHistory()).events ?? [];
  const firstTask = events.findIndex((e) => e.workflowTaskCompletedEventAttributes);
  return events[firstTask + 1]?.workflowExecutionUpdateAcceptedEventAttributes !== undefined;
}

// Update-with-start delivers the update in the run's first workflow task. The TypeScript SDK
// buffers it until its handler is registered and runs it inside `setHandler`: under the scope if
// the workflow set it before registering the handler, and without one otherwise.
describe('Temporal features: update-with-start', () => {
  const { withWorker } = useFeatures('uws');

  it('scope set before the handler: 3 calls racing on one workflow ID, 2 on new IDs and a new run of the first ID share one dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('uws');
      const shared = `uws-${randomUUID()}`;
      const ids = [shared, shared, shared, `uws-${randomUUID()}`, `uws-${randomUUID()}`];
      const results = await Promise.all(ids.map((id) => updateWithStart(ctx, 'handlersRun', id, scope, 500)));
      const finish = async (id: string) => {
        const handle = ctx.client.workflow.getHandle(id);
        expect(await acceptedInFirstTask(handle)).toBe(true);
        await handle.signal(finishSignal);
        await handle.result();
      };
      for (const id of new Set(ids)) await finish(id);
      results.push(await updateWithStart(ctx, 'handlersRun', shared, scope, 500)); // the first ID's run closed: a new run
      await finish(shared);
      oneResult(results, scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));

  it('handler registered before the scope: the update of the start fails with FireOnceMissingScope and dispatches nothing; a later update dispatches once', () =>
    withWorker(async (ctx) => {
      const scope = newScope('uws-late');
      const workflowId = `uws-late-${randomUUID()}`;
      const failure = await updateWithStart(ctx, 'handlerFirstRun', workflowId, scope, 50).catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(WorkflowUpdateFailedError);
      const cause = (failure as WorkflowUpdateFailedError).cause;
      expect(cause).toBeInstanceOf(ActivityFailure);
      expect({ type: ((cause as ActivityFailure).cause as ApplicationFailure).type, dispatched: await ctx.count('dispatchJob', scope) }).toEqual({
        type: 'FireOnceMissingScope',
        dispatched: 0,
      });
      const handle = ctx.client.workflow.getHandle<typeof handlerFirstRun>(workflowId);
      expect(await acceptedInFirstTask(handle)).toBe(true);
      oneResult([await handle.executeUpdate(dispatchUpdate, { args: [50] })], scope); // a later task: the scope is set by then
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
      await handle.signal(finishSignal);
      await handle.result();
    }));
});
