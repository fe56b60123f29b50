import type { Context } from '@temporalio/activity';
import { defaultPayloadConverter, type Headers, type PayloadCodec, type PayloadConverter } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, ActivityInterceptorsFactory } from '@temporalio/worker';
import { SCOPE_HEADER, scopeFromHeader } from '../common/header';
import type { ArtifactCache } from '../core/artifact-cache';
import type { DispatchLog } from '../core/dispatch-log';
import { FireOnceConfigError, FireOnceError, FireOnceInFlight, FireOnceKeyConflict, FireOnceMissingScope } from '../core/errors';
import { type AcquireOutcome, type DispatchTarget, type FireOnceGuard } from '../core/guard';
import { encodeId } from '../core/keys';
import { checkKnownKeys } from '../core/options';
import { ParkingLot } from '../core/parking';
import { waitForTurn, type TurnOutcome } from '../core/wait';
import type { WakeHub } from '../core/wake';
import { checkActivityOptions, type FireOnceOptions } from './activity-options';
import { argsHash, notAPromise } from './args-hash';
import { decodeArtifact, resultOf } from './artifact';
import { dispatch } from './dispatch';
import { toApplicationFailure } from './failures';
import { isGuarded, markGuarded } from './fire-once';
import { observe, type Observer } from './observe';
import { ParkedWatch } from './parked-watch';
import { parkOrWait } from './park';
import { ACTIVITY_DEFAULT_NAMES, resolveActivityDefaults, type ActivityDefaultOptions, type ActivityDefaults } from './options';

/** What the activity interceptor needs: the guard, the worker-wide defaults, and which activities to guard. */
export interface FireOnceInterceptorConfig extends ActivityDefaultOptions {
  readonly guard: FireOnceGuard;
  /** Guarded activity types and their options; every other activity passes straight through. */
  readonly activities: ReadonlyMap<string, FireOnceOptions>;
  /** The worker's payload converter, used to store results. @defaultValue the SDK default */
  readonly payloadConverter?: PayloadConverter;
  /** The worker's payload codecs, applied to artifacts at rest. @defaultValue none */
  readonly payloadCodecs?: readonly PayloadCodec[];
  /** Wakes `'wait'`ers by pub/sub; without it they poll. @defaultValue none */
  readonly wake?: WakeHub;
  /** Where decisions are appended. @defaultValue none */
  readonly dispatchLog?: DispatchLog;
  /** In-worker cache of committed artifacts. @defaultValue none */
  readonly cache?: ArtifactCache;
  /**
   * Watches the waiters this worker parks (`'park'`); its owner closes it when the worker stops.
   * @defaultValue one of the interceptor's own, which stops ticking whenever nothing is parked
   */
  readonly parkedWatch?: ParkedWatch;
}

/** The interceptor's configuration once checked: every default filled in. */
export interface InterceptorSetup {
  readonly guard: FireOnceGuard;
  readonly defaults: ActivityDefaults;
  readonly payloadConverter: PayloadConverter;
  readonly payloadCodecs: readonly PayloadCodec[];
  readonly wake: WakeHub | undefined;
  readonly dispatchLog: DispatchLog | undefined;
  readonly cache: ArtifactCache | undefined;
  readonly parking: ParkingLot;
  readonly parkedWatch: ParkedWatch;
}

const WHERE = 'createFireOnceActivityInterceptor';
const CONFIG_KEYS = ['guard', 'activities', 'payloadConverter', 'payloadCodecs', 'wake', 'dispatchLog', 'cache', 'parkedWatch', ...ACTIVITY_DEFAULT_NAMES];

/**
 * The activity interceptor factory behind {@link FireOncePlugin}, for workers that wire
 * interceptors by hand. Guards the activity types listed in `activities`.
 *
 * @example
 * ```ts
 * import { FireOnceGuard, fireOnce } from 'temporal-fire-once';
 * import { createFireOnceActivityInterceptor, fireOnceActivityMap, workflowInterceptorModules } from 'temporal-fire-once/core';
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
  checkKnownKeys(WHERE, config, CONFIG_KEYS);
  if (typeof (config.guard as Partial<FireOnceGuard> | undefined)?.acquire !== 'function')
    throw new FireOnceConfigError(`${WHERE}: guard must be a FireOnceGuard`);
  if (!(config.activities instanceof Map)) throw new FireOnceConfigError(`${WHERE}: activities must be a Map (see fireOnceActivityMap)`);
  for (const [name, options] of config.activities) checkActivityOptions(options as FireOnceOptions<never>, `${WHERE}: activity ${JSON.stringify(name)}`);
  const defaults = resolveActivityDefaults(config, WHERE);
  const parking = new ParkingLot(config.guard);
  const setup: InterceptorSetup = {
    guard: config.guard,
    defaults,
    payloadConverter: config.payloadConverter ?? defaultPayloadConverter,
    payloadCodecs: config.payloadCodecs ?? [],
    wake: config.wake,
    dispatchLog: config.dispatchLog,
    cache: config.cache,
    parking,
    parkedWatch: config.parkedWatch ?? new ParkedWatch(parking, defaults.pollIntervalMs),
  };
  return (ctx) => {
    const options = config.activities.get(ctx.info.activityType);
    if (options === undefined) return {};
    const inbound: ActivityInboundCallsInterceptor = {
      execute: (input, next) => {
        if (isGuarded(ctx)) {
          // A second fire-once interceptor on this worker (the plugin's and one wired by hand, or
          // the plugin given twice) would find the first one's lock and wait every attempt out on
          // it. The first one gives its lock back on this failure.
          const twice = `activity ${JSON.stringify(ctx.info.activityType)} is guarded twice on this worker: give it the FireOncePlugin or a fire-once interceptor, once`;
          return Promise.reject(toApplicationFailure(new FireOnceConfigError(twice), { activityType: ctx.info.activityType }));
        }
        markGuarded(ctx);
        return runGuarded({ setup, options, ctx, input, next: () => next(input), startedMs: Date.now() }).catch((err: unknown) => {
          throw err instanceof FireOnceError ? toApplicationFailure(err, { activityType: ctx.info.activityType }) : err;
        });
      },
    };
    return { inbound };
  };
}

/**
 * `observeOnly`: log the call as `dispatched` and run it, never guarded. Measuring must never
 * fail a call, so one the guard would refuse (no scope, a bad ID, an option function that throws)
 * runs too, unlogged, with a WARN naming what the guard would say.
 */
function observeOnly(call: GuardedCall): Promise<unknown> {
  let target: DispatchTarget;
  try {
    target = resolveTarget(call);
  } catch (err) {
    if (!(err instanceof FireOnceError)) throw err;
    call.ctx.log.warn(`fire-once: observeOnly: the guard would refuse this call (${err.name}: ${err.message}); it runs, unlogged`, {
      activityType: call.ctx.info.activityType,
    });
    return call.next();
  }
  observe(call.ctx, target, call.setup.dispatchLog).decision('dispatched');
  return call.next();
}

/** One guarded call: everything the decision and the dispatch need. */
export interface GuardedCall {
  readonly setup: InterceptorSetup;
  readonly options: FireOnceOptions;
  readonly ctx: Context;
  readonly input: ActivityExecuteInput;
  readonly next: () => Promise<unknown>;
  /** When this attempt began on this worker: its start-to-close timeout runs from about then. */
  readonly startedMs: number;
}

async function runGuarded(call: GuardedCall): Promise<unknown> {
  const { setup, options, ctx } = call;
  if (options.observeOnly) return observeOnly(call);
  const target = resolveTarget(call);
  const observer = observe(ctx, target, setup.dispatchLog);
  const { guard, cache } = setup;
  const cacheable = cache !== undefined && target.externalArtifactKey === undefined;
  if (cacheable) {
    const cached = cache.get(guard.artifactKey(target), target.argsHash ?? '');
    if (cached !== undefined) return fastForward(call, target, observer, { artifact: cached, artifactKey: guard.artifactKey(target) });
  }
  const lockMode = options.lockMode ?? setup.defaults.lockMode;
  const lockTtlMs = lockMode === 'lease' ? (options.leaseMs ?? setup.defaults.leaseMs) : (options.lockTtlMs ?? guard.options.lockTtlMs);
  const acquireOptions = { lockTtlMs, readTtl: cacheable };
  const mark = cache?.mark();
  const outcome = await noteConflicts(observer, async () => {
    const started = performance.now();
    const first = await guard.acquire(target, acquireOptions);
    observer.acquireLatency(performance.now() - started);
    return first.kind === 'held' ? onHeld(call, target, observer, first, acquireOptions) : first;
  });
  if (outcome === undefined) return undefined; // skipped

  if (outcome.kind === 'acquired') return dispatch(call, observer, outcome.lease, lockMode, lockTtlMs);
  if (cacheable && outcome.ttlMs !== undefined) cache.set(outcome.artifactKey, outcome.artifact, target.argsHash ?? '', outcome.ttlMs, mark);
  return fastForward(call, target, observer, outcome);
}

/** Return the stored result (`'result'` mode) or `undefined` (external artifact) without running. */
async function fastForward(
  { setup, ctx }: GuardedCall,
  target: DispatchTarget,
  observer: Observer,
  found: { readonly artifact: Buffer; readonly artifactKey: string },
): Promise<unknown> {
  observer.decision('fast-forwarded');
  ctx.log.debug('fire-once: artifact found, fast-forward', { key: found.artifactKey, scope: target.scope, jobType: target.jobType });
  if (target.externalArtifactKey !== undefined) return undefined;
  const context = { key: found.artifactKey, scope: target.scope, jobType: target.jobType };
  return resultOf(await decodeArtifact(found.artifact, setup.payloadCodecs, context), setup.payloadConverter);
}

/** The in-flight policy: skip (`undefined`), fail, park, or wait for the artifact or the lock. */
async function onHeld(
  call: GuardedCall,
  target: DispatchTarget,
  observer: Observer,
  held: Extract<AcquireOutcome, { kind: 'held' }>,
  acquireOptions: { readonly lockTtlMs: number },
): Promise<TurnOutcome | undefined> {
  const { setup, options, ctx } = call;
  const policy = options.onInFlight ?? setup.defaults.onInFlight;
  const context = { key: held.lockKey, scope: target.scope, step: target.step, jobType: target.jobType };
  if (policy === 'skip') {
    observer.decision('in-flight-skipped', { fencingToken: held.fencingToken });
    ctx.log.info('fire-once: in flight elsewhere, skipped', context);
    return undefined;
  }
  if (policy === 'fail') {
    observer.decision('in-flight-failed', { fencingToken: held.fencingToken });
    throw new FireOnceInFlight(`step ${JSON.stringify(target.step)} is in flight in scope ${JSON.stringify(target.scope)}`, failRetryDelay(held), context);
  }
  const waitInSlot = () => waitInSlotFor(call, target, observer, held, acquireOptions);
  return policy === 'park' ? parkOrWait(call, target, observer, acquireOptions, waitInSlot) : waitInSlot();
}

/**
 * The retry delay of `'fail'`: half the time the holder has run so far (its fencing token is its
 * start on the Redis clock), at most the lock's TTL left. A waiter that comes back soon after a
 * short job's result exists, and backs off as a long job runs on, with no fixed cap.
 */
export function failRetryDelay(held: { readonly ttlMs: number; readonly fencingToken: number }, now = Date.now()): number {
  const elapsedMs = Math.max(now - held.fencingToken / 1000, 0);
  return Math.min(Math.max(Math.round(elapsedMs / 2), MIN_FAIL_RETRY_DELAY_MS), Math.max(held.ttlMs, MIN_FAIL_RETRY_DELAY_MS));
}
const MIN_FAIL_RETRY_DELAY_MS = 100;

/** `'wait'`: hold the worker slot until the artifact exists or the lock is free. */
async function waitInSlotFor(
  call: GuardedCall,
  target: DispatchTarget,
  observer: Observer,
  held: Extract<AcquireOutcome, { kind: 'held' }>,
  acquireOptions: { readonly lockTtlMs: number },
): Promise<TurnOutcome> {
  const started = performance.now();
  try {
    const outcome = await waitForTurn(call.setup.guard, target, held, acquireOptions, waitOptions(call));
    observer.decision('in-flight-waited', { fencingToken: held.fencingToken });
    return outcome;
  } catch (err) {
    if (err instanceof FireOnceInFlight) observer.decision('in-flight-failed', { fencingToken: held.fencingToken });
    throw err;
  } finally {
    observer.waitTime(performance.now() - started);
  }
}

async function noteConflicts<T>(observer: Observer, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof FireOnceKeyConflict) observer.decision('conflict');
    throw err;
  }
}

function resolveTarget({ setup, options, ctx, input }: GuardedCall): DispatchTarget {
  const { activityType, workflowExecution, activityId, namespace } = ctx.info;
  const scope = options.scope !== undefined ? userOption('scope', activityType, () => options.scope!(input.args, ctx.info)) : scopeFromHeaders(input.headers);
  if (scope === undefined) {
    throw new FireOnceMissingScope(
      `activity ${JSON.stringify(activityType)} has no dispatch scope: call setDispatchScope() in the workflow, or give fireOnce a scope option; a workflow bundle built without the plugin's workflow interceptors (workflowInterceptorModules) carries no scope`,
      { activityType },
    );
  }
  const step = options.step ?? activityType;
  const jobType = options.jobType ?? step;
  const holder = `${workflowExecution?.workflowId ?? ''} ${workflowExecution?.runId ?? ''} ${activityId}`;
  const hash = userOption('conflictKey', activityType, () => argsHash(options, input.args, setup.payloadConverter));
  const base = { scope, step, jobType, namespace: setup.defaults.keyNamespace ?? namespace, holder, argsHash: hash };
  const artifact = options.artifact;
  if (artifact === undefined || artifact === 'result') return base;
  // The key is built from the scope: a bad one is refused as the guard would refuse it
  // (FireOnceInvalidId), before the user's function sees it.
  encodeId('scope', scope);
  const key = userOption('artifact.external', activityType, () => artifact.external({ scope, jobType, namespace: base.namespace }));
  return { ...base, externalArtifactKey: externalKey(setup.guard, key, base) };
}

/**
 * Run one of the option functions the user wrote. If it throws, the worker's configuration is at
 * fault, not the call: a non-retryable `FireOnceConfigError` naming the option, before anything
 * is locked, instead of an untyped error that Temporal would retry for ever.
 */
function userOption<T>(name: 'scope' | 'conflictKey' | 'artifact.external', activityType: string, fn: () => T): T {
  try {
    return notAPromise(fn());
  } catch (err) {
    const why = err instanceof FireOnceConfigError ? err.message : `threw: ${String(err)}`;
    throw new FireOnceConfigError(`the ${name} option of activity ${JSON.stringify(activityType)} ${why}`, { activityType }, { cause: err });
  }
}

/**
 * Check the key an `external` option built. Under the guard's prefix it must be in this scope's
 * slot and this call's namespace, and not a key the guard writes itself: anything else (another
 * scope's or namespace's key, a lock, a result artifact) would fast-forward on a job that is not
 * this call's. Keys outside the prefix are the user's own.
 */
function externalKey(guard: FireOnceGuard, key: unknown, target: { scope: string; jobType: string; namespace: string }): string {
  const where = `the external artifact key of ${JSON.stringify(target.jobType)} in scope ${JSON.stringify(target.scope)}`;
  if (typeof key !== 'string' || key === '') throw new FireOnceConfigError(`${where} must be a non-empty string (got ${JSON.stringify(key)})`);
  if (!key.startsWith(`${guard.keys.prefix}:`)) return key;
  const keys = guard.keysFor(target.namespace);
  const kind = keys.parse(key)?.kind;
  if (!key.startsWith(`${keys.scopeBase(target.scope)}:`) || (kind !== undefined && kind !== 'external')) {
    throw new FireOnceConfigError(
      `${where} is ${JSON.stringify(key)}: under the guard's prefix it must be a key of this scope in namespace ${JSON.stringify(target.namespace)} that the guard does not write, such as ${JSON.stringify(keys.external(target.scope, target.jobType))} (guard.keysFor(namespace).external(scope, jobType))`,
    );
  }
  return key;
}

function scopeFromHeaders(headers: Headers): string | undefined {
  return scopeFromHeader(headers[SCOPE_HEADER]);
}

function waitOptions({ setup, ctx, startedMs }: GuardedCall) {
  const { info } = ctx;
  const heartbeatMs = info.heartbeatTimeoutMs;
  const pollIntervalMs = Math.min(setup.defaults.pollIntervalMs, heartbeatMs ? Math.max(Math.floor(heartbeatMs / 2), 1) : Infinity);
  const startToClose = info.startToCloseTimeoutMs;
  // Give up before Temporal times this attempt out, so the failure is ours and says why. The
  // timeout runs from the attempt's start, which the worker sees as `startedMs`: not from
  // `currentAttemptScheduledTimestampMs`, which for a local activity is its first attempt's
  // schedule (every retry would be past its deadline at once) and which counts queue time too.
  const margin = Math.min(1_000, Math.floor(startToClose * 0.2));
  // Nor past the schedule-to-close timeout, which runs from the first attempt's schedule over every
  // attempt: an activity Temporal has timed out must not go on to dispatch from its slot. One that
  // ends before this attempt began is no real timeout (Temporal starts no attempt past it): a
  // MockActivityEnvironment's defaults, or a clock far off the server's.
  const scheduleToCloseEnd = info.scheduledTimestampMs + info.scheduleToCloseTimeoutMs;
  const overall = info.scheduleToCloseTimeoutMs > 0 && scheduleToCloseEnd > startedMs ? scheduleToCloseEnd - margin : Infinity;
  return {
    pollIntervalMs,
    deadline: Math.min(startedMs + startToClose - margin, overall),
    signal: ctx.cancellationSignal,
    // Each heartbeat replaces the activity's details, which outlive the attempt: a waiter, which
    // runs none of the job, passes on those an earlier attempt recorded.
    onPoll: heartbeatMs ? () => ctx.heartbeat(info.heartbeatDetails) : undefined,
    wake: setup.wake,
  };
}
