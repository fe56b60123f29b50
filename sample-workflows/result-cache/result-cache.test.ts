import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type WorkflowBundle } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOnceKeys } from '../../src';
import { connectRedis, deletePrefix, testPrefix } from '../../test/helpers/redis';
import { bundleSampleWorkflows, quietTemporalLogs } from '../shared/temporal';
import { readCount } from '../shared/redis';
import { dispatchesKey } from './activities';
import { requestSummaries } from './client';
import { createSummaryWorker } from './worker';

describe('result-cache: the guard stores the result and hands it to every run', () => {
  let redis: Redis;
  let nativeConnection: NativeConnection;
  let connection: Connection;
  let client: Client;
  let workflowBundle: WorkflowBundle;
  const prefixes: string[] = [];

  beforeAll(async () => {
    quietTemporalLogs();
    redis = connectRedis();
    nativeConnection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
    client = new Client({ connection });
    workflowBundle = await bundleSampleWorkflows(require.resolve('./workflows'));
  });

  afterAll(async () => {
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
    redis.disconnect();
    await connection.close();
    await nativeConnection.close();
  });

  it('concurrent runs wait for the one dispatch and later runs fast-forward to the same result', async () => {
    const prefix = testPrefix('result-cache');
    prefixes.push(prefix);
    const taskQueue = `result-cache-${randomBytes(4).toString('hex')}`;
    const worker = await createSummaryWorker({ connection: nativeConnection, redis, taskQueue, keyPrefix: prefix, jobMs: 1_500, workflowBundle });

    await worker.runUntil(async () => {
      const concurrent = await requestSummaries(client, { taskQueue, sessionId: 'session-1', invocations: 6, spacingMs: 10 });
      expect(await readCount(redis, dispatchesKey(prefix))).toBe(1);
      const [first] = concurrent;
      expect(first).toMatchObject({ sessionId: 'session-1', dispatch: 1 });
      for (const summary of concurrent) expect(summary).toEqual(first);

      const later = await requestSummaries(client, { taskQueue, sessionId: 'session-1', invocations: 2 });
      for (const summary of later) expect(summary).toEqual(first);

      // Once the lock has run out, the stored result alone still stops a re-run.
      await redis.del(new FireOnceKeys(prefix).lock('session-1', 'summarizeSession'));
      const [afterLock] = await requestSummaries(client, { taskQueue, sessionId: 'session-1', invocations: 1 });
      expect(afterLock).toEqual(first);

      expect(await readCount(redis, dispatchesKey(prefix))).toBe(1);
    });
  });

  it('keeps sessions apart: another session dispatches its own job', async () => {
    const prefix = testPrefix('result-cache');
    prefixes.push(prefix);
    const taskQueue = `result-cache-${randomBytes(4).toString('hex')}`;
    const worker = await createSummaryWorker({ connection: nativeConnection, redis, taskQueue, keyPrefix: prefix, jobMs: 300, workflowBundle });

    await worker.runUntil(async () => {
      const [a, b] = await Promise.all([
        requestSummaries(client, { taskQueue, sessionId: 'session-a', invocations: 3 }),
        requestSummaries(client, { taskQueue, sessionId: 'session-b', invocations: 3 }),
      ]);
      expect(new Set(a.map((s) => s.jobId)).size).toBe(1);
      expect(new Set(b.map((s) => s.jobId)).size).toBe(1);
      expect(a[0]!.jobId).not.toBe(b[0]!.jobId);
      expect(await readCount(redis, dispatchesKey(prefix))).toBe(2);
    });
  });
});
