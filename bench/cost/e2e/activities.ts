import type { Redis } from 'ioredis';
import { fireOnce } from '../library';
import { ARTIFACT_TTL_MS, LOCK_TTL_MS } from '../guards';

/**
 * The end-to-end bench's activities: the same trivial body three times, once marked fire-once,
 * once plain, and once plain but making the two Redis round trips any guard of this kind must
 * (an in-progress `SET NX PX` before the body, the result's `SET PX` after it), with nothing else:
 * the floor a two-round-trip guard cannot go below. The body does no work, so the guard's share of
 * each activity is as large as it gets. The guarded one takes its scope from its arguments, so
 * every call is its own `(scope, step)`.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { createE2eActivities } from './activities';
 * const activities = createE2eActivities('x'.repeat(256), new Redis({ lazyConnect: true }), 'bench');
 * // Worker.create({ activities, plugins: [new FireOncePlugin({ redis })], ... })
 * void activities;
 * ```
 */
export function createE2eActivities(payload: string, redis: Redis, prefix: string) {
  return {
    guardedStep: fireOnce(async (_scope: string, _index: number): Promise<string> => payload, {
      scope: ([scope, index]) => `${scope}-${index}`,
    }),
    plainStep: async (_scope: string, _index: number): Promise<string> => payload,
    floorStep: async (scope: string, index: number): Promise<string> => {
      const key = `${prefix}:floor:${scope}-${index}`;
      await redis.set(key, 'in-progress', 'PX', LOCK_TTL_MS, 'NX');
      await redis.set(key, payload, 'PX', ARTIFACT_TTL_MS);
      return payload;
    },
  };
}

/** The activity interface the bench's workflow proxies. */
export type E2eActivities = ReturnType<typeof createE2eActivities>;

/** Which of the three activities a batch runs. */
export type E2eKind = 'guarded' | 'plain' | 'floor';
