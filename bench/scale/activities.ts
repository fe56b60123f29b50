/** The scale bench's guarded activity: a job that counts its own dispatches. */
import type { Cluster, Redis } from 'ioredis';
import { fireOnce } from '../../src';
import { dispatchCounterKey } from './counts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function createScaleActivities(redis: Redis | Cluster, prefix: string, jobMs: number) {
  return {
    dispatchJob: fireOnce(async (scope: string): Promise<string> => {
      await redis.incr(dispatchCounterKey(prefix, scope));
      await sleep(jobMs);
      return `result of ${scope}`;
    }),
  };
}

export type ScaleActivities = ReturnType<typeof createScaleActivities>;
