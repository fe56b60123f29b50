import type { Redis } from 'ioredis';
import { ARTIFACT_TTL_MS, LOCK_TTL_MS, type BenchStep, type Decision, type GuardUnderTest } from './types';

/**
 * The seed's guard as first written: `GET result:…`, then `SET inflight:… 1 NX PX`, then the
 * dispatch; `SET` of the result on success and a plain `DEL` of the lock on failure. The plain
 * DEL can delete a newer holder's lock; it is here as the floor of what a guard can cost.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createNaive } from './naive';
 * const guard = createNaive(new Redis({ lazyConnect: true }), 'bench');
 * void guard.dispatch({ scope: 's1', step: 'dispatch' }, async () => 'result');
 * ```
 */
export function createNaive(redis: Redis, prefix: string): GuardUnderTest {
  return {
    name: 'naive seed',
    settings: `GET result, SET inflight 1 NX PX ${LOCK_TTL_MS}, SET result PX ${ARTIFACT_TTL_MS} on success, plain DEL on failure`,
    keyPatterns: [`${prefix}:*`],
    async dispatch(step: BenchStep, run: () => Promise<string>): Promise<Decision> {
      const resultKey = `${prefix}:result:${step.scope}:${step.step}`;
      const lockKey = `${prefix}:inflight:${step.scope}:${step.step}`;
      const existing = await redis.get(resultKey);
      if (existing !== null) return { kind: 'fast-forward', value: existing };
      if ((await redis.set(lockKey, '1', 'PX', LOCK_TTL_MS, 'NX')) === null) return { kind: 'held' };
      let value: string;
      try {
        value = await run();
      } catch (err) {
        await redis.del(lockKey);
        throw err;
      }
      await redis.set(resultKey, value, 'PX', ARTIFACT_TTL_MS);
      return { kind: 'ran', value };
    },
  };
}
