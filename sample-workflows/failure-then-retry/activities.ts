import { ApplicationFailure, heartbeat, sleep } from '@temporalio/activity';
import type { Redis } from 'ioredis';
import { fireOnce } from '../../src';

/** The job type the stored report is named after. */
export const REPORT_JOB = 'report';

/** The `type` of the failure the report job throws while the downstream service is down. */
export const RENDER_FAILED = 'RenderFailed';

/** What the report job produces. */
export interface Report {
  readonly reportId: string;
  /** Which dispatch produced it: the count of dispatches when it ran. */
  readonly dispatch: number;
  readonly body: string;
}

/** What the failure-then-retry workflow may call. */
export interface ReportActivities {
  /** Guarded: renders the report once per report ID; a failed render frees the step for the next run. */
  renderReport(reportId: string): Promise<Report>;
}

/** What the activities need. */
export interface ReportActivityDeps {
  readonly redis: Redis;
  /** The key prefix the dispatch counters live under. */
  readonly keyPrefix: string;
  /** How many dispatches of each report fail before the renderer "comes back". */
  readonly failFirst: number;
  /** How long one render takes. */
  readonly jobMs: number;
}

/**
 * The dispatch counter of one report under `prefix`, INCR'd in the activity body on every real
 * dispatch: a count the guard does not own.
 */
export function dispatchesKey(prefix: string, reportId: string): string {
  return `${prefix}:count:dispatches:${encodeURIComponent(reportId)}`;
}

/** How often a render heartbeats: well inside the workflow's `heartbeatTimeout` (the SDK throttles beats). */
const HEARTBEAT_EVERY_MS = 1_000;

/**
 * The failure-then-retry activities. The first `failFirst` dispatches throw a non-retryable
 * `ApplicationFailure`, so the run that made them fails. The guard's failure branch then
 * compare-and-deletes the lock, and the next run of the same report dispatches again.
 */
export function createReportActivities(deps: ReportActivityDeps): ReportActivities {
  async function renderReport(reportId: string): Promise<Report> {
    const dispatch = await deps.redis.incr(dispatchesKey(deps.keyPrefix, reportId));
    // The render heartbeats, as Temporal asks of any activity under a heartbeatTimeout: the plugin
    // heartbeats only a run that waits for it, never the one rendering.
    for (const end = Date.now() + deps.jobMs; Date.now() < end;) {
      heartbeat();
      await sleep(Math.min(HEARTBEAT_EVERY_MS, end - Date.now()));
    }
    if (dispatch <= deps.failFirst) {
      throw ApplicationFailure.create({
        type: RENDER_FAILED,
        message: `rendering ${reportId} failed on dispatch #${dispatch}: the renderer is down`,
        nonRetryable: true,
      });
    }
    return { reportId, dispatch, body: `report ${reportId}, rendered by dispatch #${dispatch}` };
  }

  return {
    renderReport: fireOnce(renderReport, { jobType: REPORT_JOB, lockTtlMs: 2 * deps.jobMs + 5_000 }),
  };
}
