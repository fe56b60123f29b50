// One worker process of the scale bench. Env: STORE and REDIS_URL or REDIS_CLUSTER_NODES (see
// stores.ts), TEMPORAL_ADDRESS, TASK_QUEUE, KEY_PREFIX, JOB_MS, WORKFLOW_BUNDLE (prebuilt bundle).
import { NativeConnection, Worker } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { quietTemporalLogs } from '../../sample-workflows/shared/temporal';
import { requiredEnv, serveWorkerProcess, type ServedWorker } from '../../sample-workflows/services';
import { createScaleActivities } from './activities';
import { connectFromEnv } from './stores';

async function main(): Promise<ServedWorker> {
  quietTemporalLogs('ERROR');
  const prefix = requiredEnv('KEY_PREFIX');
  const redis = connectFromEnv(process.env);
  const plugin = new FireOncePlugin({ redis, keyPrefix: prefix, lockTtlMs: 60_000, artifactTtlMs: 600_000 });
  const connection = await NativeConnection.connect({ address: requiredEnv('TEMPORAL_ADDRESS') });
  const worker = await Worker.create({
    connection,
    taskQueue: requiredEnv('TASK_QUEUE'),
    activities: createScaleActivities(redis, prefix, Number(requiredEnv('JOB_MS'))),
    plugins: [plugin],
    workflowBundle: { codePath: requiredEnv('WORKFLOW_BUNDLE') },
    maxConcurrentActivityTaskExecutions: 1000,
  });
  return { worker, connection, clients: [redis] };
}

serveWorkerProcess(main);
