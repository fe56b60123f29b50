import { CompleteAsyncError, type Context } from '@temporalio/activity';
import { RawValue, defaultPayloadConverter, type Headers, type PayloadConverter } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInterceptorsFactory, Next, ActivityInboundCallsInterceptor } from '@temporalio/worker';
import { SCOPE_HEADER } from '../common/header';
import { FireOnceError, FireOnceMissingScope, FireOnceUnstorableResult, FireOnceInFlight } from '../core/errors';
import { holderId, type DispatchTarget, type FireOnceGuard, type Lease } from '../core/guard';
import { waitForTurn, type TurnOutcome } from '../core/wait';
import type { FireOnceOptions, InFlightPolicy } from './activity-options';
import { bytesToPayload, payloadToBytes } from './artifact';
import { toApplicationFailure } from './failures';
import { markGuarded } from './fire-once';

/** What the activity interceptor needs: the guard, the policies, and which activities to guard. */
export interface FireOnceInterceptorConfig {
  readonly guard: FireOnceGuard;
  /** Guarded activity types and their options; every other activity passes straight through. */
  readonly activities: ReadonlyMap<string, FireOnceOptions>;
  /** In-flight policy of activities that set none. @defaultValue `'wait'` */
  readonly onInFlight?: InFlightPolicy;
  /** Poll interval of `'wait'`. @defaultValue `250` */
  readonly pollIntervalMs?: number;
  /** The worker's payload converter, used to store results. @defaultValue the SDK default */
  readonly payloadConverter?: PayloadConverter;
}

/**
 * The activity interceptor factory behind {@link FireOncePlugin}, for workers that wire
 * interceptors by hand. Guards the activity types listed in `activities`.
 *
 * @example
 * ```ts
 * import {
 *   FireOnceGuard, createFireOnceActivityInterceptor, fireOnce, fireOnceActivityMap, workflowInterceptorModules,
 * } from 'temporal-fire-once';
 * import { Redis } from 'ioredis';
 *
 * const activities = { summarise: fireOnce(async (id: string) => `summary of ${id}`, { jobType: 'summary' }) };
 * const factory = createFireOnceActivityInterceptor({
 *   guard: new FireOnceGuard({ redis: new Redis({ lazyConnect: true }) }),
 *   activities: fireOnceActivityMap(activities),
 * });
 * const interceptors = { activity: [factory], workflowModules: [...workflowInterceptorModules] };
 * // Worker.create({ activities, interceptors, ... }), and bundle with the same workflowModules.
 * void interceptors;
 * ```
 */
export function createFireOnceActivityInterceptor(config: FireOnceInterceptorConfig): ActivityInterceptorsFactory {
  return (ctx) => {
    const options = config.activities.get(ctx.info.activityType);
    if (options === undefined) return {};
    const inbound: ActivityInboundCallsInterceptor = {
      execute: (input, next) => {
        markGuarded(ctx);
        return runGuarded(config, options, ctx, input, next).catch((err: unknown) => {
          throw err instanceof FireOnceError ? toApplicationFailure(err) : err;
        });
      },
    };
    return { inbound };
  };
}

type NextExecute = Next<ActivityInboundCallsInterceptor, 'execute'>;

async function runGuarded(
  config: FireOnceInterceptorConfig,
  options: FireOnceOptions,
  ctx: Context,
  input: ActivityExecuteInput,
  next: NextExecute,
): Promise<unknown> {
  const target = resolveTarget(options, ctx, input);
  const lockTtlMs = options.lockTtlMs;
  const acquireOptions = lockTtlMs === undefined ? {} : { lockTtlMs };
  const first = await config.guard.acquire(target, acquireOptions);
  let outcome: TurnOutcome;
  if (first.kind === 'held') {
    const policy = options.onInFlight ?? config.onInFlight ?? 'wait';
    const context = { key: first.lockKey, scope: target.scope, step: target.step, jobType: target.jobType };
    if (policy === 'skip') {
      ctx.log.info('fire-once: in flight elsewhere, skipped', context);
      return undefined;
    }
    if (policy === 'fail') {
      throw new FireOnceInFlight(`step ${JSON.stringify(target.step)} is in flight in scope ${JSON.stringify(target.scope)}`, first.ttlMs, context);
    }
    outcome = await waitForTurn(config.guard, target, first, acquireOptions, waitOptions(config, ctx));
  } else {
    outcome = first;
  }

  if (outcome.kind === 'fast-forward') {
    ctx.log.debug('fire-once: artifact found, fast-forward', { key: outcome.artifactKey, scope: target.scope, jobType: target.jobType });
    if (target.externalArtifactKey !== undefined) return undefined;
    return RawValue.fromPayload(bytesToPayload(outcome.artifact, { key: outcome.artifactKey, scope: target.scope, jobType: target.jobType }));
  }
  return dispatch(config, options, ctx, input, next, outcome.lease);
}

async function dispatch(
  config: FireOnceInterceptorConfig,
  options: FireOnceOptions,
  ctx: Context,
  input: ActivityExecuteInput,
  next: NextExecute,
  lease: Lease,
): Promise<unknown> {
  const logContext = { key: lease.lockKey, scope: lease.target.scope, step: lease.target.step, holder: holderId(lease.token) };
  let result: unknown;
  try {
    result = await next(input);
  } catch (err) {
    // Completing asynchronously is neither success nor failure: the job is still running, so
    // the lock stays until its TTL (or until the job's artifact appears, in external mode).
    if (!(err instanceof CompleteAsyncError)) await releaseAfterFailure(config.guard, ctx, lease, logContext);
    throw err;
  }
  if (lease.target.externalArtifactKey !== undefined) return result;

  const converter = config.payloadConverter ?? defaultPayloadConverter;
  let payload;
  try {
    payload = converter.toPayload(result);
  } catch (err) {
    throw new FireOnceUnstorableResult(
      `the result of ${ctx.info.activityType} cannot be serialised by the payload converter (${(err as Error).message}); the lock is kept until its TTL`,
      { ...logContext, jobType: lease.target.jobType, activityType: ctx.info.activityType },
      { cause: err },
    );
  }
  try {
    const stillOurs = await config.guard.commit(lease, payloadToBytes(payload), options.artifactTtlMs === undefined ? {} : { artifactTtlMs: options.artifactTtlMs });
    if (!stillOurs) ctx.log.warn('fire-once: artifact written after the lock had expired; raise lockTtlMs above the job time', logContext);
  } catch (err) {
    // The job ran and its result is in hand: deliver it. Later invocations are still held off
    // by the lock until its TTL; after that, with no artifact, they would dispatch again.
    ctx.log.error('fire-once: could not store the artifact; result delivered, lock kept until TTL', { ...logContext, error: (err as Error).message });
  }
  return RawValue.fromPayload(payload);
}

async function releaseAfterFailure(guard: FireOnceGuard, ctx: Context, lease: Lease, logContext: Record<string, string>): Promise<void> {
  try {
    const released = await guard.release(lease);
    if (released) ctx.log.info('fire-once: dispatch failed, lock released', logContext);
    else ctx.log.warn('fire-once: dispatch failed, lock release refused (expired or held by another holder)', logContext);
  } catch (err) {
    ctx.log.error('fire-once: dispatch failed and releasing the lock failed too; it expires by its TTL', { ...logContext, error: (err as Error).message });
  }
}

function resolveTarget(options: FireOnceOptions, ctx: Context, input: ActivityExecuteInput): DispatchTarget {
  const activityType = ctx.info.activityType;
  const scope = options.scope !== undefined ? options.scope(input.args, ctx.info) : scopeFromHeaders(input.headers);
  if (scope === undefined) {
    throw new FireOnceMissingScope(
      `activity ${JSON.stringify(activityType)} has no dispatch scope: call setDispatchScope() in the workflow, or give fireOnce a scope option`,
      { activityType },
    );
  }
  const step = options.step ?? activityType;
  const jobType = options.jobType ?? step;
  const artifact = options.artifact;
  if (artifact === undefined || artifact === 'result') return { scope, step, jobType };
  return { scope, step, jobType, externalArtifactKey: artifact.external({ scope, jobType }) };
}

function scopeFromHeaders(headers: Headers): string | undefined {
  const payload = headers[SCOPE_HEADER];
  if (payload === undefined) return undefined;
  const value = defaultPayloadConverter.fromPayload<unknown>(payload);
  return typeof value === 'string' ? value : undefined;
}

function waitOptions(config: FireOnceInterceptorConfig, ctx: Context) {
  const { info } = ctx;
  const heartbeatMs = info.heartbeatTimeoutMs;
  const pollIntervalMs = Math.min(config.pollIntervalMs ?? 250, heartbeatMs ? Math.max(Math.floor(heartbeatMs / 2), 1) : Infinity);
  const startToClose = info.startToCloseTimeoutMs;
  // Give up before Temporal times this attempt out, so the failure is ours and says why.
  const margin = Math.min(1_000, Math.floor(startToClose * 0.2));
  const deadline = info.currentAttemptScheduledTimestampMs + startToClose - margin;
  return {
    pollIntervalMs,
    deadline,
    signal: ctx.cancellationSignal,
    onPoll: heartbeatMs ? () => ctx.heartbeat() : undefined,
  };
}
