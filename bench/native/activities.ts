/**
 * The activities of `bench:native`: one trivial step run three ways, and a job that fails on its
 * first run, for the failure-while-waiting scenario. Every job body INCRs a counter of its own
 * (a Redis key neither the guard nor Temporal owns), so the bench can check how often each ran.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Redis } from 'ioredis';
import { fireOnce } from '../../src';
import { startOrAttachJob } from '../shared/native-job';

/** The three ways to run a step. */
export const VARIANTS = ['plain', 'plugin', 'native'] as const;
export type Variant = (typeof VARIANTS)[number];

/** The ways the failure scenario runs its job. */
export const FAILURE_VARIANTS = ['plugin', 'native', 'native-retry'] as const;
export type FailureVariant = (typeof FAILURE_VARIANTS)[number];

/** The step name of the native job workflows: `job:{scope}:step`. */
export const STEP = 'step';

/** What the activities need. */
export interface NativeBenchDeps {
  readonly redis: Redis;
  /** The Temporal client the native starter uses. */
  readonly client: Client;
  /** Where the job counters live: `<prefix>:runs:<variant>`, `<prefix>:flaky:<scope>`. */
  readonly prefix: string;
  /** What a step returns. */
  readonly payload: string;
  /** How long the failing job runs before it fails (or, the second time, succeeds). */
  readonly flakyJobMs: number;
}

/** Counter keys, read back by the bench. */
export const counterKeys = {
  runs: (prefix: string, variant: Variant) => `${prefix}:runs:${variant}`,
  flaky: (prefix: string, scope: string) => `${prefix}:flaky:${scope}`,
};

/**
 * `plainStep` (unguarded), `guardedStep` (fireOnce, scope from the argument), and
 * `startOrAttachStep`, which starts or attaches to the job workflow `job:{scope}:step` whose one
 * activity is `nativeJobStep`. The failure scenario's job is `flakyJob`: it fails its first run
 * for a scope, after `flakyJobMs`, and succeeds after that.
 */
export function createNativeBenchActivities(deps: NativeBenchDeps) {
  const { redis, prefix, payload } = deps;
  const body =
    (variant: Variant) =>
    async (_scope: string): Promise<string> => {
      await redis.incr(counterKeys.runs(prefix, variant));
      return payload;
    };
  async function flakyJob(scope: string): Promise<string> {
    const run = await redis.incr(counterKeys.flaky(prefix, scope));
    await new Promise((r) => setTimeout(r, deps.flakyJobMs));
    if (run === 1) throw ApplicationFailure.retryable(`the job of ${scope} fails on its first run`, 'JobFailed');
    return `done on run ${run}`;
  }
  const native = (activity: string, scope: string, maximumAttempts: number) =>
    startOrAttachJob<string>({ client: deps.client, taskQueue: Context.current().info.taskQueue, scope, step: STEP, activity, args: [scope], maximumAttempts });
  return {
    plainStep: body('plain'),
    guardedStep: fireOnce(body('plugin'), { scope: ([scope]) => scope }),
    nativeJobStep: body('native'),
    startOrAttachStep: (scope: string) => native('nativeJobStep', scope, 1),
    flakyJob,
    guardedFlakyJob: fireOnce(flakyJob, { scope: ([scope]) => scope }),
    startOrAttachFlakyJob: (scope: string, maximumAttempts: number) => native('flakyJob', scope, maximumAttempts),
  };
}

/** The activity interface the bench's workflows proxy. */
export type NativeBenchActivities = ReturnType<typeof createNativeBenchActivities>;
