import type { Redis } from 'ioredis';
import { Mutex } from 'redis-semaphore';
import { ARTIFACT_TTL_MS, LOCK_TTL_MS, type BenchStep, type Decision, type GuardUnderTest } from './types';

/**
 * `redis-semaphore`'s `Mutex` with an artifact `GET` in front, following its README example "let
 * the lock expire over time after the operation is finished": `tryAcquire()`, dispatch, then
 * `stopRefresh()` on success (the lock runs out by its TTL) or `release()` (the library's
 * compare-and-delete) on failure. Library defaults otherwise; `lockTimeout` is ours.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createSemaphore } from './semaphore';
 * const guard = createSemaphore(new Redis({ lazyConnect: true }), 'bench');
 * void guard.dispatch({ scope: 's1', step: 'dispatch' }, async () => 'result');
 * ```
 */
export function createSemaphore(redis: Redis, prefix: string): GuardUnderTest {
  return {
    name: 'redis-semaphore',
    settings: `redis-semaphore Mutex, defaults but lockTimeout ${LOCK_TTL_MS} (refreshInterval 0.8 x lockTimeout); tryAcquire, stopRefresh on success, release on failure`,
    // The library puts every key under `mutex:`.
    keyPatterns: [`${prefix}:*`, `mutex:${prefix}:*`],
    async dispatch(step: BenchStep, run: () => Promise<string>): Promise<Decision> {
      const artifactKey = `${prefix}:artifact:${step.scope}:${step.step}`;
      const existing = await redis.get(artifactKey);
      if (existing !== null) return { kind: 'fast-forward', value: existing };
      const mutex = new Mutex(redis, `${prefix}:lock:${step.scope}:${step.step}`, { lockTimeout: LOCK_TTL_MS });
      if (!(await mutex.tryAcquire())) return { kind: 'held' };
      let value: string;
      try {
        value = await run();
      } catch (err) {
        await mutex.release();
        throw err;
      }
      mutex.stopRefresh();
      await redis.set(artifactKey, value, 'PX', ARTIFACT_TTL_MS);
      return { kind: 'ran', value };
    },
  };
}
