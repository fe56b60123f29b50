import { randomUUID } from 'node:crypto';
import type { temporal } from '@temporalio/proto';
import { ApplicationFailure } from '@temporalio/common';
import { DefaultLogger, Worker, bundleWorkflowCode, type ActivityInterceptorsFactory } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { WorkflowFailedError } from '@temporalio/client';
import { FireOnceGuard, fireOnce } from '../../src';
import { waitFor } from '../support/wait';
import { newScope, oneResult, useFeatures } from '../support/features';
import { gateKey, useStoppableWorkers, wakeSubscribers } from '../support/stoppable-workers';
import { counterKey, type JobResult } from './fixtures/activities';

// A guarded local activity that waits in its slot for another worker's job, on a worker that
// begins to shut down. The SDK never cancels a local activity at shutdown, and the worker cannot
// stop before the workflow task that waits on it completes. The holder's job runs until the test
// opens its gate, so nothing here depends on how long anything takes.
describe('Temporal features: a guarded local activity waiting when its worker shuts down', () => {
  const { context } = useFeatures('la-shutdown');
  const { startWorker } = useStoppableWorkers();

  /** What the history says of each local activity attempt and timer, in order. */
  function localActivitySteps(history: temporal.api.history.v1.IHistory): string[] {
    return (history.events ?? []).flatMap((e) => {
      if (e.workflowTaskFailedEventAttributes) return ['workflow task failed'];
      if (e.timerStartedEventAttributes) return ['timer'];
      const marker = e.markerRecordedEventAttributes;
      if (marker?.markerName !== 'core_local_activity') return [];
      const { attempt } = JSON.parse(Buffer.from(marker.details!.data!.payloads![0]!.data!).toString()) as { attempt: number };
      const type = marker.failure?.applicationFailureInfo?.type;
      return [`${type === undefined ? 'completed' : `failed ${type}`}, attempt ${attempt}`];
    });
  }

  it("stops without waiting for the holder: the waiter's workflow moves to a worker that runs, gets the holder's result, and nothing dispatches twice", async () => {
    const { ctx, base } = context();
    const scope = newScope('la-wait');
    const localQueue = `${ctx.taskQueue}-local`;
    const holderWorker = await startWorker(ctx, base, ctx.taskQueue);
    const holder = await ctx.client.workflow.start('dispatchRun', { taskQueue: ctx.taskQueue, workflowId: `holder-${randomUUID()}`, args: [scope, 0] });
    await ctx.started('dispatchJob', scope);

    const stopping = await startWorker(ctx, base, localQueue, { plugin: { onInFlight: 'wait' }, worker: { shutdownGraceTime: '200ms' } });
    const waiter = await ctx.client.workflow.start('localRunTimed', { taskQueue: localQueue, workflowId: `local-${randomUUID()}`, args: [scope, 0, 8_000, 1] });
    // The local activity waits in its slot on the wake channel (the holder's worker never subscribes).
    await waitFor('the local activity to wait in its slot', async () => (await wakeSubscribers(ctx, scope)) === 1);

    stopping.worker.shutdown();
    await stopping.run;
    // The holder's job is still gated: the worker did not wait for it. Before the fix, run()
    // resolved only once the wait gave up, 1 s before its 8 s start-to-close, and the workflow failed.
    expect([await ctx.count('dispatchJob', scope, 'finished'), await wakeSubscribers(ctx, scope)]).toEqual([0, 0]);

    const restarted = await startWorker(ctx, base, localQueue, { plugin: { onInFlight: 'wait' } });
    await waitFor('the same attempt to wait on the restarted worker', async () => (await wakeSubscribers(ctx, scope)) === 1);
    await ctx.redis.set(gateKey(ctx, scope), '1');
    const results = await Promise.all([holder.result(), waiter.result()]);
    await Promise.all([holderWorker.stop(), restarted.stop()]);
    oneResult(results, scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(1);

    // In the history: the ended attempt's marker, the hand-off's timer, the same attempt's marker; no workflow task failed.
    const history = await waiter.fetchHistory();
    expect(localActivitySteps(history)).toEqual(['failed FireOnceWorkerShutdown, attempt 1', 'timer', 'completed, attempt 1']);
    // It replays with the plugin's workflow interceptor, and not without it (docs/temporal-features.md, "Removing it").
    await Worker.runReplayHistory({ workflowBundle: base.workflowBundle, replayName: 'la-hand-off' }, history, waiter.workflowId);
    const bare = await bundleWorkflowCode({ workflowsPath: require.resolve('./fixtures/workflows'), logger: new DefaultLogger('ERROR') });
    await expect(Worker.runReplayHistory({ workflowBundle: bare, replayName: 'la-hand-off-bare' }, history, waiter.workflowId)).rejects.toThrow(
      DeterminismViolationError,
    );
  });

  it('hands over the attempt that waited: a local retry handed over goes on from its own attempt number, not from the first', async () => {
    const { ctx, base } = context();
    const scope = newScope('la-attempt');
    // The lock held by the test, as by another worker's job; released later as if that job failed.
    const guard = new FireOnceGuard({ redis: ctx.redis, keyPrefix: ctx.prefix });
    const held = await guard.acquire({ scope, step: 'dispatchJob', jobType: 'dispatchJob' });
    if (held.kind !== 'acquired') throw new Error('expected the lock');
    const attemptsKey = `${ctx.prefix}:attempts:${scope}`;
    const recordAttempt: ActivityInterceptorsFactory = (actx) => ({
      inbound: { execute: async (input, next) => (await ctx.redis.rpush(attemptsKey, actx.info.attempt), next(input)) },
    });
    /** The job fails every time it is dispatched, counted in its body. */
    const failingJob = fireOnce(async (s: string): Promise<JobResult> => {
      await ctx.redis.incr(counterKey(ctx.prefix, 'dispatchJob', s));
      throw ApplicationFailure.retryable('the job failed', 'JobFailed');
    });
    const worker = { activities: { dispatchJob: failingJob }, interceptors: { activity: [recordAttempt] } };
    const attempts = async () => (await ctx.redis.lrange(attemptsKey, 0, -1)).map(Number);

    const stopping = await startWorker(ctx, base, ctx.taskQueue, { plugin: { onInFlight: 'wait' }, worker });
    // Two attempts allowed. The first waits out its 5 s start-to-close, less the 1 s margin, and is
    // retried locally, on the same workflow task; the worker stops as the second one waits. The
    // margin leaves the hand-off 1 s before the first attempt's start-to-close timer fires: sdk-core
    // leaves it running on a local retry, where it would time the second attempt out
    // (temporalio/sdk-rust#1454; the panic it may print once the worker has stopped is that timer).
    const waiter = await ctx.client.workflow.start('localRunTimed', {
      taskQueue: ctx.taskQueue,
      workflowId: `local-${randomUUID()}`,
      args: [scope, 0, 5_000, 2],
    });
    await waitFor('the local retry to start', async () => (await attempts()).length === 2);
    await stopping.stop();

    const restarted = await startWorker(ctx, base, ctx.taskQueue, { plugin: { onInFlight: 'wait' }, worker });
    await guard.release(held.lease);
    await expect(waiter.result()).rejects.toThrow(WorkflowFailedError);
    await restarted.stop();
    // The last attempt allowed was handed over: it dispatches once, fails, and the workflow fails.
    expect({ attempts: await attempts(), dispatches: await ctx.count('dispatchJob', scope) }).toEqual({ attempts: [1, 2, 2], dispatches: 1 });
    expect(localActivitySteps(await waiter.fetchHistory())).toEqual(['failed FireOnceWorkerShutdown, attempt 2', 'timer', 'failed JobFailed, attempt 2']);
  });

  it("leaves a failure of the type that is not the hand-off's to the workflow: an unguarded local activity's own runs once and fails it", async () => {
    const { ctx, base } = context();
    const scope = newScope('la-own-type');
    /** Not fire-once: a job of the user's that fails with an ApplicationFailure of the hand-off's type, counted in its body. */
    const ownFailure = async (s: string): Promise<JobResult> => {
      await ctx.redis.incr(counterKey(ctx.prefix, 'dispatchJob', s));
      throw ApplicationFailure.create({ type: 'FireOnceWorkerShutdown', message: 'a failure of its own', nonRetryable: true });
    };
    const worker = await startWorker(ctx, base, ctx.taskQueue, { worker: { activities: { dispatchJob: ownFailure } } });
    const handle = await ctx.client.workflow.start('localRunTimed', {
      taskQueue: ctx.taskQueue,
      workflowId: `local-${randomUUID()}`,
      args: [scope, 0, 5_000, 1],
    });
    const closed = handle.result().then(
      () => 'completed',
      (err: unknown) => (err instanceof WorkflowFailedError ? 'failed' : String(err)),
    );
    let outcome: string | undefined;
    void closed.then((o) => (outcome = o));
    // Before the fix it was scheduled again every 100 ms, for ever: stop at its second run.
    await waitFor('the workflow to close, or the job to run twice', async () => outcome !== undefined || (await ctx.count('dispatchJob', scope)) > 1);
    await worker.stop();
    expect({ outcome, runs: await ctx.count('dispatchJob', scope) }).toEqual({ outcome: 'failed', runs: 1 });
  });
});
