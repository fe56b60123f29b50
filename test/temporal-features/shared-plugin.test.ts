import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { FireOnceKeys } from '../../src/core';
import { firstActivityAttempt } from '../support/temporal';
import { waitFor } from '../support/wait';
import { guardedActivities } from './fixtures/activities';
import type { retriedRun } from './fixtures/workflows';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';

// One FireOncePlugin passed to two workers (`plugins: [plugin]` on each), each on a task queue and a
// NativeConnection of its own. One worker stops and its connection is closed while the other
// runs on. Every run uses retriedRun: a heartbeat timeout of 2 s, and retries.
describe('Temporal features: one plugin shared by two workers', () => {
  const { context } = useFeatures('shared-plugin');
  const JOB_MS = 8_000; // longer than the stop, the close and a heartbeat timeout (2 s) after them

  const start = (ctx: FeatureContext, scope: string, taskQueue: string) =>
    ctx.client.workflow.start<typeof retriedRun>('retriedRun', { taskQueue, workflowId: `shared-${randomUUID()}`, args: [scope, JOB_MS, 'heartbeatingJob'] });
  const parked = (ctx: FeatureContext, scope: string, n: number) =>
    waitFor(`${n} parked waiter(s)`, async () => (await ctx.redis.llen(new FireOnceKeys(ctx.prefix).waiters(scope, 'heartbeatingJob'))) === n);
  /** Why the previous attempt of the run's pending activity ended, if one did. */
  const pendingFailure = async (h: WorkflowHandle) => {
    const last = (await h.describe()).raw.pendingActivities?.[0]?.lastFailure;
    return last == null ? undefined : (last.applicationFailureInfo?.type ?? (last.timeoutFailureInfo ? 'timeout' : 'other'));
  };

  it("a worker that stops and closes its connection fails the waiters it parked, and the other worker's waiters on the same step stay parked and get the commit's result", async () => {
    const { ctx, base } = context();
    const scope = newScope('shared');
    const plugin = new FireOncePlugin({ redis: ctx.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 });
    const create = (taskQueue: string, connection: NativeConnection) =>
      Worker.create({ connection, taskQueue, workflowBundle: base.workflowBundle, activities: guardedActivities(ctx.redis, ctx.prefix), plugins: [plugin] });
    const queueA = `${ctx.taskQueue}-a`;
    const connectionA = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
    const workerA = await create(queueA, connectionA);
    const workerB = await create(ctx.taskQueue, base.connection);
    const runA = workerA.run();
    const runB = workerB.run();
    let restarted: Worker | undefined;
    let runRestarted: Promise<void> | undefined;
    try {
      const holder = await start(ctx, scope, ctx.taskQueue); // on B
      await ctx.started('heartbeatingJob', scope);
      const waiterA = await start(ctx, scope, queueA); // parks first, on A
      await parked(ctx, scope, 1);
      const waiterB = await start(ctx, scope, ctx.taskQueue); // parks on the same step, on B
      await parked(ctx, scope, 2);

      workerA.shutdown();
      await runA;
      await connectionA.close();

      // A's waiter: failed by A's stop so that it retries, as when A has a plugin of its own; not
      // left to its heartbeat timeout.
      const failureA = await waitFor("A's parked attempt to end", () => pendingFailure(waiterA));

      // B's waiter: heartbeated through B's connection, and completed by the holder's commit on the
      // attempt that parked (before the fix its heartbeats went through A's closed connection, and
      // it ended at its heartbeat timeout, to be served by a retry).
      oneResult(await Promise.all([holder.result(), waiterB.result()]), scope);
      expect({ failureA, attemptB: await firstActivityAttempt(waiterB) }).toEqual({ failureA: 'FireOnceInFlight', attemptB: 1 });

      restarted = await create(queueA, base.connection); // for A's waiter's retry
      runRestarted = restarted.run();
      oneResult(await Promise.all([holder.result(), waiterB.result(), waiterA.result()]), scope);
      expect(await ctx.count('heartbeatingJob', scope)).toBe(1);
    } finally {
      if (workerA.getState() === 'RUNNING') workerA.shutdown();
      workerB.shutdown();
      restarted?.shutdown();
      await Promise.allSettled([runA, runB, runRestarted]);
      await connectionA.close().catch(() => undefined);
    }
  });
});
