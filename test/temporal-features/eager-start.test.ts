import { randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { guardedActivities } from './fixtures/activities';
import type { dispatchRun } from './fixtures/workflows';
import { newScope, oneResult, useFeatures } from '../support/features';

// Eager workflow start: a client on the worker's own NativeConnection asks the server to hand the
// run's first workflow task back in the start's reply, to the worker in this process, instead of
// queueing it. That task sets the scope and schedules the guarded job, as a queued one would.
describe('Temporal features: eager workflow start', () => {
  const { harness, context } = useFeatures('eager');

  it('4 runs started eagerly at once and a later one share one dispatch', async () => {
    const { ctx, base } = context();
    const plugin = new FireOncePlugin({ redis: harness.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 });
    const worker = await Worker.create({
      connection: base.connection,
      taskQueue: ctx.taskQueue,
      workflowBundle: base.workflowBundle,
      activities: guardedActivities(harness.redis, ctx.prefix),
      plugins: [plugin],
    });
    // Eager start needs the worker's connection: the SDK refuses requestEagerStart on any other.
    const client = new Client({ connection: base.connection });
    const scope = newScope('eager');
    const start = () =>
      client.workflow.start<typeof dispatchRun>('dispatchRun', {
        taskQueue: ctx.taskQueue,
        workflowId: `eager-${randomUUID()}`,
        args: [scope, 500],
        requestEagerStart: true,
      });

    await worker.runUntil(async () => {
      const concurrent = await Promise.all([start(), start(), start(), start()]);
      const results = await Promise.all(concurrent.map((h) => h.result()));
      const later = await start();
      results.push(await later.result());
      // The server granted every start eagerly: each first workflow task came back in its reply.
      expect([...concurrent, later].map((h) => h.eagerlyStarted)).toEqual([true, true, true, true, true]);
      oneResult(results, scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    });
  });
});
