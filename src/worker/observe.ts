import type { Context } from '@temporalio/activity';
import type { MetricCounter, MetricHistogram, MetricMeter } from '@temporalio/common';
import type { Decision, DispatchLog } from '../core/dispatch-log';
import type { DispatchTarget } from '../core/guard';

/**
 * Metric names, stable and documented in docs/operating.md. Tags: `activity_type`, `step`,
 * `job_type` and, on the counter, `decision`. Never the scope: it is unbounded.
 *
 * @example
 * ```ts
 * import { METRICS } from 'temporal-fire-once/core';
 * METRICS.decisions; // 'fire_once_decisions', tagged decision, activity_type, step, job_type
 * ```
 */
export const METRICS = Object.freeze({
  decisions: 'fire_once_decisions',
  acquireLatency: 'fire_once_acquire_latency',
  waitTime: 'fire_once_wait_time',
} as const);

/** Records one guarded call's decisions: dispatch log, metrics and logs, from one place. */
export interface Observer {
  decision(decision: Decision, extra?: { readonly holder?: string; readonly fencingToken?: number; readonly late?: boolean }): void;
  acquireLatency(ms: number): void;
  waitTime(ms: number): void;
}

/** The metric instruments of one (namespace, task queue, activity type, step, job type). */
interface Instruments {
  readonly decisions: MetricCounter;
  readonly acquireLatency: MetricHistogram;
  readonly waitTime: MetricHistogram;
}

/**
 * Instruments, made once per tag set and reused: creating one crosses into the native runtime,
 * which a guarded activity should not pay on every call. The activity's own meter carries static
 * tags (namespace, task queue, activity type), so one key per tag set is exact. Bounded by the
 * worker's activity types.
 */
export type InstrumentCache = Map<string, Instruments>;

function instruments(ctx: Context, target: DispatchTarget, cache: InstrumentCache): Instruments {
  const { info } = ctx;
  const key = `${info.namespace}\0${info.taskQueue}\0${info.activityType}\0${target.step}\0${target.jobType}`;
  let found = cache.get(key);
  if (found === undefined) {
    const meter: MetricMeter = ctx.metricMeter.withTags({ activity_type: info.activityType, step: target.step, job_type: target.jobType });
    found = {
      decisions: meter.createCounter(METRICS.decisions, '1', 'fire-once guard decisions, by decision'),
      acquireLatency: meter.createHistogram(METRICS.acquireLatency, 'float', 'ms', 'one acquire round trip'),
      waitTime: meter.createHistogram(METRICS.waitTime, 'float', 'ms', 'time spent waiting for an in-flight dispatch'),
    };
    cache.set(key, found);
  }
  return found;
}

/** The observer of one guarded call. */
export function observe(ctx: Context, target: DispatchTarget, log: DispatchLog | undefined, cache: InstrumentCache): Observer {
  const { info } = ctx;
  const metrics = instruments(ctx, target, cache);
  return {
    decision(decision, extra = {}) {
      metrics.decisions.add(1, { decision });
      log?.record({
        decision,
        namespace: target.namespace,
        scope: target.scope,
        step: target.step,
        jobType: target.jobType,
        workflowId: info.workflowExecution?.workflowId,
        runId: info.workflowExecution?.runId,
        activityId: info.activityId,
        activityType: info.activityType,
        attempt: info.attempt,
        ...extra,
      });
    },
    acquireLatency(ms) {
      metrics.acquireLatency.record(ms);
    },
    waitTime(ms) {
      metrics.waitTime.record(ms);
    },
  };
}
