import type { Context } from '@temporalio/activity';
import type { MetricCounter, MetricHistogram, MetricMeter } from '@temporalio/common';
import type { Decision, DispatchLog } from '../core/dispatch-log';
import type { DispatchTarget } from '../core/target';

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

/**
 * The observer of one guarded call. Its instruments come from this activity's own `metricMeter`,
 * which carries this activity's tags, those that activity interceptors add included (through
 * `getMetricTags`): instruments kept from another activity would report that activity's tags. Each
 * is made on first use, as the SDK's own activity metrics are.
 */
export function observe(ctx: Context, target: DispatchTarget, log: DispatchLog | undefined): Observer {
  const { info } = ctx;
  let meter: MetricMeter | undefined;
  const tagged = () => (meter ??= ctx.metricMeter.withTags({ activity_type: info.activityType, step: target.step, job_type: target.jobType }));
  let decisions: MetricCounter | undefined;
  let acquireLatency: MetricHistogram | undefined;
  let waitTime: MetricHistogram | undefined;
  return {
    decision(decision, extra = {}) {
      (decisions ??= tagged().createCounter(METRICS.decisions, '1', 'fire-once guard decisions, by decision')).add(1, { decision });
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
      (acquireLatency ??= tagged().createHistogram(METRICS.acquireLatency, 'float', 'ms', 'one acquire round trip')).record(ms);
    },
    waitTime(ms) {
      (waitTime ??= tagged().createHistogram(METRICS.waitTime, 'float', 'ms', 'time spent waiting for an in-flight dispatch')).record(ms);
    },
  };
}
