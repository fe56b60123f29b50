import { fireOnce } from '../library';

/**
 * The end-to-end bench's activities: the same trivial body twice, once marked fire-once and once
 * plain. The body does no work, so the guard's share of each activity is as large as it gets.
 * The guarded one takes its scope from its arguments, so every call is its own `(scope, step)`.
 *
 * @example
 * ```ts
 * import { createE2eActivities } from './activities';
 * const activities = createE2eActivities('x'.repeat(256));
 * // Worker.create({ activities, plugins: [new FireOncePlugin({ redis })], ... })
 * void activities;
 * ```
 */
export function createE2eActivities(payload: string) {
  return {
    guardedStep: fireOnce(async (_scope: string, _index: number): Promise<string> => payload, {
      scope: ([scope, index]) => `${scope}-${index}`,
    }),
    plainStep: async (_scope: string, _index: number): Promise<string> => payload,
  };
}

/** The activity interface the bench's workflow proxies. */
export type E2eActivities = ReturnType<typeof createE2eActivities>;
