// One worker process of the scale bench. Env: STORE and REDIS_URL or REDIS_CLUSTER_NODES (see
// stores.ts), TEMPORAL_ADDRESS, TASK_QUEUE, KEY_PREFIX, JOB_MS, WORKFLOW_BUNDLE (prebuilt bundle).
import { NativeConnection, Worker } from '@temporalio/worker';
import { FireOncePlugin } from '../../src';
import { quietTemporalLogs } from '../../sample-workflows/shared/temporal';
import { createScaleActivities } from './activities';
import { connectFromEnv } from './stores';

async function main(): Promise<void> {
  const env = (name: string) => {
    const value = process.env[name];
    if (!value) throw new Error(`${name} is not set`);
    return value;
  };
  quietTemporalLogs('ERROR');
  const prefix = env('KEY_PREFIX');
  const redis = connectFromEnv(process.env);
  const plugin = new FireOncePlugin({ redis, keyPrefix: prefix, lockTtlMs: 60_000, artifactTtlMs: 600_000 });
  const connection = await NativeConnection.connect({ address: env('TEMPORAL_ADDRESS') });
  const worker = await Worker.create({
    connection,
    taskQueue: env('TASK_QUEUE'),
    activities: createScaleActivities(redis, prefix, Number(env('JOB_MS'))),
    plugins: [plugin],
    workflowBundle: { codePath: env('WORKFLOW_BUNDLE') },
    maxConcurrentActivityTaskExecutions: 1000,
  });
  process.on('SIGTERM', () => worker.shutdown());
  process.stdout.write('READY\n');
  await worker.run();
  await connection.close();
  redis.disconnect();
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
