import type { RedisClient } from '../scripts';
import { checkSelectedDatabase } from './database';
import { evictionCheck, resolveEvictionCheck, type EvictionCheckOptions } from './eviction';
import { refuseSentinelClient } from './sentinel';

/**
 * Everything `FireOncePlugin` checks of its Redis before a worker takes a task, for a worker wired
 * by hand (a bare {@link FireOnceGuard}, or `createFireOnceActivityInterceptor`), which nothing
 * checks otherwise. Throws `FireOnceConfigError` when the client is connected to a Sentinel's own
 * address (it names the masters; give ioredis `sentinels` and `name` instead), when Redis can
 * evict the guard's keys (see {@link checkEvictionPolicy}; `allowEvictingRedis` lets this one
 * through, reported by `warn`), and when the client names a database Redis refused (ioredis then
 * goes on in database 0, where other deployments' keys may be). `FireOnceStoreUnavailable` when
 * Redis does not answer within `timeoutMs`. Resolves once all three passed. An argument it cannot
 * use (no ioredis client, a flag that is no boolean, a timeout that is no whole number of ms from 1
 * to 60,000, a `warn` that is no function, an option of another name) is `FireOnceConfigError`
 * naming it, before Redis is read.
 *
 * @example
 * ```ts
 * import { FireOnceGuard } from 'temporal-fire-once';
 * import { checkWorkerRedis, createFireOnceActivityInterceptor, fireOnceActivityMap } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * export async function handWiredInterceptor(redis: Redis, activities: object) {
 *   await checkWorkerRedis(redis, { timeoutMs: 5_000 }); // before the worker takes a task
 *   const guard = new FireOnceGuard({ redis });
 *   return createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities) });
 * }
 * ```
 */
export async function checkWorkerRedis(redis: RedisClient, options: EvictionCheckOptions = {}): Promise<void> {
  const resolved = resolveEvictionCheck('checkWorkerRedis', redis, options);
  const { timeoutMs } = resolved;
  // First: a sentinel has no eviction policy to read, and the eviction check would blame that instead.
  await refuseSentinelClient(redis, timeoutMs);
  await evictionCheck(redis, resolved);
  await checkSelectedDatabase(redis, timeoutMs);
}
