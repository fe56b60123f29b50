import { randomUUID } from 'node:crypto';
import { heartbeat, sleep } from '@temporalio/activity';
import type { Redis } from 'ioredis';
import { fireOnce } from '../../src';

/** The job type the stored result is named after. */
export const SUMMARY_JOB = 'session-summary';

/** What the slow job produces. `jobId` is fresh per run of the job, so copies are easy to spot. */
export interface Summary {
  readonly sessionId: string;
  readonly text: string;
  /** Which dispatch of this session's job produced it: 1 for the first. */
  readonly dispatch: number;
  readonly jobId: string;
}

/** What the result-cache workflow may call. */
export interface SummaryActivities {
  /** Guarded in 'result' mode: runs the slow job once per session and stores what it returns. */
  summarizeSession(sessionId: string): Promise<Summary>;
}

/** What the activities need. */
export interface SummaryActivityDeps {
  readonly redis: Redis;
  /** Prefix of the per-session dispatch counters ({@link dispatchesKey}). */
  readonly keyPrefix: string;
  /** How long the job takes. */
  readonly jobMs: number;
}

/**
 * The dispatch counter of one session under `prefix`, INCR'd in the activity body each time the
 * job really runs: a count the guard does not own.
 */
export function dispatchesKey(prefix: string, sessionId: string): string {
  return `${prefix}:count:dispatches:${encodeURIComponent(sessionId)}`;
}

/** How often the job heartbeats: well inside the workflow's `heartbeatTimeout` (the SDK throttles beats). */
const HEARTBEAT_EVERY_MS = 1_000;

/**
 * The result-cache activities. `summarizeSession` uses the default `'result'` artifact mode:
 * the guard stores its return value, runs that find the job in flight wait for it, and later
 * runs fast-forward to the stored value without running the job.
 */
export function createSummaryActivities(deps: SummaryActivityDeps): SummaryActivities {
  async function summarizeSession(sessionId: string): Promise<Summary> {
    const dispatch = await deps.redis.incr(dispatchesKey(deps.keyPrefix, sessionId));
    // The slow job. It heartbeats, as Temporal asks of any activity under a heartbeatTimeout: the
    // plugin heartbeats only the runs that wait, never the one running your job. The activity's
    // sleep also ends at once if the run is cancelled.
    for (const end = Date.now() + deps.jobMs; Date.now() < end;) {
      heartbeat();
      await sleep(Math.min(HEARTBEAT_EVERY_MS, end - Date.now()));
    }
    return { sessionId, text: `summary of ${sessionId}`, dispatch, jobId: randomUUID() };
  }

  return {
    summarizeSession: fireOnce(summarizeSession, {
      jobType: SUMMARY_JOB,
      // While the job runs the lock is a lease the worker renews (lockMode 'lease', the
      // default), and the commit replaces it with the stored result. lockTtlMs only matters
      // if a result cannot be stored (over maxArtifactBytes): the lock is then held this long.
      lockTtlMs: 2 * deps.jobMs + 5_000,
    }),
  };
}
