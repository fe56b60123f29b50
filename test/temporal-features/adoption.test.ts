import { ActivityFailure, ApplicationFailure, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { DeterminismViolationError } from '@temporalio/workflow';
import { DefaultLogger, Worker, bundleWorkflowCode, type ReplayWorkerOptions, type WorkflowBundle } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { SCOPE_HEADER } from '../../src/core';
import { waitFor } from '../support/wait';
import { guardedActivities, plainActivities } from './fixtures/activities';
import { goSignal } from './fixtures/workflows';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';

type History = temporal.api.history.v1.IHistory;

/** The scope headers on every ActivityTaskScheduled and StartChildWorkflowExecutionInitiated event: what the plugin adds. */
function scopeHeaders(history: History): (string | undefined)[] {
  return (history.events ?? []).flatMap((e) => {
    const attrs = e.activityTaskScheduledEventAttributes ?? e.startChildWorkflowExecutionInitiatedEventAttributes;
    return attrs ? [attrs.header?.fields?.[SCOPE_HEADER] ? 'scope' : undefined] : [];
  });
}

/** Replay `histories`; the errors, one per history (`undefined`: replayed with no nondeterminism). */
async function replay(options: ReplayWorkerOptions, histories: { workflowId: string; history: History }[]): Promise<unknown[]> {
  const errors: unknown[] = [];
  for await (const result of Worker.runReplayHistories({ ...options, replayName: 'fire-once-adoption' }, histories)) errors.push(result.error);
  return errors;
}

// Adopting the plugin on a fleet with open workflows, and removing it again. Before adoption a
// worker has no plugin, its workflows bundled without the scope interceptor and its activities
// plain (a fireOnce-marked activity refuses to run without the plugin); its workflow code is
// either the old code, without setDispatchScope, or already today's (setDispatchScope only sets a
// global). After adoption: the plugin, and the same activities marked with fireOnce.
describe('Temporal features: adopting and removing the plugin', () => {
  const { harness, context } = useFeatures('adopt');
  type Fixture = ReturnType<typeof context>;
  const workflowsPath = require.resolve('./fixtures/workflows');
  const bundles: Partial<Record<'old code' | 'bare', WorkflowBundle>> = {};
  beforeAll(async () => {
    const bundle = (path: string) => bundleWorkflowCode({ workflowsPath: path, logger: new DefaultLogger('ERROR') });
    bundles.bare = await bundle(workflowsPath);
    bundles['old code'] = await bundle(require.resolve('./fixtures/pre-adoption-workflows'));
  });

  /**
   * Run `scenario` on a worker of `ctx`'s task queue: before adoption (`old code`: the workflows
   * without setDispatchScope; `bare`: today's workflows, bundled without the plugin) or after it
   * (`plugin`). `activities: {}` polls workflow tasks only.
   */
  async function onWorker<T>({ ctx, base }: Fixture, kind: 'old code' | 'bare' | 'plugin', activities: object, scenario: () => Promise<T>): Promise<T> {
    const common = { connection: base.connection, taskQueue: ctx.taskQueue, activities };
    const worker = await Worker.create(
      kind !== 'plugin'
        ? { ...common, workflowBundle: bundles[kind]! }
        : {
            ...common,
            workflowBundle: base.workflowBundle,
            plugins: [new FireOncePlugin({ redis: harness.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 })],
          },
    );
    return worker.runUntil(scenario());
  }

  /** The histories of `adoptionRun` and its child. */
  async function histories(handle: WorkflowHandle) {
    const child = harness.client.workflow.getHandle(`${handle.workflowId}-child`);
    return [
      { workflowId: handle.workflowId, history: await handle.fetchHistory() },
      { workflowId: child.workflowId, history: await child.fetchHistory() },
    ];
  }

  const pluginReplay = (ctx: FeatureContext): ReplayWorkerOptions => ({
    workflowsPath,
    plugins: [new FireOncePlugin({ redis: harness.redis, keyPrefix: ctx.prefix })],
  });

  it('replay: histories recorded without the plugin replay with it (and without it), with no nondeterminism', async () => {
    const fx = context();
    const { ctx } = fx;
    const recorded = [];
    for (const kind of ['old code', 'bare'] as const) {
      const scope = newScope('before');
      recorded.push(
        ...(await onWorker(fx, kind, plainActivities(harness.redis, ctx.prefix), async () => {
          const handle = await ctx.start('adoptionRun', [scope, 10]);
          await handle.result();
          return histories(handle);
        })),
      );
    }
    for (const { history } of recorded.filter((_, i) => i % 2 === 0)) expect(scopeHeaders(history)).toEqual([undefined, undefined]); // recorded without it indeed
    const clean = recorded.map(() => undefined);
    expect(await replay(pluginReplay(ctx), recorded)).toEqual(clean);
    expect(await replay({ workflowsPath }, recorded)).toEqual(clean);
  });

  it('replay: histories recorded with the plugin replay without it, with no nondeterminism', async () => {
    const fx = context();
    const { ctx } = fx;
    const scope = newScope('after');
    const recorded = await onWorker(fx, 'plugin', guardedActivities(harness.redis, ctx.prefix), async () => {
      const handle = await ctx.start('adoptionRun', [scope, 10]);
      oneResult([(await handle.result())[0]!, (await handle.result())[2]!], scope); // the child fast-forwarded
      return histories(handle);
    });
    expect(scopeHeaders(recorded[0]!.history)).toEqual(['scope', 'scope']);
    expect(scopeHeaders(recorded[1]!.history)).toEqual(['scope']); // the child inherited it
    expect(await replay({ workflowsPath }, recorded)).toEqual([undefined, undefined]);
    // The control: the same history against changed workflow code does fail.
    const [changed] = await replay({ workflowsPath: require.resolve('./fixtures/changed-workflows') }, recorded.slice(0, 1));
    expect(changed).toBeInstanceOf(DeterminismViolationError);
  });

  it('replay: a child whose commands depend on the scope it inherited replays with the plugin, not without it', async () => {
    const fx = context();
    const { ctx } = fx;
    const scope = newScope('branch');
    const child = await onWorker(fx, 'plugin', {}, async () => {
      const handle = await ctx.start('scopeBranchParentRun', [scope]);
      expect(await handle.result()).toBe(scope); // the child inherited it, so it started no timer
      const childHandle = harness.client.workflow.getHandle(`${handle.workflowId}-child`);
      return { workflowId: childHandle.workflowId, history: await childHandle.fetchHistory() };
    });
    expect(await replay(pluginReplay(ctx), [child])).toEqual([undefined]);
    // Without the plugin the inherited scope is undefined, the code starts a timer the history lacks.
    expect((await replay({ workflowsPath }, [child]))[0]).toBeInstanceOf(DeterminismViolationError);
  });

  it('an open workflow adopted mid-flight: what it schedules after adoption is guarded', async () => {
    const fx = context();
    const { ctx } = fx;
    const scope = newScope('mid');
    const handle = await onWorker(fx, 'bare', plainActivities(harness.redis, ctx.prefix), async () => {
      const h = await ctx.start('twoStepRun', [scope, 10]);
      // Stop the old worker only once the workflow has taken the job's result and waits for `go`:
      // a workflow task cut short by the shutdown would hold the run up for its 10 s timeout.
      await waitFor('the workflow to wait for go', async () => {
        const events = (await h.fetchHistory()).events ?? [];
        return events.some((e) => e.activityTaskCompletedEventAttributes) && events.at(-1)?.workflowTaskCompletedEventAttributes != null;
      });
      return h;
    });
    const [adopted, fresh] = await onWorker(fx, 'plugin', guardedActivities(harness.redis, ctx.prefix), async () => {
      await handle.signal(goSignal); // replays the pre-adoption history on this worker, then schedules reportJob
      const adoptedResult = await handle.result();
      const next = await ctx.start('twoStepRun', [scope, 10]);
      await next.signal(goSignal);
      return [adoptedResult, await next.result()];
    });
    oneResult([adopted[1]!, fresh[1]!], scope); // reportJob: dispatched once, after adoption
    expect(await ctx.count('reportJob', scope)).toBe(1);
    // dispatchJob ran before adoption without leaving an artifact, so the first guarded call dispatched it again.
    expect(await ctx.count('dispatchJob', scope)).toBe(2);
  });

  /** Schedule dispatchRun on a worker without the plugin and without activities; its activity then waits for the next worker. */
  async function scheduledBeforeAdoption(fx: Fixture, scope: string): Promise<WorkflowHandle> {
    const { ctx } = fx;
    return onWorker(fx, 'bare', {}, async () => {
      const handle = await ctx.start('dispatchRun', [scope, 10]);
      await waitFor('dispatchJob to be scheduled', async () =>
        ((await handle.fetchHistory()).events ?? []).some((e) => e.activityTaskScheduledEventAttributes),
      );
      return handle;
    });
  }

  it('an activity scheduled before adoption and started after it has no scope: FireOnceMissingScope, non-retryable, nothing dispatched', async () => {
    const fx = context();
    const { ctx } = fx;
    const scope = newScope('pending');
    const handle = await scheduledBeforeAdoption(fx, scope);
    const error = await onWorker(fx, 'plugin', guardedActivities(harness.redis, ctx.prefix), () => handle.result().catch((e: unknown) => e));
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const cause = ((error as WorkflowFailedError).cause as ActivityFailure).cause as ApplicationFailure;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect({ type: cause.type, nonRetryable: cause.nonRetryable }).toEqual({ type: 'FireOnceMissingScope', nonRetryable: true });
    expect(await ctx.count('dispatchJob', scope)).toBe(0);
  });

  it('... unless fireOnce takes the scope from the arguments: then it is guarded, and dispatched once', async () => {
    const fx = context();
    const { ctx } = fx;
    const scope = newScope('pending-args');
    const handle = await scheduledBeforeAdoption(fx, scope);
    const results = await onWorker(fx, 'plugin', guardedActivities(harness.redis, ctx.prefix, { scopeFromArgs: true }), async () => [
      await handle.result(),
      await (await ctx.start('dispatchRun', [scope, 10])).result(),
    ]);
    oneResult(results, scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(1);
  });

  it('removal: an activity scheduled with the plugin runs unguarded on a worker without it', async () => {
    const fx = context();
    const { ctx } = fx;
    const scope = newScope('removed');
    const handle = await onWorker(fx, 'plugin', {}, async () => {
      const h = await ctx.start('dispatchRun', [scope, 10]);
      await waitFor('dispatchJob to be scheduled', async () => scopeHeaders(await h.fetchHistory()).length === 1);
      return h;
    });
    expect(scopeHeaders(await handle.fetchHistory())).toEqual(['scope']);
    const results = await onWorker(fx, 'bare', plainActivities(harness.redis, ctx.prefix), async () => [
      await handle.result(),
      await (await ctx.start('dispatchRun', [scope, 10])).result(),
    ]);
    expect(new Set(results.map((r) => r.nonce)).size).toBe(2); // no guard: each run dispatched
    expect(await ctx.count('dispatchJob', scope)).toBe(2);
  });
});
