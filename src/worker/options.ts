import { ARTIFACT_CACHE_DEFAULTS, ARTIFACT_CACHE_OPTIONS, type ArtifactCacheOptions } from '../core/artifact-cache';
import { checkLogMaxLen } from '../core/dispatch-log';
import { FireOnceConfigError, describe } from '../core/errors';
import { encodeId } from '../core/keys';
import {
  GUARD_OPTIONS,
  MAX_DURATION_MS,
  checkKnownKeys,
  checkRedisOptions,
  defaultsOf,
  duration,
  flag,
  oneOf,
  optional,
  positiveInteger,
  resolveSpecs,
  type FireOnceGuardOptions,
  type OptionSpec,
  type Resolved,
  type ResolvedGuardOptions,
} from '../core/options';

/**
 * What a guarded activity does when another invocation holds the lock:
 * - `'park'`: register the activity's task token on the lock and complete asynchronously, holding
 *   no worker slot: the holder's commit completes it with the result, a release on failure fails
 *   it retryably at once so that one waiter acquires (docs/parked-waiters.md). Local activities,
 *   an activity on its last attempt, and workers with `keyNamespace` wait in their slot instead,
 *   as with `'wait'`.
 * - `'wait'`: wait in the worker slot for the artifact and return it; compete again if the holder fails.
 * - `'fail'`: throw the retryable `FireOnceInFlight`, with `nextRetryDelay` from the lock's TTL.
 * - `'skip'`: resolve `undefined` at once. Only for activities typed `Promise<void>`.
 */
export type InFlightPolicy = 'park' | 'wait' | 'fail' | 'skip';

/**
 * How the lock lives while the activity runs:
 * - `'lease'`: a short `leaseMs` TTL, renewed every third of it while the activity is alive, so a
 *   crashed worker blocks retries for at most about one lease.
 * - `'fixed'`: the seed's fixed `lockTtlMs`, never renewed: for dispatchers whose job outlives
 *   the activity by an unknown margin.
 */
export type LockMode = 'lease' | 'fixed';

/** The in-flight policies a worker-wide default may take: all but `'skip'`. */
export type DefaultInFlightPolicy = Exclude<InFlightPolicy, 'skip'>;

/** Accepted in-flight policies (per activity) and lock modes. */
export const POLICIES: readonly InFlightPolicy[] = ['park', 'wait', 'fail', 'skip'];
export const LOCK_MODES: readonly LockMode[] = ['lease', 'fixed'];
/** The longest lease: a lease is meant to be short; use `'fixed'` beyond this. */
export const MAX_LEASE_MS = 10 * 60 * 1000;
/**
 * The shortest lease. It is renewed every third of it: a shorter one runs out under a Redis round
 * trip or a pause of the worker (a GC, a busy event loop), and the job is dispatched again.
 */
export const MIN_LEASE_MS = 1_000;

const leaseDuration: OptionSpec<number>['check'] = (label, value) => {
  const ms = positiveInteger('ms', MAX_LEASE_MS)(label, value);
  if (ms < MIN_LEASE_MS) {
    throw new FireOnceConfigError(
      `${label} must be at least ${MIN_LEASE_MS} ms (got ${ms}): the lock is renewed every third of it, and a shorter lease runs out under a Redis round trip or a pause of the worker, so the job is dispatched again`,
    );
  }
  return ms;
};

/** A Temporal namespace name, checked as keys encode it. */
const namespaceName: OptionSpec<string>['check'] = (label, value) => {
  try {
    encodeId('namespace', value);
    return value as string;
  } catch (err) {
    throw new FireOnceConfigError(`${label}: ${(err as Error).message}`);
  }
};

function cacheBounds(label: string, value: unknown): Required<ArtifactCacheOptions> | false {
  if (value === false) return false;
  if (value === true) return { ...ARTIFACT_CACHE_DEFAULTS };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new FireOnceConfigError(`${label} must be a boolean or { maxEntries, maxBytes, maxAgeMs } (got ${describe(value)})`);
  }
  checkKnownKeys(label, value, ['maxEntries', 'maxBytes', 'maxAgeMs']);
  return resolveSpecs(ARTIFACT_CACHE_OPTIONS, value as Record<string, unknown>, `${label}.`);
}

/**
 * The worker-wide defaults of guarded activities, each declared once with its default and unit:
 * the plugin and a hand-wired {@link createFireOnceActivityInterceptor} resolve them alike.
 */
export const ACTIVITY_DEFAULT_OPTIONS = {
  onInFlight: defaultPolicy(),
  pollIntervalMs: duration(250, 60_000),
  lockMode: oneOf(LOCK_MODES, 'lease'),
  leaseMs: { default: 30_000, check: leaseDuration },
  maxArtifactBytes: { default: 1024 * 1024, check: positiveInteger('bytes', 512 * 1024 * 1024) },
  keyNamespace: optional(namespaceName),
} as const;

/**
 * The worker-wide `onInFlight`. `'skip'` resolves `undefined`, which only activities typed
 * `Promise<void>` may return; worker-wide it would reach every guarded activity, unchecked, so it
 * is set per activity, where the types check it.
 */
function defaultPolicy(): OptionSpec<DefaultInFlightPolicy> {
  const policies = oneOf(
    POLICIES.filter((p): p is DefaultInFlightPolicy => p !== 'skip'),
    'park',
  );
  return {
    default: policies.default,
    check: (label, value) => {
      if (value === 'skip') {
        throw new FireOnceConfigError(
          `${label} 'skip' resolves undefined, which only activities returning Promise<void> may do: set it per activity, fireOnce(fn, { onInFlight: 'skip' })`,
        );
      }
      return policies.check(label, value);
    },
  };
}

/** The options only the plugin has: what it builds for the worker. */
const PLUGIN_ONLY_OPTIONS = {
  resumeWindowMs: optional(positiveInteger('ms', MAX_DURATION_MS)),
  dispatchLog: flag(true),
  dispatchLogMaxLen: { default: 100_000, check: checkLogMaxLen },
  localCache: { default: false as Required<ArtifactCacheOptions> | false, check: cacheBounds },
  allowEvictingRedis: flag(false),
} as const;

/** Worker-wide defaults of guarded activities, resolved. */
export type ActivityDefaults = Resolved<typeof ACTIVITY_DEFAULT_OPTIONS>;

/** The worker-wide defaults of guarded activities, as given to the plugin or the interceptor. */
export interface ActivityDefaultOptions {
  /**
   * What a guarded activity does while another invocation holds the lock, unless the activity
   * sets its own.
   * `'skip'` is per activity only: it resolves `undefined`, which the types allow only on
   * activities returning `Promise<void>`.
   * @defaultValue `'park'`
   */
  readonly onInFlight?: DefaultInFlightPolicy;
  /**
   * With `'wait'`: how often, in ms, a waiter re-checks for the artifact or a released lock when
   * no wake-up reaches it. With `'park'`: how often a worker checks the locks its parked waiters
   * wait on, to fail them if the holder died (or complete them when an external artifact appears).
   * @defaultValue `250`
   */
  readonly pollIntervalMs?: number;
  /**
   * How the lock lives while an activity runs: `'lease'` (renewed) or `'fixed'` (`lockTtlMs`).
   * @defaultValue `'lease'`
   */
  readonly lockMode?: LockMode;
  /**
   * The lease in `'lease'` mode, in ms: renewed every third of it while the activity runs, and
   * about the longest that retries stay blocked after a worker crash.
   * @defaultValue `30_000`
   */
  readonly leaseMs?: number;
  /**
   * The largest artifact stored, in bytes after the payload codec. A larger result still reaches
   * the workflow; it is not stored (logged as `FireOnceArtifactTooLarge`) and the lock is held
   * for `lockTtlMs` instead.
   * @defaultValue `1_048_576` (1 MiB)
   */
  readonly maxArtifactBytes?: number;
  /**
   * File every guarded activity's keys under this namespace instead of the activity's own
   * Temporal namespace. Namespaces are isolation boundaries: by default two namespaces never
   * share a lock or a result. Set the same value on the workers of several namespaces only to
   * share them on purpose.
   * @defaultValue the activity's Temporal namespace
   */
  readonly keyNamespace?: string;
}

/**
 * Options of {@link FireOncePlugin}: the guard's options, the worker-wide defaults of guarded
 * activities, and what the plugin builds for the worker.
 */
export interface FireOncePluginOptions extends Omit<FireOnceGuardOptions, 'namespace'>, ActivityDefaultOptions {
  /**
   * The longest time, in ms, after a first invocation that later ones can still arrive (e.g. how
   * long a user can resume a session). Only used to warn when `artifactTtlMs` is shorter.
   * @defaultValue none
   */
  readonly resumeWindowMs?: number;
  /**
   * Append every decision to the namespace's dispatch log stream, which `npx fire-once report`
   * reads.
   * @defaultValue `true`
   */
  readonly dispatchLog?: boolean;
  /**
   * Approximate cap on the dispatch log's length, in entries (`XADD MAXLEN ~`).
   * @defaultValue `100_000`
   */
  readonly dispatchLogMaxLen?: number;
  /**
   * An in-worker LRU of committed artifacts, so that hot repeats cost no Redis round trip:
   * `true` for the defaults, or its bounds. Invalidations through `plugin.invalidate()` (or the
   * CLI) reach every worker's cache by pub/sub.
   * @defaultValue `false`
   */
  readonly localCache?: boolean | ArtifactCacheOptions;
  /**
   * Start even though Redis can evict the guard's keys: a `maxmemory-policy` other than
   * `noeviction` (every guard key has a TTL, so `volatile-*` policies evict them too), or one that
   * cannot be read. Without it a worker refuses to start with `FireOnceConfigError`; with it the
   * risk is logged once at WARN. An evicted lock or artifact lets a job be dispatched again.
   * @defaultValue `false`
   */
  readonly allowEvictingRedis?: boolean;
}

/** Plugin options with every default filled in. */
export type ResolvedPluginOptions = Omit<ResolvedGuardOptions, 'namespace'> & ActivityDefaults & Resolved<typeof PLUGIN_ONLY_OPTIONS>;

const PLUGIN_OPTIONS = { ...ACTIVITY_DEFAULT_OPTIONS, ...PLUGIN_ONLY_OPTIONS };
// The plugin files keys under each activity's Temporal namespace (or `keyNamespace`), so the
// guard's own `namespace` option is not one of its options.
const { namespace: _namespace, ...PLUGIN_GUARD_OPTIONS } = GUARD_OPTIONS;

/**
 * Every default of the plugin, frozen.
 *
 * @example
 * ```ts
 * import { FIRE_ONCE_DEFAULTS } from 'temporal-fire-once';
 * console.log(FIRE_ONCE_DEFAULTS.lockTtlMs); // 900000
 * ```
 */
export const FIRE_ONCE_DEFAULTS = Object.freeze({ ...defaultsOf(PLUGIN_GUARD_OPTIONS), ...defaultsOf(PLUGIN_OPTIONS) });

/** Check every plugin option and fill in defaults; throws `FireOnceConfigError` naming the field. */
export function resolvePluginOptions(options: FireOncePluginOptions): ResolvedPluginOptions {
  checkRedisOptions(options);
  checkKnownKeys('temporal-fire-once', options, ['redis', ...Object.keys(PLUGIN_GUARD_OPTIONS), ...Object.keys(PLUGIN_OPTIONS)]);
  const given = options as unknown as Record<string, unknown>;
  return { redis: options.redis, ...resolveSpecs(PLUGIN_GUARD_OPTIONS, given), ...resolveSpecs(PLUGIN_OPTIONS, given) };
}

/**
 * The guard options among the plugin's, as given: every option of the guard's table reaches the
 * plugin's guard, so none is accepted by the plugin and then dropped.
 */
export function guardOptionsOf(options: FireOncePluginOptions): Omit<FireOnceGuardOptions, 'redis' | 'namespace'> {
  const given = options as unknown as Record<string, unknown>;
  return Object.fromEntries(Object.keys(PLUGIN_GUARD_OPTIONS).flatMap((name) => (given[name] === undefined ? [] : [[name, given[name]]])));
}

/** Check the worker-wide activity defaults given to a hand-wired interceptor. */
export function resolveActivityDefaults(options: ActivityDefaultOptions, where: string): ActivityDefaults {
  return resolveSpecs(ACTIVITY_DEFAULT_OPTIONS, options as Record<string, unknown>, `${where}: `);
}

/** The names {@link resolveActivityDefaults} reads. */
export const ACTIVITY_DEFAULT_NAMES: readonly string[] = Object.keys(ACTIVITY_DEFAULT_OPTIONS);

/**
 * The seed's second failure mode: an artifact that expires before later invocations stop
 * arriving makes them redo the work. Returns one warning per TTL that outlives `artifactTtlMs`.
 */
export function ttlWarnings(options: ResolvedPluginOptions): string[] {
  const warnings: string[] = [];
  const lockTtl = options.lockMode === 'lease' ? options.leaseMs : options.lockTtlMs;
  const lockField = options.lockMode === 'lease' ? 'leaseMs' : 'lockTtlMs';
  if (options.artifactTtlMs < lockTtl) {
    warnings.push(
      `artifactTtlMs (${options.artifactTtlMs}) is shorter than ${lockField} (${lockTtl}): artifacts can expire while their lock still stands, and later invocations then redo the work`,
    );
  }
  if (options.lockMode === 'lease' && (options.leaseMs * 2) / 3 < options.storeTimeoutMs) {
    warnings.push(
      `leaseMs (${options.leaseMs}) leaves a renewal sent at a third of it less than storeTimeoutMs (${options.storeTimeoutMs}) to land before the lock expires: a slow Redis can let the lock lapse mid-job; make leaseMs at least 1.5 times storeTimeoutMs`,
    );
  }
  if (options.lockMode === 'fixed' && options.lockTtlMs < options.storeTimeoutMs) {
    warnings.push(
      `lockTtlMs (${options.lockTtlMs}) in 'fixed' mode is shorter than storeTimeoutMs (${options.storeTimeoutMs}): the lock can expire before the job has even started, and the next invocation then dispatches it again; make lockTtlMs longer than the longest job`,
    );
  }
  if (options.resumeWindowMs !== undefined && options.artifactTtlMs < options.resumeWindowMs) {
    warnings.push(
      `artifactTtlMs (${options.artifactTtlMs}) is shorter than resumeWindowMs (${options.resumeWindowMs}): invocations resumed late will find no artifact and redo the work`,
    );
  }
  return warnings;
}
