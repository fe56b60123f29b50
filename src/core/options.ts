import { FireOnceConfigError } from './errors';
import { KEY_PREFIX_PATTERN } from './keys';
import type { RedisClient } from './scripts';

/** The longest TTL or timeout the options accept: 365 days. Anything longer is a typo. */
export const MAX_DURATION_MS = 365 * 24 * 60 * 60 * 1000;

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
   * TTL of the fire-once lock. It is also how long retries stay blocked after a worker crashes
   * between dispatch and failure: pick the realistic worst-case job time plus margin.
   * @defaultValue `900_000` (15 minutes)
   */
  readonly lockTtlMs?: number;
  /**
   * TTL of a stored result artifact: how long later invocations fast-forward instead of running.
   * Keep it longer than any invocation can arrive after the first.
   * @defaultValue `604_800_000` (7 days)
   */
  readonly artifactTtlMs?: number;
  /**
   * How long one Redis call may take before the guard gives up and fails closed with
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
}

/** Guard options with every default filled in. */
export type ResolvedGuardOptions = Required<FireOnceGuardOptions>;

/**
 * The guard's defaults.
 *
 * @example
 * ```ts
 * import { GUARD_DEFAULTS } from 'temporal-fire-once';
 * GUARD_DEFAULTS.keyPrefix; // 'fire-once'
 * ```
 */
export const GUARD_DEFAULTS = Object.freeze({
  keyPrefix: 'fire-once',
  lockTtlMs: 15 * 60 * 1000,
  artifactTtlMs: 7 * 24 * 60 * 60 * 1000,
  storeTimeoutMs: 5_000,
  publishWakeUps: true,
} as const);

/** Throws {@link FireOnceConfigError} naming `field` unless `value` is an integer in 1..max. */
export function checkDuration(field: string, value: unknown, max = MAX_DURATION_MS): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw new FireOnceConfigError(`${field} must be a positive integer (got ${describe(value)})`);
  }
  if (value > max) {
    throw new FireOnceConfigError(`${field} must be at most ${max} ms (got ${value})`);
  }
  return value;
}

/** Throws {@link FireOnceConfigError} naming `field` unless `value` is a boolean. */
export function checkBoolean(field: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new FireOnceConfigError(`${field} must be a boolean (got ${describe(value)})`);
  return value;
}

/** Throws {@link FireOnceConfigError} for any key of `options` not in `known`. */
export function checkKnownKeys(where: string, options: object, known: readonly string[]): void {
  const unknown = Object.keys(options).filter((key) => !known.includes(key));
  if (unknown.length > 0) {
    throw new FireOnceConfigError(`${where}: unknown option ${unknown.map((k) => JSON.stringify(k)).join(', ')}`);
  }
}

/** A printable rendering of a bad option value. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value);
}

const GUARD_KEYS = ['redis', 'keyPrefix', 'lockTtlMs', 'artifactTtlMs', 'storeTimeoutMs', 'publishWakeUps'] as const;

/** Check the redis client and every guard option, fill in defaults. */
export function resolveGuardOptions(options: FireOnceGuardOptions, extraKeys: readonly string[] = []): ResolvedGuardOptions {
  if (options === null || typeof options !== 'object') {
    throw new FireOnceConfigError(`options must be an object (got ${describe(options)})`);
  }
  checkKnownKeys('temporal-fire-once', options, [...GUARD_KEYS, ...extraKeys]);
  const { redis } = options;
  if (redis === null || typeof redis !== 'object' || typeof (redis as { defineCommand?: unknown }).defineCommand !== 'function') {
    throw new FireOnceConfigError(`redis must be an ioredis Redis or Cluster instance (got ${describe(redis)})`);
  }
  const keyPrefix = options.keyPrefix ?? GUARD_DEFAULTS.keyPrefix;
  if (typeof keyPrefix !== 'string' || !KEY_PREFIX_PATTERN.test(keyPrefix)) {
    throw new FireOnceConfigError(
      `keyPrefix must be 1-64 characters of [A-Za-z0-9._:-], starting with a letter or digit (got ${describe(keyPrefix)})`,
    );
  }
  return {
    redis,
    keyPrefix,
    lockTtlMs: checkDuration('lockTtlMs', options.lockTtlMs ?? GUARD_DEFAULTS.lockTtlMs),
    artifactTtlMs: checkDuration('artifactTtlMs', options.artifactTtlMs ?? GUARD_DEFAULTS.artifactTtlMs),
    storeTimeoutMs: checkDuration('storeTimeoutMs', options.storeTimeoutMs ?? GUARD_DEFAULTS.storeTimeoutMs, 60_000),
    publishWakeUps: checkBoolean('publishWakeUps', options.publishWakeUps ?? GUARD_DEFAULTS.publishWakeUps),
  };
}
