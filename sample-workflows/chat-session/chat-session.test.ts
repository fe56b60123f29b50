import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type WorkflowBundle } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { connectRedis, deletePrefix, testPrefix } from '../../test/helpers/redis';
import { bundleSampleWorkflows, quietTemporalLogs } from '../shared/temporal';
import { readCount, waitForCount } from '../shared/redis';
import { FireOnceKeys } from '../../src';
import { DISPATCH_STEP, chatKeys, type JobTimings } from './config';
import { startJobRunner } from './job-runner';
import { createChatWorker } from './worker';
import { sendBurst, sendMessage, type Strategy } from './client';

const BURST = 8;

describe('chat-session: every message is a new run of the same session', () => {
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

  /** A worker and a job runner on a fresh prefix and task queue, for the length of `scenario`. */
  async function withSample<T>(timings: JobTimings, scenario: (ctx: { prefix: string; taskQueue: string }) => Promise<T>): Promise<T> {
    const prefix = testPrefix('chat');
    prefixes.push(prefix);
    const taskQueue = `chat-${randomBytes(4).toString('hex')}`;
    const worker = await createChatWorker({ connection: nativeConnection, redis, taskQueue, keyPrefix: prefix, timings, workflowBundle });
    const runner = startJobRunner({ redisUrl: process.env.REDIS_URL!, keys: chatKeys(prefix), ...timings });
    try {
      return await worker.runUntil(scenario({ prefix, taskQueue }));
    } finally {
      await runner.stop();
    }
  }

  function burst(strategy: Strategy, prefix: string, taskQueue: string, sessionId: string): Promise<string[]> {
    return sendBurst(client, {
      taskQueue, sessionId, strategy, redis, keys: chatKeys(prefix), invocations: BURST, spacingMs: 7,
    });
  }

  it('guarded: a burst of runs while the job is in flight dispatches it once, and every run gets its summary', async () => {
    await withSample({ jobMs: 1_500, artifactDelayMs: 300 }, async ({ prefix, taskQueue }) => {
      const results = await burst('guarded', prefix, taskQueue, 'session-burst');
      expect(await readCount(redis, chatKeys(prefix).dispatches)).toBe(1);
      expect(new Set(results)).toEqual(new Set(['summary of session-burst, from dispatch #1 ("message 1")']));
    });
  });

  it('unguarded: the same burst dispatches the job once per run (the seed\'s bug)', async () => {
    await withSample({ jobMs: 1_500, artifactDelayMs: 300 }, async ({ prefix, taskQueue }) => {
      const results = await burst('unguarded', prefix, taskQueue, 'session-burst');
      expect(results).toHaveLength(BURST);
      expect(await readCount(redis, chatKeys(prefix).dispatches)).toBe(BURST);
    });
  });

  it('guarded: a run landing after the job resolved but before its artifact is written does not dispatch again', async () => {
    await withSample({ jobMs: 500, artifactDelayMs: 3_000 }, async ({ prefix, taskQueue }) => {
      const keys = chatKeys(prefix);
      const first = await sendMessage(client, { taskQueue, sessionId: 'session-gap', strategy: 'guarded', text: 'first' });
      await waitForCount(redis, keys.jobsResolved, 1);
      expect(await redis.exists(keys.summary('session-gap'))).toBe(0); // inside the gap
      const inGap = await sendMessage(client, { taskQueue, sessionId: 'session-gap', strategy: 'guarded', text: 'in the gap' });
      const results = await Promise.all([first.result(), inGap.result()]);
      expect(results[1]).toBe(results[0]);
      expect(await readCount(redis, keys.dispatches)).toBe(1);
    });
  });

  it('guarded: a run after the artifact exists fast-forwards, even once the lock has gone', async () => {
    await withSample({ jobMs: 200, artifactDelayMs: 100 }, async ({ prefix, taskQueue }) => {
      const keys = chatKeys(prefix);
      const message = { taskQueue, sessionId: 'session-later', strategy: 'guarded' as const };
      const first = await (await sendMessage(client, { ...message, text: 'first' })).result();
      await redis.del(new FireOnceKeys(prefix).lock('session-later', DISPATCH_STEP)); // as if its TTL had run out
      const later = await (await sendMessage(client, { ...message, text: 'later' })).result();
      expect(later).toBe(first);
      expect(await readCount(redis, keys.dispatches)).toBe(1);
    });
  });
});
