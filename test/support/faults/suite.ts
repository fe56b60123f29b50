import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { connectRedis, deletePrefix, testPrefix } from '../redis';
import { FaultClient } from './temporal';
import { startFaultWorker, stopAll, type FaultWorker, type FaultWorkerEnv } from './workers';

/** What {@link useFaultWorkers} sets up; read it inside tests, once beforeAll has run. */
export interface FaultWorkers {
  readonly prefix: string;
  readonly taskQueue: string;
  /** The shared Redis of the global setup: the guard's store and the jobs' counters. */
  readonly redis: Redis;
  readonly client: FaultClient;
  /** Every worker process started so far, the exited ones included. */
  readonly workers: readonly FaultWorker[];
  /** Start one more worker process on the suite's queue, with the suite's environment. */
  spawn(): Promise<FaultWorker>;
}

/** Options of the worker processes, besides the suite's own address, queue and prefix. */
type ExtraEnv = Omit<FaultWorkerEnv, 'TEMPORAL_ADDRESS' | 'REDIS_URL' | 'TASK_QUEUE' | 'KEY_PREFIX'>;

/**
 * Register the hooks of a suite with its own key prefix and task queue, and `count` worker
 * processes on that queue (`env` adds options to the defaults); after the suite, stop the workers
 * and delete the prefix.
 */
export function useFaultWorkers(name: string, { count = 2, env = {} }: { count?: number; env?: ExtraEnv } = {}): FaultWorkers {
  const prefix = testPrefix(name);
  const taskQueue = `faults-${name}-${randomUUID()}`;
  const workers: FaultWorker[] = [];
  const workerEnv: FaultWorkerEnv = {
    ...env,
    TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS as string,
    REDIS_URL: process.env.REDIS_URL as string,
    TASK_QUEUE: taskQueue,
    KEY_PREFIX: prefix,
  };
  const spawn = async () => {
    const worker = await startFaultWorker(workerEnv);
    workers.push(worker);
    return worker;
  };
  let redis: Redis | undefined;
  let client: FaultClient | undefined;
  beforeAll(async () => {
    redis = connectRedis();
    await Promise.all(Array.from({ length: count }, spawn));
    client = await FaultClient.connect(process.env.TEMPORAL_ADDRESS as string);
  }, 180_000);
  afterAll(async () => {
    await stopAll(workers);
    await client?.close();
    if (redis) {
      await deletePrefix(redis, prefix);
      await redis.quit();
    }
  });
  // redis and client exist once beforeAll has run, which is before any test reads them.
  return {
    prefix,
    taskQueue,
    workers,
    spawn,
    get redis() {
      return redis as Redis;
    },
    get client() {
      return client as FaultClient;
    },
  };
}
