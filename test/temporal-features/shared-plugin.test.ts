import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { FireOnceKeys } from '../../src/core';
import type { SampleWorkerBase } from '../support/sample-harness';
import { firstActivityAttempt } from '../support/temporal';
import { waitFor } from '../support/wait';
import { guardedActivities } from './fixtures/activities';
import type { retriedRun } from './fixtures/workflows';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';

// One FireOncePlugin passed to two workers (`plugins: [plugin]` on each), each on a task queue and a
// NativeConnection of its own. Worker A stops and its connection is closed while worker B runs
// on. Every run uses retriedRun: a heartbeat timeout of 2 s, and retries.
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

  /** Run `scenario` with workers A (on a connection of its own) and B (on the harness's), both with one plugin; `restart` starts another on A's queue. */
  async function withTwoWorkers(
    base: SampleWorkerBase,
    ctx: FeatureContext,
    optionsA: Partial<WorkerOptions>,
    scenario: (w: { queueA: string; stopA: () => Promise<void>; restartA: () => Promise<void> }) => Promise<void>,
  ): Promise<void> {
    const plugin = new FireOncePlugin({ redis: ctx.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 });
    const create = (taskQueue: string, connection: NativeConnection, options: Partial<WorkerOptions> = {}) =>
      Worker.create({
        connection,
        taskQueue,
        workflowBundle: base.workflowBundle,
        activities: guardedActivities(ctx.redis, ctx.prefix),
        plugins: [plugin],
        ...options,
      });
    const queueA = `${ctx.taskQueue}-a`;
    const connectionA = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
    const workers = [await create(queueA, connectionA, optionsA), await create(ctx.taskQueue, base.connection)];
    const runs = workers.map((w) => w.run());
    const stopA = async () => {
      workers[0].shutdown();
      await runs[0];
      await connectionA.close();
    };
    const restartA = async () => {
      workers.push(await create(queueA, base.connection));
      runs.push(workers[2].run());
    };
    try {
      await scenario({ queueA, stopA, restartA });
    } finally {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await Promise.allSettled(runs);
      await connectionA.close().catch(() => undefined);
    }
  }

  it("a worker that stops and closes its connection fails the waiters it parked, and the other worker's waiters on the same step stay parked and get the commit's result", async () => {
    const { ctx, base } = context();
    const scope = newScope('shared');
    await withTwoWorkers(base, ctx, {}, async ({ queueA, stopA, restartA }) => {
      const holder = await start(ctx, scope, ctx.taskQueue); // on B
      await ctx.started('heartbeatingJob', scope);
      const waiterA = await start(ctx, scope, queueA); // parks first, on A
      await parked(ctx, scope, 1);
      const waiterB = await start(ctx, scope, ctx.taskQueue); // parks on the same step, on B
      await parked(ctx, scope, 2);

      await stopA();
      // A's waiter: failed by A's stop so that it retries, as when A has a plugin of its own; not
      // left to its heartbeat timeout.
      const failureA = await waitFor("A's parked attempt to end", () => pendingFailure(waiterA));
      // B's waiter: heartbeated through B's connection, and completed by the holder's commit on the
      // attempt that parked (before the fix its heartbeats went through A's closed connection, and
      // it ended at its heartbeat timeout, to be served by a retry).
      oneResult(await Promise.all([holder.result(), waiterB.result()]), scope);
      expect({ failureA, attemptB: await firstActivityAttempt(waiterB) }).toEqual({ failureA: 'FireOnceInFlight', attemptB: 1 });

      await restartA(); // for A's waiter's retry
      oneResult(await Promise.all([holder.result(), waiterB.result(), waiterA.result()]), scope);
      expect(await ctx.count('heartbeatingJob', scope)).toBe(1);
    });
  });

  it("a worker that stops while its holder is mid-job: the holder's cancellation releases the lock through that worker's connection before it is closed, and the other worker's parked waiters retry at once", async () => {
    const { ctx, base } = context();
    const scope = newScope('shared-holder');
    await withTwoWorkers(base, ctx, { shutdownGraceTime: '200ms' }, async ({ queueA, stopA }) => {
      const holder = await start(ctx, scope, queueA); // on A
      await ctx.started('heartbeatingJob', scope);
      const waiters = [await start(ctx, scope, ctx.taskQueue), await start(ctx, scope, ctx.taskQueue)]; // on B
      await parked(ctx, scope, 2);

      await stopA(); // the job stops on the shutdown's cancellation, and its release fails both waiters
      const failures = await Promise.all(waiters.map((w) => waitFor('the parked attempt to end', () => pendingFailure(w))));
      expect(failures).toEqual(['FireOnceInFlight', 'FireOnceInFlight']);
      // One of them dispatches again on B, and its commit completes the other; the holder's run
      // waits for a worker on A's queue, which is not what this test is about.
      oneResult(await Promise.all(waiters.map((w) => w.result())), scope);
      expect([await ctx.count('heartbeatingJob', scope), await ctx.count('heartbeatingJob', scope, 'finished')]).toEqual([2, 1]);
      await holder.terminate();
    });
  });
});
