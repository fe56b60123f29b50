// The TypeScript worker process of the cross-language tests (python/tests/test_cross_language.py).
// Env: TEMPORAL_ADDRESS, REDIS_URL, KEY_PREFIX, TASK_QUEUE, and CODEC_TASK_QUEUE with CODEC_KEY
// (64 hex digits) for a second worker whose payload codec is the AES-GCM one of the converter
// tests. Both guard `crossJob` and `heldJob`, which INCR the counter the Python activities INCR.
import { randomUUID } from 'node:crypto';
import { NativeConnection, Worker } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FireOncePlugin, fireOnce } from '../../../src';
import { AesGcmCodec } from '../../../test/integration/fixtures/converters/codec';
import { requiredEnv } from '../../../sample-workflows/services';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const prefix = requiredEnv('KEY_PREFIX');
  const redis = new Redis(requiredEnv('REDIS_URL'));
  const connection = await NativeConnection.connect({ address: requiredEnv('TEMPORAL_ADDRESS') });
  const activities = {
    crossJob: fireOnce(async (counterId: string, ms: number) => {
      await redis.incr(`${prefix}:counter:${counterId}`);
      await sleep(ms);
      return { counterId, nonce: randomUUID(), by: 'typescript' };
    }),
    // Python's heldJob under the same step: runs here only if a Python holder's waiters dispatch again.
    heldJob: fireOnce(async (counterId: string, size: number) => {
      await redis.incr(`${prefix}:counter:${counterId}`);
      return { counterId, by: 'typescript', pad: 'y'.repeat(Math.max(size, 0)) };
    }),
  };
  const build = (taskQueue: string, codecKey?: string) =>
    Worker.create({
      connection,
      taskQueue,
      activities,
      workflowsPath: require.resolve('./workflows'),
      plugins: [new FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 50 })],
      ...(codecKey ? { dataConverter: { payloadCodecs: [new AesGcmCodec(Buffer.from(codecKey, 'hex'))] } } : {}),
    });
  const workers = [await build(requiredEnv('TASK_QUEUE')), await build(requiredEnv('CODEC_TASK_QUEUE'), requiredEnv('CODEC_KEY'))];
  process.on('SIGTERM', () => workers.forEach((w) => w.shutdown()));
  process.stdout.write('READY\n');
  await Promise.all(workers.map((w) => w.run()));
  await connection.close();
  redis.disconnect();
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
