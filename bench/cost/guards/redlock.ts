import { ExecutionError, Redlock } from '@sesamecare-oss/redlock';
import type { Redis } from 'ioredis';
import { ARTIFACT_TTL_MS, LOCK_TTL_MS, type BenchStep, type Decision, type GuardUnderTest } from './types';

/** The settings of `@sesamecare-oss/redlock`'s README configuration example. */
const README_SETTINGS = { driftFactor: 0.01, retryCount: 10, retryDelay: 200, retryJitter: 200, automaticExtensionThreshold: 500 } as const;

/**
 * `@sesamecare-oss/redlock` on one client, with an artifact `GET` in front: `GET` the artifact,
 * `acquire` the lock, dispatch, then `SET` the artifact and leave the lock to run out (release on
 * failure only, as the seed asks) or `release` it (the library's compare-and-delete) on failure.
 * Acquire passes `retryCount: 0`, the README's advice for "is it locked?" checks, so a held lock
 * answers at once instead of after ten 200 ms retries.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createRedlock } from './redlock';
 * const guard = createRedlock(new Redis({ lazyConnect: true }), 'bench');
 * void guard.dispatch({ scope: 's1', step: 'dispatch' }, async () => 'result');
 * ```
 */
export function createRedlock(redis: Redis, prefix: string): GuardUnderTest {
  const redlock = new Redlock([redis], README_SETTINGS);
  // Redlock emits 'error' for every lock it finds taken; an EventEmitter without a listener throws.
  redlock.on('error', () => undefined);
  return {
    name: 'redlock',
    settings: `@sesamecare-oss/redlock, README settings ${JSON.stringify(README_SETTINGS)}, acquire(duration ${LOCK_TTL_MS}, { retryCount: 0 })`,
    keyPatterns: [`${prefix}:*`],
    async dispatch(step: BenchStep, run: () => Promise<string>): Promise<Decision> {
      const artifactKey = `${prefix}:artifact:${step.scope}:${step.step}`;
      const existing = await redis.get(artifactKey);
      if (existing !== null) return { kind: 'fast-forward', value: existing };
      let lock;
      try {
        lock = await redlock.acquire([`${prefix}:lock:${step.scope}:${step.step}`], LOCK_TTL_MS, { retryCount: 0 });
      } catch (err) {
        if (err instanceof ExecutionError) return { kind: 'held' };
        throw err;
      }
      let value: string;
      try {
        value = await run();
      } catch (err) {
        await lock.release();
        throw err;
      }
      await redis.set(artifactKey, value, 'PX', ARTIFACT_TTL_MS);
      return { kind: 'ran', value };
    },
  };
}
