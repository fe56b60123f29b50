import { randomUUID } from 'node:crypto';
import { Worker, type ActivityInterceptorsFactory, type WorkerOptions } from '@temporalio/worker';
import type { ActivityCancellationType } from '@temporalio/workflow';
import type { WorkflowHandle } from '@temporalio/client';
import { holdHandOff } from '../support/hold-hand-off';
import { waitFor } from '../support/wait';
import { newScope, useFeatures, type FeatureContext } from '../support/features';
import type { SampleWorkerBase } from '../support/sample-harness';
import { gateKey, useStoppableWorkers, wakeSubscribers } from '../support/stoppable-workers';
import type { LocalOutcome, localCancelled } from './fixtures/workflows';

// A guarded local activity cancelled across the hand-off of its wait (local-activity-shutdown.test.ts),
// with each cancellation type: the workflow sees what it sees when the activity is cancelled while
// it waits in its slot, on a worker that does not stop. The workflow's `cancel` signal cancels the
// activity's scope; a workflow task timeout of 2 s lets the signal in while the local activity runs
// (core heartbeats the workflow task). Runs of the local activity are counted by an activity
// interceptor of the test's, the holder's dispatches in its job body; the holder's job runs until
// the test opens its gate, so nothing here depends on how long anything takes.
describe('Temporal features: a guarded local activity cancelled across the hand-off of its wait', () => {
  const { context } = useFeatures('la-cancel');
  const { startWorker: startStoppable } = useStoppableWorkers();

  const KINDS = ['TRY_CANCEL', 'WAIT_CANCELLATION_COMPLETED', 'ABANDON'] as const satisfies readonly ActivityCancellationType[];
  /** What the workflow sees of its local activity cancelled while it waits in its slot, whatever the cancellation type. */
  const CANCELLED: LocalOutcome = {
    error: 'ActivityFailure',
    message: 'Local Activity cancelled',
    retryState: 'CANCEL_REQUESTED',
    activityType: 'dispatchJob',
    activityId: '1',
    identity: '',
    cause: 'CancelledFailure',
  };

  const runsKey = (ctx: FeatureContext, scope: string) => `${ctx.prefix}:runs:${scope}`;
  const heldKey = (ctx: FeatureContext, scope: string) => `${ctx.prefix}:held:${scope}`;
  /** Counts each run of a local activity, before the guard sees it. */
  const countRuns =
    (ctx: FeatureContext): ActivityInterceptorsFactory =>
    (actx) => ({
      inbound: {
        execute: async (input, next) => {
          if (actx.info.isLocal) await ctx.redis.incr(runsKey(ctx, String(input.args[0])));
          return next(input);
        },
      },
    });
  /** A running worker (`useStoppableWorkers`) whose local activities wait in their slot, their runs counted. */
  const startWorker = (ctx: FeatureContext, base: SampleWorkerBase, taskQueue: string, options: Partial<WorkerOptions> = {}) =>
    startStoppable(ctx, base, taskQueue, { plugin: { onInFlight: 'wait' }, worker: { interceptors: { activity: [countRuns(ctx)] }, ...options } });

  const runs = async (ctx: FeatureContext, scope: string) => Number((await ctx.redis.get(runsKey(ctx, scope))) ?? 0);

  /** Starts the waiter on `taskQueue` and waits for its local activity to wait in its slot. */
  async function startWaiter(ctx: FeatureContext, taskQueue: string, scope: string, kind: ActivityCancellationType) {
    const waiter = await ctx.client.workflow.start<typeof localCancelled>('localCancelled', {
      taskQueue,
      workflowId: `local-${randomUUID()}`,
      args: [scope, 30_000, kind],
      workflowTaskTimeout: '2s',
    });
    await waitFor('the local activity to wait in its slot', async () => (await wakeSubscribers(ctx, scope)) === 1);
    return waiter;
  }

  /**
   * Once the waiter has closed, or its local activity runs again: opens the gate, replays the
   * waiter's history with the plugin's workflow interceptor, and returns what the workflow saw, the
   * local activity's runs and the holder's dispatches.
   */
  async function outcome(ctx: FeatureContext, base: SampleWorkerBase, scope: string, waiter: WorkflowHandle<typeof localCancelled>) {
    let closed = false;
    void waiter.result().then(
      () => (closed = true),
      () => (closed = true),
    );
    await waitFor('the workflow to close, or its local activity to run again', async () => closed || (await runs(ctx, scope)) > 1);
    await ctx.redis.set(gateKey(ctx, scope), '1');
    const saw = await waiter.result();
    await Worker.runReplayHistory({ workflowBundle: base.workflowBundle, replayName: 'la-cancel' }, await waiter.fetchHistory(), waiter.workflowId);
    return { saw, runs: await runs(ctx, scope), dispatches: await ctx.count('dispatchJob', scope) };
  }

  /** Runs `scenario` while another worker's workflow holds `scope`'s gated job. */
  async function withHolder<T>(ctx: FeatureContext, base: SampleWorkerBase, scope: string, scenario: () => Promise<T>): Promise<T> {
    const holderWorker = await startWorker(ctx, base, ctx.taskQueue);
    const holder = await ctx.client.workflow.start('dispatchRun', { taskQueue: ctx.taskQueue, workflowId: `holder-${randomUUID()}`, args: [scope, 0] });
    await ctx.started('dispatchJob', scope);
    const result = await scenario();
    await ctx.redis.set(gateKey(ctx, scope), '1');
    await holder.result();
    await holderWorker.stop();
    return result;
  }

  it.each(KINDS)('%s, cancelled while it waits in its slot (no hand-off): the reference', async (kind) => {
    const { ctx, base } = context();
    const scope = newScope('la-cancel');
    const got = await withHolder(ctx, base, scope, async () => {
      const worker = await startWorker(ctx, base, `${ctx.taskQueue}-local`);
      const waiter = await startWaiter(ctx, `${ctx.taskQueue}-local`, scope, kind);
      await waiter.signal('cancel');
      const result = await outcome(ctx, base, scope, waiter);
      await worker.stop();
      return result;
    });
    expect(got).toEqual({ saw: CANCELLED, runs: 1, dispatches: 1 });
  });

  // Unlike Python's: the hand-off goes through the SDK's own local backoff (LocalActivityDoBackoff),
  // whose timer the SDK awaits outside any interceptor, in the activity's cancellation scope. So a
  // cancel that finds it behind that timer ends it with the scope's CancelledFailure, as the SDK
  // ends a local activity cancelled in its own retry's backoff; `isCancellation()` holds of both.
  it.each(KINDS)("%s, cancelled while handed off: ends at once with the scope's CancelledFailure, and is not scheduled again", async (kind) => {
    const { ctx, base } = context();
    const scope = newScope('la-cancel');
    const localQueue = `${ctx.taskQueue}-local`;
    const got = await withHolder(ctx, base, scope, async () => {
      const stopping = await startWorker(ctx, base, localQueue, { shutdownGraceTime: '200ms' });
      const waiter = await startWaiter(ctx, localQueue, scope, kind);
      await stopping.stop();
      // No worker runs the workflow: its handler cancels the scope while the hand-off's timer is pending.
      await waiter.signal('cancel');
      const restarted = await startWorker(ctx, base, localQueue);
      const result = await outcome(ctx, base, scope, waiter);
      await restarted.stop();
      return result;
    });
    expect(got).toEqual({ saw: { error: 'CancelledFailure', message: 'Cancellation scope cancelled' }, runs: 1, dispatches: 1 });
  });

  // With WAIT_CANCELLATION_COMPLETED the workflow awaits the activity's own end, the guard's failure:
  // before the fix the SDK's backoff timer, in the cancelled scope, ended it with the scope's
  // CancelledFailure. TRY_CANCEL and ABANDON end at the cancel, before the failure.
  it.each(KINDS)("%s, cancelled just after its worker's shutdown ended its wait: ends cancelled, as the reference", async (kind) => {
    const { ctx, base } = context();
    const scope = newScope('la-cancel');
    const localQueue = `${ctx.taskQueue}-local`;
    const got = await withHolder(ctx, base, scope, async () => {
      // A long grace time: the SDK cancels no activity of its own before the test's cancel.
      const stopping = await startWorker(ctx, base, localQueue, {
        shutdownGraceTime: '30s',
        interceptors: { activity: [countRuns(ctx), holdHandOff(ctx.redis, (scope) => heldKey(ctx, scope))] },
      });
      const waiter = await startWaiter(ctx, localQueue, scope, kind);
      stopping.worker.shutdown();
      await waitFor("the guard's FireOnceWorkerShutdown, held", async () => (await ctx.redis.exists(heldKey(ctx, scope))) === 1);
      await waiter.signal('cancel');
      await stopping.stop();
      const restarted = await startWorker(ctx, base, localQueue);
      const result = await outcome(ctx, base, scope, waiter);
      await restarted.stop();
      return result;
    });
    expect(got).toEqual({ saw: CANCELLED, runs: 1, dispatches: 1 });
  });
});
