import { FireOnceConfigError, describe } from '../errors';
import { checkKnownKeys, checkRedisClient, duration, flag, optional, resolveSpecs, type OptionSpecs, type Resolved } from '../options';
import type { RedisClient } from '../scripts';
import { primariesOf } from './nodes';
import { readSetting } from './settings';
import { withinTimeout } from './timeout';

/**
 * The one `maxmemory-policy` under which Redis never evicts the guard's keys. Every key the guard
 * writes has a TTL, so the `volatile-*` policies can evict them as well as the `allkeys-*` ones;
 * an evicted lock or artifact lets the next invocation dispatch again.
 *
 * @example
 * ```ts
 * import { SAFE_EVICTION_POLICY } from 'temporal-fire-once/core';
 * console.log(`maxmemory-policy ${SAFE_EVICTION_POLICY}`); // the redis.conf line to set
 * ```
 */
export const SAFE_EVICTION_POLICY = 'noeviction';

/** The eviction policy of one primary, as read (or not) at start. */
export interface EvictionPolicy {
  /** The node, `host:port`. */
  readonly address: string;
  /** `maxmemory-policy`, or undefined when neither INFO nor CONFIG GET could read it. */
  readonly policy: string | undefined;
  /** Where it was read, or why it could not be. */
  readonly source: string;
  /** True only for `noeviction`: a policy that could not be read is not safe. */
  readonly safe: boolean;
}

/** How {@link checkEvictionPolicy} runs. */
export interface EvictionCheckOptions {
  /**
   * Start anyway when Redis can evict the guard's keys (or its policy cannot be read); the
   * check then calls `warn` once instead of throwing.
   * @defaultValue `false`
   */
  readonly allowEvictingRedis?: boolean;
  /**
   * How long each node may take to answer, in ms: from 1 to 60,000, as the plugin's `storeTimeoutMs`.
   * @defaultValue `5_000`
   */
  readonly timeoutMs?: number;
  /** Where the opt-out is reported; a `process.emitWarning` (code `FIRE_ONCE_EVICTION`) by default. */
  readonly warn?: (message: string, meta: Record<string, unknown>) => void;
}

/** The options of a start check, each with its default and its check; the timeout has the bounds of the plugin's `storeTimeoutMs`, which the plugin passes. */
const EVICTION_CHECK_OPTIONS = {
  allowEvictingRedis: flag(false),
  timeoutMs: duration(5_000, 60_000),
  warn: optional((label, value) => {
    if (typeof value !== 'function') throw new FireOnceConfigError(`${label} must be a function (got ${describe(value)})`);
    return value as NonNullable<EvictionCheckOptions['warn']>;
  }),
} as const satisfies OptionSpecs;

/**
 * The client and options of a start check, checked before Redis is read: `FireOnceConfigError`
 * naming the first one it cannot use (`where` says which check), as the plugin checks its own. A
 * string flag read from an environment variable, or a timeout of 0, would otherwise be taken for
 * something else: a refusal naming the eviction policy, or a Redis that did not answer.
 */
export function resolveEvictionCheck(where: string, redis: unknown, options: unknown): Resolved<typeof EVICTION_CHECK_OPTIONS> {
  checkRedisClient(redis, where);
  checkKnownKeys(where, options, Object.keys(EVICTION_CHECK_OPTIONS));
  return resolveSpecs(EVICTION_CHECK_OPTIONS, options as Record<string, unknown>, `${where}: `);
}

/**
 * Read `maxmemory-policy` from the primary, or from every master of a Cluster: `INFO memory`
 * first, then `CONFIG GET` (see `readSetting`). Throws {@link FireOnceStoreUnavailable} when a
 * node cannot be reached within `timeoutMs`.
 *
 * @example
 * ```ts
 * import { readEvictionPolicies } from 'temporal-fire-once/core';
 * import { Cluster } from 'ioredis';
 *
 * export async function printPolicies(cluster: Cluster): Promise<void> {
 *   for (const { address, policy, safe } of await readEvictionPolicies(cluster)) {
 *     console.log(`${address}: ${policy ?? 'unreadable'}${safe ? '' : ' (can evict the guard\'s keys)'}`);
 *   }
 * }
 * ```
 */
export async function readEvictionPolicies(redis: RedisClient, timeoutMs = 5_000): Promise<EvictionPolicy[]> {
  return withinTimeout(redis, timeoutMs, { what: 'its eviction policy was read', noun: "Redis's eviction policy" }, async () => {
    const primaries = await primariesOf(redis);
    return Promise.all(
      primaries.map(async ({ address, client }): Promise<EvictionPolicy> => {
        const read = await readSetting(client, { info: { section: 'memory', field: 'maxmemory_policy' }, config: 'maxmemory-policy' });
        if (read.value === undefined) return { address, policy: undefined, source: read.reasons.join('; '), safe: false };
        return { address, policy: read.value, source: read.source, safe: read.value === SAFE_EVICTION_POLICY };
      }),
    );
  });
}

/**
 * Refuse a Redis that can evict the guard's keys: throws {@link FireOnceConfigError} naming each
 * primary whose `maxmemory-policy` is not `noeviction`, or could not be read, and what to set.
 * With `allowEvictingRedis`, reports the same once through `warn` and resolves. The plugin runs
 * this when a worker starts; call it yourself before using {@link FireOnceGuard} directly. A client
 * or an option it cannot use is `FireOnceConfigError` naming it, before Redis is read, as in
 * `checkWorkerRedis`.
 *
 * @example
 * ```ts
 * import { FireOnceConfigError } from 'temporal-fire-once';
 * import { checkEvictionPolicy } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * export async function startGuarding(redis: Redis): Promise<boolean> {
 *   try {
 *     await checkEvictionPolicy(redis);
 *     return true;
 *   } catch (err) {
 *     if (err instanceof FireOnceConfigError) console.error(err.message); // ... set maxmemory-policy noeviction ...
 *     return false;
 *   }
 * }
 * ```
 */
export async function checkEvictionPolicy(redis: RedisClient, options: EvictionCheckOptions = {}): Promise<readonly EvictionPolicy[]> {
  return evictionCheck(redis, resolveEvictionCheck('checkEvictionPolicy', redis, options));
}

/** {@link checkEvictionPolicy} on options already checked. */
export async function evictionCheck(redis: RedisClient, options: Resolved<typeof EVICTION_CHECK_OPTIONS>): Promise<readonly EvictionPolicy[]> {
  const policies = await readEvictionPolicies(redis, options.timeoutMs);
  const unsafe = policies.filter((p) => !p.safe);
  if (unsafe.length === 0) return policies;
  const problem = describeEvictionRisk(unsafe);
  if (!options.allowEvictingRedis) throw new FireOnceConfigError(`${problem}. ${evictionFix('pass allowEvictingRedis: true')}`);
  const warn = options.warn ?? ((message: string) => process.emitWarning(message, { code: 'FIRE_ONCE_EVICTION' }));
  warn(`fire-once: ${problem}; starting anyway because allowEvictingRedis is true`, {
    nodes: unsafe.map((p) => ({ address: p.address, policy: p.policy ?? 'unknown' })),
  });
  return policies;
}

/** What to set, and how to opt out (`optOut`, e.g. "pass allowEvictingRedis: true"). */
export function evictionFix(optOut: string): string {
  return (
    `Set \`maxmemory-policy ${SAFE_EVICTION_POLICY}\` on every primary (redis.conf, or CONFIG SET maxmemory-policy ${SAFE_EVICTION_POLICY}; ` +
    `a managed service calls it its eviction policy), or ${optOut} to accept the risk`
  );
}

/** One sentence naming every primary that can evict the guard's keys (or whose policy is unknown) and why that matters. */
export function describeEvictionRisk(unsafe: readonly EvictionPolicy[]): string {
  const parts = unsafe.map((p) =>
    p.policy === undefined
      ? `the maxmemory-policy of Redis at ${p.address} could not be read (${p.source}; ${/NOPERM/.test(p.source) ? 'grant the user +info' : 'check it by hand'})`
      : `Redis at ${p.address} has maxmemory-policy ${p.policy}`,
  );
  const evicts = unsafe.some((p) => p.policy !== undefined);
  return `${parts.join(', and ')}: ${evicts ? 'under memory pressure Redis evicts' : 'Redis may evict'} live locks and artifacts (every one has a TTL), and the next invocation then dispatches the same job again`;
}
