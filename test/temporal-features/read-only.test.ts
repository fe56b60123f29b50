import { WorkflowUpdateFailedError } from '@temporalio/client';
import { finishSignal, rescopeQuery, rescopeUpdate } from './fixtures/workflows';
import { newScope, useFeatures } from '../support/features';

// A query handler or an update validator runs without leaving a trace in the history, so a scope
// set there would hold on this worker and be gone after a replay: what the run schedules next
// would carry one scope or the other depending on the worker's cache. setDispatchScope refuses.
describe('setDispatchScope in a read-only handler', () => {
  const { withWorker } = useFeatures('readonly');

  it('a query handler or an update validator that calls it fails with FireOnceConfigError, and the run keeps its scope', () =>
    withWorker(async (ctx, plugin) => {
      const scope = newScope('kept');
      const other = newScope('other');
      const handle = await ctx.start('readOnlyScopeRun', [scope]);

      const query = await handle.query(rescopeQuery, other).then(
        (value) => new Error(`the query answered ${JSON.stringify(value)}`),
        (err: unknown) => err,
      );
      // The server hands a failed query back as INVALID_ARGUMENT, with the handler's message.
      expect((query as Error).message).toMatch(/setDispatchScope\(\) cannot be called in a query handler/);

      const update = await handle.executeUpdate(rescopeUpdate, { args: [other] }).then(
        (value) => new Error(`the update was accepted and returned ${JSON.stringify(value)}`),
        (err: unknown) => err,
      );
      expect(update).toBeInstanceOf(WorkflowUpdateFailedError);
      expect((update as WorkflowUpdateFailedError).cause).toMatchObject({ type: 'FireOnceConfigError' });
      expect((update as WorkflowUpdateFailedError).cause?.message).toMatch(/^setDispatchScope\(\) cannot be called in an update validator/);

      await handle.signal(finishSignal);
      expect(await handle.result()).toBe(scope);
      expect(await ctx.redis.exists(plugin.guard.keys.artifact(scope, 'dispatchJob'))).toBe(1);
      expect(await ctx.redis.exists(plugin.guard.keys.artifact(other, 'dispatchJob'))).toBe(0);
    }));

  it('after a query and an update validator were refused, the run’s own code can still set it', () =>
    withWorker(async (ctx, plugin) => {
      const [scope, other, next] = [newScope('first'), newScope('other'), newScope('next')];
      const handle = await ctx.start('readOnlyScopeRun', [scope, next]);
      await expect(handle.query(rescopeQuery, other)).rejects.toThrow(/cannot be called in a query handler/);
      await expect(handle.executeUpdate(rescopeUpdate, { args: [other] })).rejects.toBeInstanceOf(WorkflowUpdateFailedError);
      await handle.signal(finishSignal);
      expect(await handle.result()).toBe(next);
      expect(await ctx.redis.exists(plugin.guard.keys.artifact(next, 'dispatchJob'))).toBe(1);
    }));
});
