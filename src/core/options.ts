import { FireOnceConfigError, describe } from './errors';
import { DEFAULT_NAMESPACE, checkKeyPrefix, encodeId } from './keys';
import type { RedisClient } from './scripts';

/** The longest TTL or timeout the options accept: 365 days. Anything longer is a typo. */
export const MAX_DURATION_MS = 365 * 24 * 60 * 60 * 1000;

/** The longest a Node.js timer waits (about 24.8 days): a longer `setTimeout` fires at once (TimeoutOverflowWarning), as NaN does. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One option, declared once: its default and the check that turns a given value into a resolved
 * one or throws {@link FireOnceConfigError} naming the option (`label`) and its unit.
 */
export interface OptionSpec<T> {
  readonly default: T;
  readonly check: (label: string, value: unknown) => T;
  /**
   * The option as a caller gives it for `default`, where the two differ in shape
   * (`replicaSync: 'auto'`, resolved as `{ replicas: 'auto', timeoutMs: 200 }`): what the exported
   * defaults hold, so that they read as the docs state them and, given back, resolve as the default.
   */
  readonly given?: unknown;
}

/** A table of options by name. */
export type OptionSpecs = Readonly<Record<string, OptionSpec<unknown>>>;

/** The resolved values of a table of options. */
export type Resolved<S extends OptionSpecs> = { readonly [K in keyof S]: S[K] extends OptionSpec<infer T> ? T : never };

/** A whole number from 1 to `max`, in `unit` (ms, bytes, entries). */
export function positiveInteger(unit: string, max: number): OptionSpec<number>['check'] {
  return (label, value) => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
      throw new FireOnceConfigError(`${label} must be a positive integer (got ${describe(value)})`);
    }
    if (value > max) throw new FireOnceConfigError(`${label} must be at most ${max} ${unit} (got ${value})`);
    return value;
  };
}

/** A duration in milliseconds, from 1 to `max`. */
export function duration(defaultMs: number, max = MAX_DURATION_MS): OptionSpec<number> {
  return { default: defaultMs, check: positiveInteger('ms', max) };
}

/** A boolean. */
export function flag(defaultValue: boolean): OptionSpec<boolean> {
  return {
    default: defaultValue,
    check: (label, value) => {
      if (typeof value !== 'boolean') throw new FireOnceConfigError(`${label} must be a boolean (got ${describe(value)})`);
      return value;
    },
  };
}

/** One of a closed set of strings. */
export function oneOf<T extends string>(allowed: readonly T[], defaultValue: T): OptionSpec<T> {
  return {
    default: defaultValue,
    check: (label, value) => {
      if (!allowed.includes(value as T)) throw new FireOnceConfigError(`${label} must be one of ${allowed.join(', ')} (got ${describe(value)})`);
      return value as T;
    },
  };
}

/** An option with no default: `undefined` unless given. */
export function optional<T>(check: OptionSpec<T>['check']): OptionSpec<T | undefined> {
  return { default: undefined, check };
}

/** Throws {@link FireOnceConfigError} for any key of `options` not in `known`. */
export function checkKnownKeys(where: string, options: unknown, known: readonly string[]): asserts options is object {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new FireOnceConfigError(`${where}: options must be an object (got ${describe(options)})`);
  }
  const unknown = Object.keys(options).filter((key) => !known.includes(key));
  if (unknown.length > 0) {
    throw new FireOnceConfigError(`${where}: unknown option ${unknown.map((k) => JSON.stringify(k)).join(', ')}`);
  }
}

/**
 * Resolve `options` against `specs`: every given value checked (messages name `labelPrefix` +
 * the option), every absent one defaulted. Keys outside `specs` are not read.
 */
export function resolveSpecs<S extends OptionSpecs>(specs: S, options: Readonly<Record<string, unknown>>, labelPrefix = ''): Resolved<S> {
  const resolved: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(specs)) {
    const value = options[name];
    resolved[name] = value === undefined ? spec.default : spec.check(`${labelPrefix}${name}`, value);
  }
  return resolved as Resolved<S>;
}

/** The defaults of a table of options, as a caller gives them (`given`, where a spec has one). */
export type Defaults<S extends OptionSpecs> = {
  readonly [K in keyof S]: S[K] extends { readonly given: infer G } ? G : S[K] extends OptionSpec<infer T> ? T : never;
};

/**
 * The defaults of a table of options as a caller gives them, frozen through and through: no caller
 * can change the defaults of what is built after it.
 */
export function defaultsOf<S extends OptionSpecs>(specs: S): Defaults<S> {
  const values = Object.entries(specs).map(([name, spec]) => [name, deepFreeze('given' in spec ? spec.given : spec.default)]);
  return Object.freeze(Object.fromEntries(values)) as Defaults<S>;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** An ID-shaped option (a namespace), checked as keys encode it. */
function idOption(kind: 'namespace', defaultValue: string): OptionSpec<string> {
  return {
    default: defaultValue,
    check: (label, value) => {
      try {
        encodeId(kind, value);
      } catch (err) {
        throw new FireOnceConfigError(`${label}: ${(err as Error).message}`);
      }
      return value as string;
    },
  };
}

/**
 * How the guard makes sure its writes reached the replicas, as the `replicaSync` option takes it:
 * - `'auto'`: wait for every replica the primary has (on a Cluster, the master that serves the key), counted
 *   with `INFO replication` at the first write and again each minute; none attached, no wait.
 * - `{ replicas, timeoutMs }`: wait for that many replicas (or `'auto'`, as above), for at most
 *   `timeoutMs` (default 200, or half of `storeTimeoutMs` when that is 400 or less); it must be
 *   below `storeTimeoutMs`.
 * - `false`: never wait (replication stays asynchronous).
 */
export type ReplicaSyncOption = 'auto' | false | { readonly replicas: number | 'auto'; readonly timeoutMs?: number };

/** The `replicaSync` option once checked. */
export interface ReplicaSyncSetting {
  /** `'auto'`, or a fixed count (0: never wait). */
  readonly replicas: number | 'auto';
  readonly timeoutMs: number;
}

/** How long `WAIT` waits for the replicas when the option does not say. */
const REPLICA_SYNC_TIMEOUT_MS = 200;

/** The check of the `replicaSync` option, for the guard's option table. */
function checkReplicaSync(label: string, value: unknown): ReplicaSyncSetting {
  if (value === 'auto') return { replicas: 'auto', timeoutMs: REPLICA_SYNC_TIMEOUT_MS };
  if (value === false) return { replicas: 0, timeoutMs: REPLICA_SYNC_TIMEOUT_MS };
  if (value === null || typeof value !== 'object') {
    throw new FireOnceConfigError(`${label} must be 'auto', false or { replicas: n or 'auto', timeoutMs } (got ${describe(value)})`);
  }
  const { replicas, timeoutMs, ...rest } = value as { replicas?: unknown; timeoutMs?: unknown };
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new FireOnceConfigError(`${label}: unknown option ${unknown.map((k) => JSON.stringify(k)).join(', ')}`);
  return {
    replicas: replicas === 'auto' ? 'auto' : positiveInteger('replicas', 16)(`${label}.replicas`, replicas),
    timeoutMs: timeoutMs === undefined ? REPLICA_SYNC_TIMEOUT_MS : positiveInteger('ms', 60_000)(`${label}.timeoutMs`, timeoutMs),
  };
}

/** The `knownArtifacts` option: 0 (off) or a positive count of keys, at most a million. */
function knownArtifactsCheck(label: string, value: unknown): number {
  if (value === 0) return 0;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new FireOnceConfigError(`${label} must be 0 (off) or a positive integer (got ${describe(value)})`);
  }
  return positiveInteger('keys', 1_000_000)(label, value);
}

/** Every option of the core guard but `redis`, with its default and its check. */
export const GUARD_OPTIONS = {
  keyPrefix: {
    default: 'fire-once',
    check: checkKeyPrefix,
  },
  namespace: idOption('namespace', DEFAULT_NAMESPACE),
  lockTtlMs: duration(15 * 60 * 1000),
  artifactTtlMs: duration(7 * 24 * 60 * 60 * 1000),
  storeTimeoutMs: duration(5_000, 60_000),
  publishWakeUps: flag(true),
  knownArtifacts: { default: 10_000, check: knownArtifactsCheck },
  replicaSync: { default: Object.freeze({ replicas: 'auto', timeoutMs: REPLICA_SYNC_TIMEOUT_MS }), check: checkReplicaSync, given: 'auto' },
} as const satisfies OptionSpecs;

/**
 * Options of the core guard; the plugin takes these too.
 */
export interface FireOnceGuardOptions {
  /** The ioredis `Redis` or `Cluster` to use. The caller owns it; the guard never closes it. */
  readonly redis: RedisClient;
  /**
   * Prefix of every key the guard writes.
   * @defaultValue `'fire-once'`
   */
  readonly keyPrefix?: string;
  /**
   * The namespace keys are filed under, unless a call names its own. The Temporal plugin files
   * each activity's keys under the activity's own Temporal namespace instead.
   * @defaultValue `'default'`
   */
  readonly namespace?: string;
  /**
   * TTL of the fire-once lock, in ms. It is also how long retries stay blocked after a worker
   * crashes between dispatch and failure: pick the realistic worst-case job time plus margin.
   * @defaultValue `900_000` (15 minutes)
   */
  readonly lockTtlMs?: number;
  /**
   * TTL of a stored result artifact, in ms: how long later invocations fast-forward instead of
   * running. Keep it longer than any invocation can arrive after the first.
   * @defaultValue `604_800_000` (7 days)
   */
  readonly artifactTtlMs?: number;
  /**
   * How long one Redis call may take, in ms, before the guard gives up and fails closed with
   * `FireOnceStoreUnavailable`.
   * @defaultValue `5_000`
   */
  readonly storeTimeoutMs?: number;
  /**
   * Publish on the scope's wake channel when a dispatch commits or releases, so waiters
   * re-check at once instead of at their next poll.
   * @defaultValue `true`
   */
  readonly publishWakeUps?: boolean;
  /**
   * How many artifact keys the guard remembers having seen exist (it committed them, or
   * fast-forwarded to them), most recent first. An acquire of one of them reads the artifact with
   * a plain `GET` first, at a `GET`'s cost instead of a script's; if it is gone (invalidated or
   * expired), the script decides as usual, one round trip later. Only keys are kept, never
   * results: every answer still comes from Redis. `0` turns it off.
   * @defaultValue `10_000`
   */
  readonly knownArtifacts?: number;
  /**
   * Make sure every write reached the replicas: `WAIT` pipelined behind each commit, release and
   * renewal, and sent after an acquire that took the lock (a fast-forward writes nothing, and waits for nothing). An acquire the replicas did not acknowledge in time is undone and fails
   * with the retryable `FireOnceStoreUnavailable`, so nothing is dispatched on a lock a failover
   * could lose; a renewal counts as failed; a commit's result is still delivered. `'auto'` waits
   * for every replica attached to the master that serves the key, each Cluster master counted on
   * its own (none: no wait); `{ replicas, timeoutMs }` for a fixed count
   * (`timeoutMs` default 200, or half of a `storeTimeoutMs` shorter than 400); `false` never waits.
   * @defaultValue `'auto'`
   */
  readonly replicaSync?: ReplicaSyncOption;
}

/** Guard options with every default filled in. */
export type ResolvedGuardOptions = Resolved<typeof GUARD_OPTIONS> & { readonly redis: RedisClient };

/**
 * The guard's defaults, as a caller gives them (`replicaSync: 'auto'`), frozen.
 *
 * @example
 * ```ts
 * import { GUARD_DEFAULTS } from 'temporal-fire-once/core';
 * GUARD_DEFAULTS.keyPrefix; // 'fire-once'
 * GUARD_DEFAULTS.replicaSync; // 'auto'
 * ```
 */
export const GUARD_DEFAULTS = defaultsOf(GUARD_OPTIONS);

/** Throws {@link FireOnceConfigError} unless `options` is an object with a usable ioredis client. */
export function checkRedisOptions(options: unknown): asserts options is { readonly redis: RedisClient } {
  if (options === null || typeof options !== 'object') {
    throw new FireOnceConfigError(`options must be an object (got ${describe(options)})`);
  }
  checkRedisClient((options as { redis?: unknown }).redis);
}

/**
 * Throws {@link FireOnceConfigError} unless `redis` is an ioredis client the guard can work
 * through; `where` (a function's name) starts the message.
 */
export function checkRedisClient(redis: unknown, where?: string): asserts redis is RedisClient {
  const at = where === undefined ? '' : `${where}: `;
  if (redis === null || typeof redis !== 'object' || typeof (redis as { defineCommand?: unknown }).defineCommand !== 'function') {
    throw new FireOnceConfigError(`${at}redis must be an ioredis Redis or Cluster instance (got ${describe(redis)})`);
  }
  const clientOptions = (redis as { options?: { keyPrefix?: unknown; redisOptions?: { keyPrefix?: unknown } } }).options;
  const clientPrefix = clientOptions?.keyPrefix || clientOptions?.redisOptions?.keyPrefix;
  if (clientPrefix) {
    throw new FireOnceConfigError(
      `${at}redis has the ioredis option keyPrefix ${JSON.stringify(clientPrefix)}, which the guard cannot work under: it names its keys itself, and pub/sub messages, the CLI and the Python package see them unprefixed; give the guard keyPrefix instead, on a client without one`,
    );
  }
}

/** Check the redis client and every guard option, fill in defaults. */
export function resolveGuardOptions(options: FireOnceGuardOptions): ResolvedGuardOptions {
  checkRedisOptions(options);
  checkKnownKeys('temporal-fire-once', options, ['redis', ...Object.keys(GUARD_OPTIONS)]);
  const resolved = { redis: options.redis, ...resolveSpecs(GUARD_OPTIONS, options as unknown as Record<string, unknown>) };
  const { replicaSync, storeTimeoutMs } = resolved;
  if (replicaSync.replicas === 0) return resolved;
  // The store timeout bounds each write and its WAIT together: at or past it, the store timeout
  // always answers first ("Redis did not answer") and the replicas' count never decides.
  const given = (options.replicaSync as { timeoutMs?: unknown } | undefined)?.timeoutMs;
  if (given !== undefined) {
    if (replicaSync.timeoutMs < storeTimeoutMs) return resolved;
    throw new FireOnceConfigError(
      `replicaSync.timeoutMs (${replicaSync.timeoutMs} ms) must be below storeTimeoutMs (${storeTimeoutMs} ms), which bounds each write and its WAIT together`,
    );
  }
  // The default wait leaves the write at least half of the store timeout: 200 ms, or half of a
  // store timeout shorter than 400 ms.
  const timeoutMs = Math.max(1, Math.min(replicaSync.timeoutMs, Math.floor(storeTimeoutMs / 2)));
  return timeoutMs === replicaSync.timeoutMs ? resolved : { ...resolved, replicaSync: { ...replicaSync, timeoutMs } };
}

/** A per-call duration: the guard's own when absent, else checked like the option. */
export function callDuration(name: 'lockTtlMs' | 'artifactTtlMs', value: number | undefined, fallback: number): number {
  return value === undefined ? fallback : GUARD_OPTIONS[name].check(name, value);
}
