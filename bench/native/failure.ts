/**
 * The job fails while runs wait on it. One run starts the job (which fails on its first run,
 * after a while); `waiters` more runs arrive while it is in flight. Counted: how many runs
 * succeeded and failed, and how often the job ran (its own counter).
 */
import type { Redis } from 'ioredis';
import { waitForCount } from '../../sample-workflows/shared/redis';
import { counterKeys, type FailureVariant } from './activities';
import type { StepRunner } from './measure';
import { flakyStep } from './workflows';

/** What happened to one variant. */
export interface FailureOutcome {
  readonly variant: FailureVariant;
  readonly runs: number;
  readonly succeeded: number;
  readonly failed: number;
  /** How many times the job body ran. */
  readonly jobRuns: number;
}

/** Run the scenario once for `variant`. */
export async function failureWhileWaiting(runner: StepRunner, redis: Redis, variant: FailureVariant, waiters: number): Promise<FailureOutcome> {
  const scope = `${runner.prefix}-failure-${variant}`;
  const counter = counterKeys.flaky(runner.prefix, scope);
  const start = (i: number) =>
    runner.client.workflow.start(flakyStep, { taskQueue: runner.taskQueue, workflowId: `${scope}-run-${i}`, args: [variant, scope] });
  const handles = [await start(0)];
  await waitForCount(redis, counter, 1); // the first run's job is in flight
  for (let i = 1; i <= waiters; i++) handles.push(await start(i));
  const settled = await Promise.allSettled(handles.map((h) => h.result()));
  const succeeded = settled.filter((s) => s.status === 'fulfilled').length;
  return { variant, runs: handles.length, succeeded, failed: handles.length - succeeded, jobRuns: Number(await redis.get(counter)) };
}
