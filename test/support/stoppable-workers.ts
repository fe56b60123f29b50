import { randomUUID } from 'node:crypto';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOncePlugin, fireOnce, type FireOncePluginOptions } from '../../src';
import { FireOnceKeys } from '../../src/core';
import { counterKey, type JobResult } from '../temporal-features/fixtures/activities';
import type { FeatureContext } from './features';
import type { SampleWorkerBase } from './sample-harness';

// Workers that a test/temporal-features test starts, stops and starts again itself, as the tests
// of a local activity's hand-off at shutdown do, with a guarded job that runs until the test opens
// its gate: nothing in them depends on how long anything takes.

/** The key whose existence lets {@link gatedDispatchJob} of `scope` finish: the test sets it. */
export const gateKey = (ctx: FeatureContext, scope: string) => `${ctx.prefix}:gate:${scope}`;

/** dispatchJob, counted as the fixture's (started and finished), that ends once the test sets its scope's gate key. */
export const gatedDispatchJob = (redis: Redis, prefix: string) =>
  fireOnce(async (scope: string): Promise<JobResult> => {
    await redis.incr(counterKey(prefix, 'dispatchJob', scope));
    while (!(await redis.exists(`${prefix}:gate:${scope}`))) await new Promise((r) => setTimeout(r, 20));
    await redis.incr(counterKey(prefix, 'dispatchJob', scope, 'finished'));
    return { scope, nonce: randomUUID() };
  });

/** How many connections are subscribed to `scope`'s wake channel: a call waiting in its slot is one. */
export const wakeSubscribers = async (ctx: FeatureContext, scope: string) =>
  Number(((await ctx.redis.pubsub('NUMSUB', new FireOnceKeys(ctx.prefix).wakeChannel(scope))) as [string, number])[1]);

/** What {@link useStoppableWorkers}'s `startWorker` is given over its defaults. */
export interface StoppableWorkerOptions {
  readonly plugin?: Partial<FireOncePluginOptions>;
  readonly worker?: Partial<WorkerOptions>;
}

/**
 * `startWorker`: a running worker with the plugin and {@link gatedDispatchJob} on `taskQueue`; `run`
 * is its run(), `stop` shuts it down and awaits it. Each worker a test leaves running (a failed
 * one's too) is stopped after it.
 */
export function useStoppableWorkers() {
  const running = new Set<() => Promise<void>>();
  afterEach(async () => {
    for (const stop of running) await stop();
  });

  async function startWorker(ctx: FeatureContext, base: SampleWorkerBase, taskQueue: string, options: StoppableWorkerOptions = {}) {
    const worker = await Worker.create({
      connection: base.connection,
      taskQueue,
      workflowBundle: base.workflowBundle,
      activities: { dispatchJob: gatedDispatchJob(ctx.redis, ctx.prefix) },
      plugins: [new FireOncePlugin({ redis: ctx.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50, ...options.plugin })],
      ...options.worker,
    });
    const run = worker.run();
    const stop = async () => {
      running.delete(stop);
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await run;
    };
    running.add(stop);
    return { worker, run, stop };
  }

  return { startWorker };
}
