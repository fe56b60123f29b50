import { defaultPayloadConverter, type PayloadCodec, type PayloadConverter } from '@temporalio/common';
import type { ActivityInboundCallsInterceptor, ActivityInterceptorsFactory } from '@temporalio/worker';
import type { ArtifactCache } from '../core/artifact-cache';
import type { DispatchLog } from '../core/dispatch-log';
import { FireOnceConfigError, FireOnceError, FireOnceWorkerShutdown, describe } from '../core/errors';
import type { FireOnceGuard } from '../core/guard';
import { checkKnownKeys } from '../core/options';
import { ParkingLot } from '../core/parking';
import type { WakeHub } from '../core/wake';
import { checkActivityOptions, type FireOnceOptions } from './activity-options';
import type { WorkerConverter } from './converter';
import { toApplicationFailure } from './failures';
import { fireOnceOptionsFor, isGuarded, markGuarded, markUnguarded } from './fire-once';
import type { InterceptorSetup } from './guarded-call';
import { ACTIVITY_DEFAULT_NAMES, resolveActivityDefaults, type ActivityDefaultOptions } from './options';
import { ParkedWatch } from './parked-watch';
import { runGuarded } from './run-guarded';

/** What the activity interceptor needs: the guard, the worker-wide defaults, and which activities to guard. */
export interface FireOnceInterceptorConfig extends ActivityDefaultOptions {
  readonly guard: FireOnceGuard;
  /**
   * Guarded activity types and their options; every other activity passes straight through. A
   * guarded `default` activity is guarded for the types the worker has no function of only when
   * the map comes from `fireOnceActivityMap`, which knows them.
   */
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
  /**
   * Aborted when the worker begins to shut down: a local activity waiting in its slot then hands
   * its wait to its workflow's next worker, so that this one can stop (the SDK never cancels a
   * local activity at shutdown). The plugin aborts its own; wired by hand, abort it where you call
   * `worker.shutdown()`.
   * @defaultValue none: such a wait goes on until the holder's result or the attempt's start-to-close
   */
  readonly workerStopping?: AbortSignal;
}

const WHERE = 'createFireOnceActivityInterceptor';
const CONFIG_KEYS = [
  'guard',
  'activities',
  'payloadConverter',
  'payloadCodecs',
  'wake',
  'dispatchLog',
  'cache',
  'parkedWatch',
  'workerStopping',
  ...ACTIVITY_DEFAULT_NAMES,
];

/** Every factory {@link createFireOnceActivityInterceptor} made: a worker takes one. */
const fireOnceFactories = new WeakSet<ActivityInterceptorsFactory>();

/** Whether `factory` is a fire-once activity interceptor (the plugin's or one wired by hand). */
export function isFireOnceInterceptor(factory: ActivityInterceptorsFactory): boolean {
  return fireOnceFactories.has(factory);
}

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
  checkParts(config);
  const defaults = resolveActivityDefaults(config, WHERE);
  const parking = new ParkingLot(config.guard);
  let activities: ReadonlyMap<string, FireOnceOptions> = config.activities;
  let setup: InterceptorSetup = {
    guard: config.guard,
    defaults,
    payloadConverter: config.payloadConverter ?? defaultPayloadConverter,
    payloadCodecs: config.payloadCodecs ?? [],
    wake: config.wake,
    dispatchLog: config.dispatchLog,
    cache: config.cache,
    parking,
    parkedWatch: config.parkedWatch ?? new ParkedWatch(parking, defaults.pollIntervalMs),
    workerStopping: config.workerStopping,
  };
  const factory: ActivityInterceptorsFactory = (ctx) => {
    const options = fireOnceOptionsFor(activities, ctx.info.activityType);
    if (options === undefined) {
      markUnguarded(ctx, activities); // so that a fire-once function called in it says why it is refused
      return {};
    }
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
          if (!(err instanceof FireOnceError)) throw err;
          // The hand-off's failure names the attempt it ended, which its workflow schedules again (common/hand-off.ts).
          const { activityType, attempt } = ctx.info;
          throw toApplicationFailure(err, err instanceof FireOnceWorkerShutdown ? { activityType, attempt } : { activityType });
        });
      },
    };
    return { inbound };
  };
  fireOnceFactories.add(factory);
  workerSetters.set(factory, (worker) => {
    if (worker.activities !== undefined) {
      // Those marked when the worker was configured stay guarded if a later plugin wrapped them
      // (the wrappers carry no mark), beside the ones later plugins added.
      for (const [name, options] of config.activities) if (!worker.activities.has(name)) worker.activities.set(name, options);
      activities = worker.activities;
    }
    setup = { ...setup, payloadConverter: worker.converter.payloadConverter, payloadCodecs: worker.converter.payloadCodecs };
  });
  return factory;
}

/** What a worker runs with, known only once it runs: its activities and its converter. */
export interface RunningWorker {
  /**
   * The guarded ones among them (`fireOnceActivityMap`), to which those of the map the interceptor
   * was made with are added; `undefined` keeps that map alone.
   */
  readonly activities: Map<string, FireOnceOptions> | undefined;
  readonly converter: WorkerConverter;
}

/** How each factory's activity map, payload converter and codecs are replaced by those of the worker that runs it. */
const workerSetters = new WeakMap<ActivityInterceptorsFactory, (worker: RunningWorker) => void>();

/**
 * Give the fire-once interceptor among a worker's `factories` the guarded activities and the
 * payload converter and codecs the worker runs with. The plugin makes its interceptor in
 * `configureWorker`, before the plugins listed after it may add activities or set the worker's
 * `dataConverter`: those are known only once the worker runs, and every guarded activity must be
 * guarded, and every result stored and returned, through exactly those.
 */
export function useRunningWorker(factories: readonly ActivityInterceptorsFactory[], worker: RunningWorker): void {
  for (const factory of factories) workerSetters.get(factory)?.(worker);
}

/** What each part the interceptor is handed must be, and a method that shows it is one. */
const PARTS = [
  ['wake', 'WakeHub', 'join'],
  ['dispatchLog', 'DispatchLog', 'record'],
  ['cache', 'ArtifactCache', 'get'],
  ['parkedWatch', 'ParkedWatch', 'watch'],
  ['workerStopping', 'AbortSignal', 'addEventListener'],
] as const;

/**
 * Refuse a part that is not one (a plugin option copied over: `dispatchLog: true`), which would
 * otherwise fail every guarded call with an untyped `TypeError` that Temporal retries.
 */
function checkParts(config: FireOnceInterceptorConfig): void {
  for (const [name, kind, method] of PARTS) {
    const part = config[name] as Record<string, unknown> | undefined;
    if (part !== undefined && typeof part?.[method] !== 'function') {
      const copied = typeof part === 'boolean' && name === 'dispatchLog' ? "; the plugin's dispatchLog: true has no hand-wired counterpart" : '';
      throw new FireOnceConfigError(`${WHERE}: ${name} must be ${/^[AEIOU]/.test(kind) ? 'an' : 'a'} ${kind} (got ${describe(part)})${copied}`);
    }
  }
}
