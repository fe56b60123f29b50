import { Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { connectRedis, deletePrefix, testPrefix } from './redis';

/** What {@link useWorkerFixture} gives a file of in-process worker tests. */
export interface WorkerFixture {
  /** This file's own key prefix: only it is deleted afterwards. */
  readonly prefix: string;
  redis: Redis;
  /** For `Worker.create`. */
  native: NativeConnection;
  /** For `new Client({ connection })`. */
  connection: Connection;
}

/**
 * Register the hooks of a file that runs workers in this process against the suite's Temporal
 * (TEMPORAL_ADDRESS) and Redis: connect once, and afterwards close both and delete the prefix.
 */
export function useWorkerFixture(name: string): WorkerFixture {
  const fx = { prefix: testPrefix(name) } as WorkerFixture;
  beforeAll(async () => {
    fx.redis = connectRedis();
    fx.native = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
    fx.connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
  });
  afterAll(async () => {
    await fx.connection?.close();
    await fx.native?.close();
    await deletePrefix(fx.redis, fx.prefix);
    await fx.redis.quit();
  });
  return fx;
}

/**
 * The attempt on which the run's first activity completed: Temporal records a retried activity's
 * start once, with the attempt that ended it. `1` means no timeout or failure came before.
 */
export async function firstActivityAttempt(handle: WorkflowHandle): Promise<number | undefined> {
  const { events } = await handle.fetchHistory();
  return (events ?? []).find((e) => e.activityTaskStartedEventAttributes)?.activityTaskStartedEventAttributes?.attempt ?? undefined;
}
