import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { FireOncePlugin, fireOnce } from '../../src';
import { FireOnceKeys, parseEvent } from '../../src/core';
import { counterKey, guardedActivities, type JobResult } from './fixtures/activities';
import { waitFor } from '../support/wait';
import { goSignal } from './fixtures/workflows';
import { newScope, oneResult, resetToFirstWorkflowTask, useFeatures, type FeatureContext } from '../support/features';

/**
 * Make `buildId` the deployment's current version, once its worker has polled and the server knows
 * it, and wait until the task queues route by it (the server propagates the change after replying).
 */
async function setCurrent(ctx: FeatureContext, deploymentName: string, buildId: string): Promise<void> {
  const { namespace } = ctx.client.options;
  const setIt = async () => {
    await ctx.client.workflowService.setWorkerDeploymentCurrentVersion({ namespace, deploymentName, buildId });
    return true;
  };
  // Refused until the server knows the version; a timeout quotes the last refusal.
  await waitFor(`${deploymentName} to take ${buildId} as its current version`, setIt, { timeoutMs: 20_000, everyMs: 100 });
  const completed = temporal.api.enums.v1.RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED;
  // The server propagates the change in the background: on a loaded 2-core machine this once took
  // over 30 s (it takes about a second when quiet), so the bound is generous.
  await waitFor(
    `the task queues of ${deploymentName} to route to ${buildId}`,
    async () => {
      const { workerDeploymentInfo } = await ctx.client.workflowService.describeWorkerDeployment({ namespace, deploymentName });
      return workerDeploymentInfo?.routingConfigUpdateState === completed;
    },
    { timeoutMs: 90_000, everyMs: 100 },
  );
}

/** The build the run is pinned to, as the server says. */
async function buildOf(handle: WorkflowHandle): Promise<string | undefined> {
  const { raw } = await handle.describe();
  return raw.workflowExecutionInfo?.versioningInfo?.deploymentVersion?.buildId ?? undefined;
}

/** Builds A and B of a fresh worker deployment on one task queue, each with its own plugin, and `behavior` as their default. */
async function twoBuilds(
  { ctx, base }: ReturnType<ReturnType<typeof useFeatures>['context']>,
  behavior: 'PINNED' | 'AUTO_UPGRADE',
  activities: object = guardedActivities(ctx.redis, ctx.prefix),
): Promise<{ deploymentName: string; workerA: Worker; workerB: Worker }> {
  const deploymentName = `fire-once-${randomUUID()}`;
  const workerOf = (buildId: string) =>
    Worker.create({
      connection: base.connection,
      taskQueue: ctx.taskQueue,
      workflowBundle: base.workflowBundle,
      activities,
      plugins: [new FireOncePlugin({ redis: ctx.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 })],
      workerDeploymentOptions: { version: { deploymentName, buildId }, useWorkerVersioning: true, defaultVersioningBehavior: behavior },
    });
  const [workerA, workerB] = await Promise.all([workerOf('A'), workerOf('B')]);
  return { deploymentName, workerA, workerB };
}

// A rolling deploy with Worker Versioning: two builds of one worker deployment poll one task
// queue, each with its own plugin (two processes' worth). A PINNED workflow stays on the build that
// was current when it started, and so do its activities; an AUTO_UPGRADE one moves to the current
// build at its next workflow task, which replays its history there. The guard's keys know nothing
// of builds: runs on either build share one dispatch.
describe('Temporal features: worker versioning', () => {
  const { context } = useFeatures('versioning');

  it('a run pinned to build A dispatches; a run on build B started meanwhile waits for it; a later run and a reset of A’s run, both on B, fast-forward: one dispatch', async () => {
    const both = context();
    const { ctx } = both;
    const scope = newScope('versioning');
    const gate = `${ctx.prefix}:gate:${scope}`;
    // The job runs until the test opens its gate: B's run is sure to find it in flight.
    const dispatchJob = fireOnce(async (of: string): Promise<JobResult> => {
      await ctx.redis.incr(counterKey(ctx.prefix, 'dispatchJob', of));
      await waitFor(`the gate of ${of}`, async () => (await ctx.redis.exists(gate)) === 1);
      return { scope: of, nonce: randomUUID() };
    });
    const { deploymentName, workerA, workerB } = await twoBuilds(both, 'PINNED', { dispatchJob });
    const runs = await workerA.runUntil(async () => {
      await setCurrent(ctx, deploymentName, 'A');
      const first = await ctx.start('dispatchRun', [scope, 0]);
      await ctx.started('dispatchJob', scope);
      return workerB.runUntil(async () => {
        await setCurrent(ctx, deploymentName, 'B');
        const second = await ctx.start('retriedRun', [scope, 0, 'dispatchJob']); // retried, so it parks
        const waiters = new FireOnceKeys(ctx.prefix, ctx.client.options.namespace).waiters(scope, 'dispatchJob');
        await waitFor(`B's run to park on A's lock`, async () => (await ctx.redis.llen(waiters)) === 1);
        await ctx.redis.set(gate, 'open');
        const results = await Promise.all([first.result(), second.result()]);
        const third = await ctx.start('dispatchRun', [scope, 0]); // after the commit
        results.push(await third.result());
        const builds = await Promise.all([first, second, third].map(buildOf));
        const reset = await resetToFirstWorkflowTask(ctx, first); // build A's run, run again
        results.push((await reset.result()) as JobResult);
        return { builds: [...builds, await buildOf(reset)], results };
      });
    });
    expect(runs.builds).toEqual(['A', 'B', 'B', 'B']); // a reset run starts on the current build
    oneResult(runs.results, scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(1);
    // The dispatch log, flushed as the workers stopped: B's run parked on A's lock and was handed
    // the result when A's job committed; the later run and the reset fast-forwarded.
    const decisions: Record<string, number> = {};
    for (const [, fields] of await ctx.redis.xrange(new FireOnceKeys(ctx.prefix, ctx.client.options.namespace).log(), '-', '+')) {
      const { decision, scope: of } = parseEvent(fields);
      if (of === scope) decisions[decision] = (decisions[decision] ?? 0) + 1;
    }
    expect(decisions).toEqual({ dispatched: 1, committed: 1, 'in-flight-parked': 1, 'fast-forwarded': 2 });
  });

  it('an AUTO_UPGRADE run that moves from build A to B mid-flight keeps its scope: what it schedules on B is guarded', async () => {
    const both = context();
    const { ctx } = both;
    const scope = newScope('upgrade');
    const { deploymentName, workerA, workerB } = await twoBuilds(both, 'AUTO_UPGRADE');
    const [moved, later] = await workerA.runUntil(async () => {
      await setCurrent(ctx, deploymentName, 'A');
      const run = await ctx.start('twoStepRun', [scope, 50]); // dispatchJob on A, then waits for `go`
      await waitFor('the first job on A', async () => (await ctx.count('dispatchJob', scope, 'finished')) === 1);
      return workerB.runUntil(async () => {
        await setCurrent(ctx, deploymentName, 'B');
        await run.signal(goSignal); // B replays the run's history, scope included, and runs on: reportJob on B
        const first = await run.result();
        const again = await ctx.start('twoStepRun', [scope, 50]);
        await again.signal(goSignal);
        return [{ results: first, build: await buildOf(run) }, await again.result()];
      });
    });
    expect(moved.build).toBe('B');
    expect(later).toEqual(moved.results); // both steps fast-forward: the one on B was stored under the scope
    expect([await ctx.count('dispatchJob', scope), await ctx.count('reportJob', scope)]).toEqual([1, 1]);
  });
});
