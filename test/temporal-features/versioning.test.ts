import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { FireOnceKeys, parseEvent } from '../../src/core';
import { guardedActivities, type JobResult } from './fixtures/activities';
import { sleep } from '../../sample-workflows/shared/redis';
import { newScope, oneResult, resetToFirstWorkflowTask, useFeatures, type FeatureContext } from '../support/features';

/** Make `buildId` the deployment's current version, once its worker has polled and the server knows it. */
async function setCurrent(ctx: FeatureContext, deploymentName: string, buildId: string): Promise<void> {
  for (const deadline = Date.now() + 20_000; ; await sleep(100)) {
    try {
      await ctx.client.workflowService.setWorkerDeploymentCurrentVersion({ namespace: ctx.client.options.namespace, deploymentName, buildId });
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err; // e.g. the version is not registered yet
    }
  }
}

/** The build the run is pinned to, as the server says. */
async function buildOf(handle: WorkflowHandle): Promise<string | undefined> {
  const { raw } = await handle.describe();
  return raw.workflowExecutionInfo?.versioningInfo?.deploymentVersion?.buildId ?? undefined;
}

// A rolling deploy with Worker Versioning: two builds of one worker deployment poll one task
// queue, each with its own plugin (two processes' worth). Workflows are pinned to the build that
// was current when they started, and so are their activities. The guard's keys know nothing of
// builds: runs on either build share one dispatch.
describe('Temporal features: worker versioning', () => {
  const { context } = useFeatures('versioning');

  it('a run pinned to build A dispatches; a run on build B started meanwhile waits for it; a later run and a reset of A’s run, both on B, fast-forward: one dispatch', async () => {
    const { ctx, base } = context();
    const deploymentName = `fire-once-${randomUUID()}`;
    const workerOf = (buildId: string) =>
      Worker.create({
        connection: base.connection,
        taskQueue: ctx.taskQueue,
        workflowBundle: base.workflowBundle,
        activities: guardedActivities(ctx.redis, ctx.prefix),
        plugins: [new FireOncePlugin({ redis: ctx.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 })],
        workerDeploymentOptions: { version: { deploymentName, buildId }, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' },
      });
    const scope = newScope('versioning');
    const [workerA, workerB] = await Promise.all([workerOf('A'), workerOf('B')]);
    const runs = await workerA.runUntil(async () => {
      await setCurrent(ctx, deploymentName, 'A');
      const first = await ctx.start('dispatchRun', [scope, 3_000]);
      await ctx.started('dispatchJob', scope);
      return workerB.runUntil(async () => {
        await setCurrent(ctx, deploymentName, 'B');
        const second = await ctx.start('dispatchRun', [scope, 3_000]); // while A's job runs
        const results = await Promise.all([first.result(), second.result()]);
        const third = await ctx.start('dispatchRun', [scope, 3_000]); // after the commit
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
    // The dispatch log, flushed as the workers stopped: B's run waited for A's job (in its slot, its
    // one attempt being its last) and got its result, as did the later run and the reset, from the artifact.
    const decisions: Record<string, number> = {};
    for (const [, fields] of await ctx.redis.xrange(new FireOnceKeys(ctx.prefix, ctx.client.options.namespace).log(), '-', '+')) {
      const { decision, scope: of } = parseEvent(fields);
      if (of === scope) decisions[decision] = (decisions[decision] ?? 0) + 1;
    }
    expect(decisions).toEqual({ dispatched: 1, committed: 1, 'in-flight-waited': 1, 'fast-forwarded': 3 });
  });
});
