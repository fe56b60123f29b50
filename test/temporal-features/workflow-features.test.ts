import { ScheduleOverlapPolicy } from '@temporalio/client';
import type { JobResult } from './fixtures/activities';
import { Worker, type WorkerPlugin } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { guardedActivities } from './fixtures/activities';
import { dispatchSignal, dispatchUpdate, finishSignal, type signalledRun } from './fixtures/workflows';
import { newScope, oneResult, twoRunsThenOne, useFeatures, type FeatureContext } from '../support/features';
import { waitFor } from '../support/wait';

// Workflow features that schedule a guarded job, on the dev server: continue-as-new, child
// workflows, local activities, signal and update handlers, schedules. Each test: the job body
// starts once (counted in its body, outside the guard), and every run gets that one result.
describe('Temporal features: the guarded job dispatches once', () => {
  const { withWorker, context } = useFeatures('feat');

  it('continue-as-new: 3 chained runs inherit the scope and share one dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('can');
      const runs = await (await ctx.start('continueAsNewRun', [scope, 50, 3, []])).result();
      expect(runs.map((r) => r.inheritedScope)).toEqual([undefined, scope, scope]); // only the first set it
      oneResult(
        runs.map((r) => r.result),
        scope,
      );
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));

  it('child workflows: 3 children started at once inherit the scope and share one dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('child');
      const children = await (await ctx.start('parentRun', [scope, 500, 3])).result();
      expect(children.map((c) => c.inheritedScope)).toEqual([scope, scope, scope]);
      oneResult(
        children.map((c) => c.result),
        scope,
      );
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));

  it('child workflows: a signal in the first workflow task of a child runs under the scope it inherits', async () => {
    // The child's worker starts only after the parent has started and signalled it, so that the
    // child's first workflow task holds its start and the signal (python/tests/test_workflow_scope.py
    // runs the same on the Python side, whose SDK runs such a handler before the workflow function).
    const scope = newScope('signalled');
    const child = context();
    const childId = await withWorker((ctx) => ctx.start('signallingParentRun', [scope, child.ctx.taskQueue, 50]).then((h) => h.result()));
    const childWorker = await Worker.create({
      connection: child.base.connection,
      taskQueue: child.ctx.taskQueue,
      workflowBundle: child.base.workflowBundle,
      activities: guardedActivities(child.ctx.redis, child.ctx.prefix),
      plugins: [new FireOncePlugin({ redis: child.ctx.redis, keyPrefix: child.ctx.prefix, pollIntervalMs: 50 })],
    });
    const handle = child.ctx.client.workflow.getHandle<typeof signalledRun>(childId);
    const seen = await childWorker.runUntil(handle.result());
    const events = (await handle.fetchHistory()).events ?? [];
    const firstTask = events.findIndex((e) => e.workflowTaskStartedEventAttributes);
    expect(events.findIndex((e) => e.workflowExecutionSignaledEventAttributes)).toBeLessThan(firstTask); // in the first task
    expect(seen.map((s) => s.scope)).toEqual([scope]);
    expect(await child.ctx.count('dispatchJob', scope)).toBe(1);
  });

  it('local activities: 2 concurrent runs and a later one share one dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('local');
      oneResult(await twoRunsThenOne(ctx, 'localRun', scope, 500), scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));

  /**
   * Two concurrent runs and a later one on a worker whose plugins are FireOncePlugin, then `later`
   * (made with the run's context), with the guarded activities in `activitiesIn`: one dispatch.
   */
  async function oneDispatchBehind(later: (ctx: FeatureContext) => WorkerPlugin, activitiesIn: 'worker options' | 'the later plugin'): Promise<void> {
    const { ctx, base } = context();
    const plugin = new FireOncePlugin({ redis: ctx.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50 });
    const worker = await Worker.create({
      connection: base.connection,
      taskQueue: ctx.taskQueue,
      workflowBundle: base.workflowBundle,
      ...(activitiesIn === 'worker options' ? { activities: guardedActivities(ctx.redis, ctx.prefix) } : {}),
      plugins: [plugin, later(ctx)],
    });
    const scope = newScope('later-plugin');
    oneResult(await worker.runUntil(twoRunsThenOne(ctx, 'dispatchRun', scope, 500)), scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(1);
  }

  it('plugins: guarded activities that a plugin listed after FireOncePlugin adds are guarded; 2 concurrent runs and a later one share one dispatch', () =>
    // The plugin maps the guarded activities when it configures the worker, before the plugins
    // listed after it add theirs; it reads the worker's own activities again as the worker runs.
    oneDispatchBehind(
      (ctx) => ({
        name: 'adds-activities',
        configureWorker: (options) => ({ ...options, activities: { ...(options.activities ?? {}), ...guardedActivities(ctx.redis, ctx.prefix) } }),
      }),
      'the later plugin',
    ));

  it('plugins: guarded activities given in WorkerOptions stay guarded when a plugin listed after FireOncePlugin wraps them (tracing, say)', () =>
    // The wrappers carry no fire-once mark: the activities the worker runs with are read as the
    // worker runs, and merged with those the plugin found marked when it configured the worker.
    oneDispatchBehind(
      () => ({
        name: 'wraps-activities',
        configureWorker: (options) => ({
          ...options,
          activities: Object.fromEntries(
            Object.entries(options.activities ?? {}).map(([name, fn]) => [name, (...args: unknown[]) => (fn as (...a: unknown[]) => unknown)(...args)]),
          ),
        }),
      }),
      'worker options',
    ));

  it('signals and updates: 3 signals and 2 updates each schedule the job; one dispatch serves all 5', () =>
    withWorker(async (ctx) => {
      const scope = newScope('handlers');
      const handle = await ctx.start('handlersRun', [scope]);
      for (let i = 0; i < 3; i++) await handle.signal(dispatchSignal, 500);
      const updates = await Promise.all([handle.executeUpdate(dispatchUpdate, { args: [500] }), handle.executeUpdate(dispatchUpdate, { args: [500] })]);
      await handle.signal(finishSignal);
      const fromSignals = await handle.result();
      expect(fromSignals).toHaveLength(3);
      oneResult([...fromSignals, ...updates], scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));

  it('scope: the last setDispatchScope wins, and a fireOnce scope option wins over it', async () => {
    const [first, second, item] = [newScope('first'), newScope('second'), newScope('item')];
    const guardedUnder = async (ctx: FeatureContext, plugin: FireOncePlugin) => {
      await (await ctx.start('rescopedRun', [first, second, item])).result();
      const stored = await Promise.all([first, second, item].map((s) => ctx.redis.exists(plugin.guard.keys.artifact(s, 'dispatchJob'))));
      return [first, second, item].filter((_, i) => stored[i] === 1);
    };
    expect(await withWorker(guardedUnder)).toEqual([second]);
    expect(await withWorker(guardedUnder, { activities: (redis, prefix) => guardedActivities(redis, prefix, { scopeFromArgs: true }) })).toEqual([item]);
  });

  it('signal-with-start: two on one workflow ID and a plain run of the same scope share one dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('signal-with-start');
      const options = {
        taskQueue: ctx.taskQueue,
        workflowId: `handlers-${scope}`,
        args: [scope] as [string],
        signal: dispatchSignal,
        signalArgs: [800] as [number],
      };
      const handle = await ctx.client.workflow.signalWithStart('handlersRun', options); // starts the run, with the signal in its first task
      const plain = await ctx.start('dispatchRun', [scope, 800]);
      await ctx.client.workflow.signalWithStart('handlersRun', options); // the run is open: only signals it
      await handle.signal(finishSignal);
      const fromSignals = await handle.result();
      expect(fromSignals).toHaveLength(2);
      oneResult([...fromSignals, await plain.result()], scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
    }));

  it('schedules: every action the schedule starts shares one dispatch', () =>
    withWorker(async (ctx) => {
      const scope = newScope('sched');
      // An action a second, each running a 4 s job: the second starts while the first is in flight
      // (3 s of slack for a late schedule on a loaded machine; 1.5 s left it 0.5 s).
      const schedule = await ctx.client.schedule.create({
        scheduleId: `fire-once-${scope}`,
        spec: { intervals: [{ every: '1s' }] },
        action: { type: 'startWorkflow', workflowType: 'dispatchRun', args: [scope, 4_000], taskQueue: ctx.taskQueue },
        policies: { overlap: ScheduleOverlapPolicy.ALLOW_ALL },
      });
      let ids: string[];
      try {
        ids = await waitFor(
          'the schedule to start 3 runs',
          async () => {
            const started = (await schedule.describe()).info.recentActions.map((a) => a.action.workflow.workflowId);
            return started.length >= 3 && started;
          },
          { everyMs: 200 },
        );
      } finally {
        await schedule.delete();
      }
      expect(ids.length).toBeGreaterThanOrEqual(3);
      const results = await Promise.all(ids.map((id) => ctx.client.workflow.getHandle(id).result() as Promise<JobResult>));
      oneResult(results, scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
      // The runs overlapped: the second started before the first, which ran the job, had ended.
      const [first, second] = await Promise.all(ids.slice(0, 2).map((id) => ctx.client.workflow.getHandle(id).describe()));
      expect(second.startTime.getTime()).toBeLessThan(first.closeTime!.getTime());
    }));
});
