import { ARTIFACT_CACHE_DEFAULTS, type ArtifactCacheOptions } from '../core/artifact-cache';
import { FireOnceConfigError } from '../core/errors';
import { GUARD_DEFAULTS, checkKnownKeys, describe, checkBoolean, checkDuration, resolveGuardOptions, type FireOnceGuardOptions, type ResolvedGuardOptions } from '../core/options';
import { LOCK_MODES, MAX_LEASE_MS, POLICIES, checkOneOf, type InFlightPolicy, type LockMode } from './activity-options';

/**
 * Options of {@link FireOncePlugin}: the guard's options plus the worker-wide in-flight policy.
 */
export interface FireOncePluginOptions extends FireOnceGuardOptions {
  /**
   * What a guarded activity does while another invocation holds the lock, unless the activity
   * sets its own.
   * @defaultValue `'wait'`
   */
  readonly onInFlight?: InFlightPolicy;
  /**
   * With `'wait'`: how often a waiter re-checks for the artifact or a released lock.
   * @defaultValue `250`
   */
  readonly pollIntervalMs?: number;
  /**
   * How the lock lives while an activity runs: `'lease'` (renewed) or `'fixed'` (`lockTtlMs`).
   * @defaultValue `'lease'`
   */
  readonly lockMode?: LockMode;
  /**
   * The lease in `'lease'` mode: renewed every third of it while the activity runs, and about the
   * longest that retries stay blocked after a worker crash.
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
   * The longest time after a first invocation that later ones can still arrive (e.g. how long a
   * user can resume a session). Only used to warn when `artifactTtlMs` is shorter.
   * @defaultValue none
   */
  readonly resumeWindowMs?: number;
  /**
   * Append every decision to the dispatch log stream `<keyPrefix>:log`, which
   * `npx fire-once report` reads.
   * @defaultValue `true`
   */
  readonly dispatchLog?: boolean;
  /**
   * Approximate cap on the dispatch log's length (`XADD MAXLEN ~`).
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
export type ResolvedPluginOptions = ResolvedGuardOptions &
  Required<
    Pick<FireOncePluginOptions, 'onInFlight' | 'pollIntervalMs' | 'lockMode' | 'leaseMs' | 'maxArtifactBytes' | 'dispatchLog' | 'dispatchLogMaxLen' | 'allowEvictingRedis'>
  > &
  Pick<FireOncePluginOptions, 'resumeWindowMs'> & { readonly localCache: Required<ArtifactCacheOptions> | false };

/**
 * Every default of the plugin, frozen.
 *
 * @example
 * ```ts
 * import { FIRE_ONCE_DEFAULTS } from 'temporal-fire-once';
 * console.log(FIRE_ONCE_DEFAULTS.lockTtlMs); // 900000
 * ```
 */
export const FIRE_ONCE_DEFAULTS = Object.freeze({
  ...GUARD_DEFAULTS,
  onInFlight: 'wait',
  pollIntervalMs: 250,
  lockMode: 'lease',
  leaseMs: 30_000,
  maxArtifactBytes: 1024 * 1024,
  dispatchLog: true,
  dispatchLogMaxLen: 100_000,
  allowEvictingRedis: false,
} as const);

const PLUGIN_KEYS = [
  'onInFlight',
  'pollIntervalMs',
  'lockMode',
  'leaseMs',
  'maxArtifactBytes',
  'resumeWindowMs',
  'dispatchLog',
  'dispatchLogMaxLen',
  'localCache',
  'allowEvictingRedis',
];

/** Check every plugin option and fill in defaults; throws `FireOnceConfigError` naming the field. */
export function resolvePluginOptions(options: FireOncePluginOptions): ResolvedPluginOptions {
  const guard = resolveGuardOptions(options, PLUGIN_KEYS);
  const d = FIRE_ONCE_DEFAULTS;
  return {
    ...guard,
    onInFlight: checkOneOf('onInFlight', options.onInFlight ?? d.onInFlight, POLICIES),
    pollIntervalMs: checkDuration('pollIntervalMs', options.pollIntervalMs ?? d.pollIntervalMs, 60_000),
    lockMode: checkOneOf('lockMode', options.lockMode ?? d.lockMode, LOCK_MODES),
    leaseMs: checkDuration('leaseMs', options.leaseMs ?? d.leaseMs, MAX_LEASE_MS),
    maxArtifactBytes: checkDuration('maxArtifactBytes', options.maxArtifactBytes ?? d.maxArtifactBytes, 512 * 1024 * 1024),
    dispatchLog: checkBoolean('dispatchLog', options.dispatchLog ?? d.dispatchLog),
    dispatchLogMaxLen: checkDuration('dispatchLogMaxLen', options.dispatchLogMaxLen ?? d.dispatchLogMaxLen, 100_000_000),
    localCache: resolveCache(options.localCache),
    allowEvictingRedis: checkBoolean('allowEvictingRedis', options.allowEvictingRedis ?? d.allowEvictingRedis),
    ...(options.resumeWindowMs === undefined ? {} : { resumeWindowMs: checkDuration('resumeWindowMs', options.resumeWindowMs) }),
  };
}

function resolveCache(option: FireOncePluginOptions['localCache']): Required<ArtifactCacheOptions> | false {
  if (option === undefined || option === false) return false;
  if (option === true) return { ...ARTIFACT_CACHE_DEFAULTS };
  if (option === null || typeof option !== 'object') {
    throw new FireOnceConfigError(`localCache must be a boolean or { maxEntries, maxBytes, maxAgeMs } (got ${describe(option)})`);
  }
  checkKnownKeys('localCache', option, ['maxEntries', 'maxBytes', 'maxAgeMs']);
  const d = ARTIFACT_CACHE_DEFAULTS;
  return {
    maxEntries: checkDuration('localCache.maxEntries', option.maxEntries ?? d.maxEntries, 10_000_000),
    maxBytes: checkDuration('localCache.maxBytes', option.maxBytes ?? d.maxBytes, 16 * 1024 * 1024 * 1024),
    maxAgeMs: checkDuration('localCache.maxAgeMs', option.maxAgeMs ?? d.maxAgeMs),
  };
}

/**
 * The seed's second failure mode: an artifact that expires before later invocations stop
 * arriving makes them redo the work. Returns one warning per TTL that outlives `artifactTtlMs`.
 */
export function ttlWarnings(options: ResolvedPluginOptions): string[] {
  const warnings: string[] = [];
  const lockTtl = options.lockMode === 'lease' ? options.leaseMs : options.lockTtlMs;
  const lockField = options.lockMode === 'lease' ? 'leaseMs' : 'lockTtlMs';
  if (options.artifactTtlMs < lockTtl) {
    warnings.push(`artifactTtlMs (${options.artifactTtlMs}) is shorter than ${lockField} (${lockTtl}): artifacts can expire while their lock still stands, and later invocations then redo the work`);
  }
  if (options.resumeWindowMs !== undefined && options.artifactTtlMs < options.resumeWindowMs) {
    warnings.push(`artifactTtlMs (${options.artifactTtlMs}) is shorter than resumeWindowMs (${options.resumeWindowMs}): invocations resumed late will find no artifact and redo the work`);
  }
  return warnings;
}
