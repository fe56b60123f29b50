import { ApplicationFailure, heartbeat, sleep } from '@temporalio/activity';
import type { Redis } from 'ioredis';
import { fireOnce } from '../../src';
import { DISPATCH_STEP, SUMMARY_JOB, type ChatKeys } from './config';

/** One summary job as it travels on the job list. */
export interface SummaryJob {
  readonly sessionId: string;
  readonly message: string;
  readonly jobType: string;
  /** The dispatch count when it was pushed: which dispatch this job came from. */
  readonly dispatch: number;
  /** Which run of the job this is, set by the job runner when it puts a failed one back. @defaultValue 1 */
  readonly attempt?: number;
}

/** What the chat workflow may call. */
export interface ChatActivities {
  /** Guarded: pushes the summary job once per session, whatever the number of runs. */
  dispatchSummary(sessionId: string, message: string): Promise<void>;
  /** The same body without `fireOnce`: pushes a job on every run, as the seed's bug did. */
  dispatchSummaryUnguarded(sessionId: string, message: string): Promise<void>;
  /**
   * `dispatchSummaryUnguarded` marked `observeOnly`: still never guarded, but each call is
   * recorded in the dispatch log as `dispatched`, under the same step and job type as the guarded
   * one. `chatTurnUnguarded` calls it, so `npx fire-once report` can show the duplicates.
   */
  dispatchSummaryObserved(sessionId: string, message: string): Promise<void>;
  /** Waits for the summary artifact the job runner writes, and returns it. */
  awaitSummary(sessionId: string, timeoutMs: number): Promise<string>;
}

/** What the activities need. */
export interface ChatActivityDeps {
  readonly redis: Redis;
  readonly keys: ChatKeys;
  /** TTL of the dispatch lock: the job's worst-case life from dispatch to artifact, plus margin. */
  readonly lockTtlMs: number;
}

/**
 * The chat-session activities. `dispatchSummary` is external-artifact fire-once: it only pushes
 * the job, the job runner writes the artifact, and the guard checks that key exists. Its lock
 * is kept on success until its TTL, covering the gap between "job resolved" and "artifact
 * written". A run that finds the lock held skips: the job is already on its way.
 */
export function createChatActivities(deps: ChatActivityDeps): ChatActivities {
  const { redis, keys } = deps;

  async function dispatchSummary(sessionId: string, message: string): Promise<void> {
    const [dispatch] = await Promise.all([redis.incr(keys.dispatches), redis.incr(keys.sessionDispatches(sessionId))]);
    const job: SummaryJob = { sessionId, message, jobType: SUMMARY_JOB, dispatch };
    await redis.lpush(keys.jobs, JSON.stringify(job)); // the runner takes from the tail: first in, first out
  }

  // It waits up to `timeoutMs` and heartbeats while it waits, so that a cancelled run (or a dead
  // worker, with the workflow's heartbeatTimeout) stops it then, not at its deadline: the
  // activity's sleep rejects once the cancellation arrives with a heartbeat's reply.
  async function awaitSummary(sessionId: string, timeoutMs: number): Promise<string> {
    const key = keys.summary(sessionId);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const summary = await redis.get(key);
      if (summary !== null) return summary;
      if (Date.now() > deadline) {
        throw ApplicationFailure.create({ type: 'SummaryTimeout', message: `no summary at ${key} after ${timeoutMs} ms`, nonRetryable: true });
      }
      heartbeat();
      await sleep(25);
    }
  }

  return {
    dispatchSummary: fireOnce(dispatchSummary, {
      step: DISPATCH_STEP,
      jobType: SUMMARY_JOB,
      onInFlight: 'skip',
      // Each message differs, but the summary job is the session's: only the session must match.
      conflictKey: ([sessionId]) => sessionId,
      lockTtlMs: deps.lockTtlMs,
      artifact: { external: ({ scope, jobType }) => keys.summary(scope, jobType) },
    }),
    dispatchSummaryUnguarded: dispatchSummary,
    dispatchSummaryObserved: fireOnce(dispatchSummary, { step: DISPATCH_STEP, jobType: SUMMARY_JOB, observeOnly: true }),
    awaitSummary,
  };
}
