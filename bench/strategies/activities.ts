/**
 * The activities of every strategy for one bench run, on one worker. `fire-once` is the
 * chat-session sample's own guarded `dispatchSummary` (the real `fireOnce` under the real
 * `FireOncePlugin`); `none` is the sample's unguarded body; the three strawmen wrap that body in
 * a few plain ioredis calls. The strawmen live here only: they are never options of the library.
 * `temporal-native` uses no Redis lock: its dispatch starts or attaches to a job workflow
 * (`../shared/native-job.ts`) whose one activity is the unguarded body.
 */
import { randomBytes } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Redis } from 'ioredis';
import { startOrAttachJob } from '../shared/native-job';
import { createChatActivities, type ChatActivities } from '../../sample-workflows/chat-session/activities';
import { chatKeys, DISPATCH_STEP, type ChatKeys } from '../../sample-workflows/chat-session/config';
import { sleep } from '../../sample-workflows/shared/redis';
import { runnerKeys } from './job-runner';
import { STRATEGIES, type StrategyName } from './strategies';

type Dispatch = (sessionId: string, invocation: string) => Promise<void>;

/** What the activities of one run need. */
export interface StrategyActivityDeps {
  readonly redis: Redis;
  /** The run's key prefix; strategy `s` keeps its keys under `<runPrefix>:<s>`. */
  readonly runPrefix: string;
  /** Lock TTL of every lock-based strategy, `fire-once` included. */
  readonly lockTtlMs: number;
  /** For `temporal-native`, which starts its job workflow from an activity. */
  readonly client: Client;
}

/** The sample keys of one strategy in one run. */
export function strategyKeys(runPrefix: string, strategy: StrategyName): ChatKeys {
  return chatKeys(`${runPrefix}:${strategy}`);
}

/**
 * Every strategy's activities, registered as `<strategy>:dispatch` and `<strategy>:awaitSummary`
 * for the bench workflow (and `temporal-native:push` for its job workflow). Each dispatch
 * receives the invocation ID as the job's message.
 */
export function createStrategyActivities(deps: StrategyActivityDeps): Record<string, (...args: never[]) => Promise<unknown>> {
  const activities: Record<string, (...args: never[]) => Promise<unknown>> = {};
  for (const strategy of STRATEGIES) {
    const keys = strategyKeys(deps.runPrefix, strategy);
    const sample = createChatActivities({ redis: deps.redis, keys, lockTtlMs: deps.lockTtlMs });
    activities[`${strategy}:dispatch`] = dispatchFor(strategy, sample, deps, keys);
    activities[`${strategy}:awaitSummary`] = sample.awaitSummary;
    if (strategy === 'temporal-native') activities[`${strategy}:push`] = sample.dispatchSummaryUnguarded;
  }
  return activities;
}

function dispatchFor(strategy: StrategyName, sample: ChatActivities, deps: StrategyActivityDeps, keys: ChatKeys): Dispatch {
  const push: Dispatch = (sessionId, invocation) => sample.dispatchSummaryUnguarded(sessionId, invocation);
  switch (strategy) {
    case 'none':
      return push;
    case 'artifact-only':
      return artifactOnly(deps.redis, keys, push);
    case 'lock-only':
      return lockOnly(deps, keys, push);
    case 'release-on-any-resolution':
      return releaseOnAnyResolution(deps, keys, push);
    case 'fire-once':
      return sample.dispatchSummary; // marked with fireOnce: guarded by the plugin, found by its registered name
    case 'temporal-native':
      return nativeDispatch(deps);
  }
}

/**
 * Temporal alone: start the job workflow `job:{<run>/<session>}:dispatch-summary` or attach to
 * it; it pushes the job with this invocation's ID. The run prefix keeps bench runs apart, since
 * a job workflow outlives its run (retention). One attempt: the job is the push.
 */
function nativeDispatch(deps: StrategyActivityDeps): Dispatch {
  return async function nativeDispatch(sessionId, invocation) {
    await startOrAttachJob<void>({
      client: deps.client,
      taskQueue: Context.current().info.taskQueue,
      scope: `{${deps.runPrefix}/${sessionId}}`,
      step: DISPATCH_STEP,
      activity: 'temporal-native:push',
      args: [sessionId, invocation],
      maximumAttempts: 1,
    });
  };
}

/** Strawman 1: check the artifact, never lock. */
function artifactOnly(redis: Redis, keys: ChatKeys, push: Dispatch): Dispatch {
  return async function artifactOnlyDispatch(sessionId, invocation) {
    if ((await redis.exists(keys.summary(sessionId))) === 1) return;
    await push(sessionId, invocation);
  };
}

/** Strawman 2: `SET NX PX` with a fixed TTL, released only on failure; no artifact check. */
function lockOnly(deps: StrategyActivityDeps, keys: ChatKeys, push: Dispatch): Dispatch {
  return async function lockOnlyDispatch(sessionId, invocation) {
    const lock = strawmanLock(keys, sessionId);
    const token = await tryLock(deps, lock);
    if (token === undefined) return;
    try {
      await push(sessionId, invocation);
    } catch (err) {
      await compareAndDelete(deps.redis, lock, token);
      throw err;
    }
  };
}

/**
 * Strawman 3: both layers, but the lock is released as soon as the job resolves, success or
 * failure; the seed's first attempt. The activity waits for its own job's resolution to do so.
 */
function releaseOnAnyResolution(deps: StrategyActivityDeps, keys: ChatKeys, push: Dispatch): Dispatch {
  const resolvedKey = runnerKeys(keys).resolved;
  return async function releaseOnAnyResolutionDispatch(sessionId, invocation) {
    if ((await deps.redis.exists(keys.summary(sessionId))) === 1) return;
    const lock = strawmanLock(keys, sessionId);
    const token = await tryLock(deps, lock);
    if (token === undefined) return;
    try {
      await push(sessionId, invocation);
      const deadline = Date.now() + 30_000;
      while ((await deps.redis.exists(resolvedKey(invocation))) === 0) {
        if (Date.now() > deadline) throw new Error(`job of ${invocation} did not resolve within 30 s`);
        await sleep(10);
      }
    } finally {
      await compareAndDelete(deps.redis, lock, token);
    }
  };
}

function strawmanLock(keys: ChatKeys, sessionId: string): string {
  return `${keys.prefix}:{${sessionId}}:strawman-lock`;
}

async function tryLock(deps: StrategyActivityDeps, lock: string): Promise<string | undefined> {
  const token = randomBytes(16).toString('base64url');
  return (await deps.redis.set(lock, token, 'PX', deps.lockTtlMs, 'NX')) === 'OK' ? token : undefined;
}

const COMPARE_AND_DELETE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

async function compareAndDelete(redis: Redis, lock: string, token: string): Promise<void> {
  await redis.eval(COMPARE_AND_DELETE, 1, lock, token);
}
