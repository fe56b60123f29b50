import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { connectRedis, deletePrefix, testPrefix } from '../redis';
import { FaultClient } from './temporal';
import { startFaultWorker, stopAll, type FaultWorker } from './workers';

/** What {@link useTwoFaultWorkers} sets up; read it inside tests, once beforeAll has run. */
export interface TwoFaultWorkers {
  readonly prefix: string;
  readonly taskQueue: string;
  /** The shared Redis of the global setup: the guard's store and the jobs' counters. */
  readonly redis: Redis;
  readonly client: FaultClient;
  readonly workers: readonly FaultWorker[];
}

/**
 * Register the hooks of a suite with its own key prefix and task queue, and two worker processes
 * on that queue with the default options; after the suite, stop the workers and delete the prefix.
 */
export function useTwoFaultWorkers(name: string): TwoFaultWorkers {
  const suite = { prefix: testPrefix(name), taskQueue: `faults-${name}-${randomUUID()}` } as { -readonly [K in keyof TwoFaultWorkers]: TwoFaultWorkers[K] };
  let workers: FaultWorker[] = [];
  beforeAll(async () => {
    suite.redis = connectRedis();
    const env = {
      TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS as string,
      REDIS_URL: process.env.REDIS_URL as string,
      TASK_QUEUE: suite.taskQueue,
      KEY_PREFIX: suite.prefix,
    };
    workers = await Promise.all([startFaultWorker(env), startFaultWorker(env)]);
    suite.workers = workers;
    suite.client = await FaultClient.connect(process.env.TEMPORAL_ADDRESS as string);
  }, 180_000);
  afterAll(async () => {
    await stopAll(workers);
    await suite.client?.close();
    if (suite.redis) {
      await deletePrefix(suite.redis, suite.prefix);
      await suite.redis.quit();
    }
  });
  return suite;
}
