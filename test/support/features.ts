import { randomUUID } from 'node:crypto';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOncePlugin, type FireOncePluginOptions } from '../../src';
import { useSampleHarness, type SampleWorkerBase } from './sample-harness';
import { readCount } from './redis';
import { waitFor } from './wait';
import { counterKey, guardedActivities, type JobName, type JobResult } from '../temporal-features/fixtures/activities';
import type * as workflows from '../temporal-features/fixtures/workflows';

type Workflows = typeof workflows;
type WorkflowName = { [K in keyof Workflows]: Workflows[K] extends (...args: never[]) => Promise<unknown> ? K : never }[keyof Workflows];

/** What a feature test gets while its worker runs: a fresh prefix and task queue, and helpers on them. */
export interface FeatureContext {
  readonly client: Client;
  readonly redis: Redis;
  readonly prefix: string;
  readonly taskQueue: string;
  /** Start a fixture workflow on this task queue, under a fresh workflow ID. */
  start<W extends WorkflowName>(workflow: W, args: Parameters<Workflows[W]>): Promise<WorkflowHandle<Workflows[W]>>;
  /** How often `job` started (or finished) in `scope`, by the counter in its body. */
  count(job: JobName, scope: string, event?: 'started' | 'finished'): Promise<number>;
  /** Resolve once `job` has started `n` times in `scope`. */
  started(job: JobName, scope: string, n?: number): Promise<void>;
}

/** A fresh scope ID of a test. */
export const newScope = (name: string) => `${name}-${randomUUID()}`;

/**
 * The hooks of a test/temporal-features file: the sample harness (Redis, a Temporal client and
 * the fixture workflows bundled once, through `workflowInterceptorModules`), and `withWorker`,
 * which runs one scenario against a worker with the plugin and the guarded fixture activities.
 */
export function useFeatures(name: string) {
  const h = useSampleHarness(name, require.resolve('../temporal-features/fixtures/workflows'), 'ERROR');

  /** A context on a fresh prefix and task queue, for a worker the caller creates itself. */
  function context(): { ctx: FeatureContext; base: SampleWorkerBase } {
    const { prefix, taskQueue, worker: base } = h.fresh();
    const ctx: FeatureContext = {
      client: h.client,
      redis: h.redis,
      prefix,
      taskQueue,
      start: (workflow, args) => h.client.workflow.start(workflow, { taskQueue, workflowId: `${workflow}-${randomUUID()}`, args } as never),
      count: (job, scope, event = 'started') => readCount(h.redis, counterKey(prefix, job, scope, event)),
      started: async (job, scope, n = 1) => void (await waitFor(`${job} to start ${n} time(s) in ${scope}`, async () => (await ctx.count(job, scope)) >= n)),
    };
    return { ctx, base };
  }

  async function withWorker<T>(
    scenario: (ctx: FeatureContext, plugin: FireOncePlugin) => Promise<T>,
    options: {
      readonly plugin?: Partial<FireOncePluginOptions>;
      readonly worker?: Partial<WorkerOptions>;
      /** Activities of the scenario's own, on this context's Redis and prefix, in place of the fixtures' of the same names. */
      readonly activities?: (redis: Redis, prefix: string) => Record<string, (...args: never[]) => Promise<unknown>>;
    } = {},
  ): Promise<T> {
    const { ctx, base } = context();
    const plugin = new FireOncePlugin({ redis: h.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50, ...options.plugin });
    const worker = await Worker.create({
      connection: base.connection,
      taskQueue: ctx.taskQueue,
      workflowBundle: base.workflowBundle,
      activities: { ...guardedActivities(h.redis, ctx.prefix), ...options.activities?.(h.redis, ctx.prefix) },
      plugins: [plugin],
      ...options.worker,
    });
    return worker.runUntil(scenario(ctx, plugin));
  }

  return { harness: h, context, withWorker };
}

/**
 * Every result is the one dispatch's: same scope, same nonce. Returns the nonce. Together with a
 * started count of 1 this is the guarantee: one dispatch, and every run got its result.
 */
export function oneResult(results: readonly JobResult[], scope: string): string {
  expect(results.length).toBeGreaterThan(0);
  const nonces = new Set(results.map((r) => r.nonce));
  expect({ scopes: [...new Set(results.map((r) => r.scope))], distinctResults: nonces.size }).toEqual({ scopes: [scope], distinctResults: 1 });
  return [...nonces][0]!;
}

/** Two runs of `workflow` in `scope` at once (one dispatches, one waits its turn), then a third (a fast-forward); their results. */
export async function twoRunsThenOne(ctx: FeatureContext, workflow: 'dispatchRun' | 'localRun', scope: string, ms: number): Promise<JobResult[]> {
  const concurrent = await Promise.all([ctx.start(workflow, [scope, ms]), ctx.start(workflow, [scope, ms])]);
  const results = await Promise.all(concurrent.map((h) => h.result()));
  return [...results, await (await ctx.start(workflow, [scope, ms])).result()];
}

/**
 * Reset `handle`'s run to the end of its first workflow task (before it scheduled anything), as
 * `temporal workflow reset --type FirstWorkflowTask` does; the new run re-executes from there.
 * Returns a handle on the new run.
 */
export async function resetToFirstWorkflowTask(ctx: FeatureContext, handle: WorkflowHandle): Promise<WorkflowHandle> {
  const events = (await handle.fetchHistory()).events ?? [];
  const firstTask = events.find((e) => e.workflowTaskCompletedEventAttributes);
  if (!firstTask?.eventId) throw new Error(`${handle.workflowId} has no completed workflow task to reset to`);
  const firstRunId = (await handle.describe()).runId;
  const { runId } = await ctx.client.workflowService.resetWorkflowExecution({
    namespace: ctx.client.options.namespace,
    workflowExecution: { workflowId: handle.workflowId, runId: firstRunId },
    workflowTaskFinishEventId: firstTask.eventId,
    requestId: randomUUID(),
    reason: 'temporal-fire-once reset test',
  });
  if (!runId || runId === firstRunId) throw new Error(`reset of ${handle.workflowId} started no new run`);
  return ctx.client.workflow.getHandle(handle.workflowId, runId);
}
