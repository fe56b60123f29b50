// One worker process of bench:slots. Env: TEMPORAL_ADDRESS, REDIS_URL, KEY_PREFIX, TASK_QUEUE,
// SLOTS (maxConcurrentActivityTaskExecutions), WORKFLOW_BUNDLE (prebuilt bundle).
import { NativeConnection, Worker } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { quietTemporalLogs } from '../../sample-workflows/shared/temporal';
import { requiredEnv, serveWorkerProcess, type ServedWorker } from '../../sample-workflows/services';
import { countingInterceptor, createActivities } from './activities';

async function main(): Promise<ServedWorker> {
  quietTemporalLogs('ERROR');
  const prefix = requiredEnv('KEY_PREFIX');
  const redis = new Redis(requiredEnv('REDIS_URL'));
  const connection = await NativeConnection.connect({ address: requiredEnv('TEMPORAL_ADDRESS') });
  const worker = await Worker.create({
    connection,
    taskQueue: requiredEnv('TASK_QUEUE'),
    activities: createActivities(redis, prefix),
    workflowBundle: { codePath: requiredEnv('WORKFLOW_BUNDLE') },
    plugins: [new FireOncePlugin({ redis, keyPrefix: prefix })],
    interceptors: { activity: [countingInterceptor(redis, prefix)] },
    maxConcurrentActivityTaskExecutions: Number(requiredEnv('SLOTS')),
  });
  return { worker, connection, clients: [redis] };
}

serveWorkerProcess(main);
