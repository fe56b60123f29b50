import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { FireOnceKeys } from '../../src/core';
import { SECOND_NAMESPACE } from '../../sample-workflows/services';
import { runCli } from '../cli/run-cli';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { firstActivityAttempt } from '../support/temporal';
import { waitFor } from '../support/wait';
import { spawnWorker, type WorkerProcess } from '../support/workers';
import { counterKey, type JobResult } from './fixtures/activities';
import { itKeepsNamespacesApart } from './namespace-guarantees';

// One dev server with two namespaces (the global setup creates SECOND_NAMESPACE), one Redis, one
// key prefix: two worker processes per namespace on one task queue, one per namespace with
// keyNamespace 'shared' on another, and one of SECOND_NAMESPACE with keyNamespace 'default' on a
// third (a fleet that set keyNamespace on some workers only).
describe('namespaces are isolation boundaries, on one Redis', () => {
  const prefix = testPrefix('ns');
  const namespaces = ['default', SECOND_NAMESPACE] as const;
  const taskQueue = `fire-once-ns-${randomUUID()}`;
  let redis: Redis;
  let connection: Connection;
  const clients = new Map<string, Client>();
  const workers: WorkerProcess[] = [];
  let bundleDir: string;

  beforeAll(async () => {
    redis = connectRedis();
    bundleDir = mkdtempSync(join(tmpdir(), 'fire-once-ns-bundle-'));
    const { code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('./fixtures/workflows'),
      plugins: [new FireOncePlugin({ redis })],
      logger: { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    });
    const bundlePath = join(bundleDir, 'workflows-bundle.js');
    writeFileSync(bundlePath, code);
    const base = {
      TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS as string,
      REDIS_URL: process.env.REDIS_URL as string,
      KEY_PREFIX: prefix,
      WORKFLOW_BUNDLE: bundlePath,
    };
    const script = 'test/integration/fixtures/worker-process.ts';
    const started = await Promise.allSettled([
      ...namespaces.flatMap((NAMESPACE) => [
        spawnWorker(script, { ...base, NAMESPACE, TASK_QUEUE: taskQueue }),
        spawnWorker(script, { ...base, NAMESPACE, TASK_QUEUE: taskQueue }),
        spawnWorker(script, { ...base, NAMESPACE, TASK_QUEUE: `${taskQueue}-shared`, KEY_NAMESPACE: 'shared' }),
      ]),
      spawnWorker(script, { ...base, NAMESPACE: SECOND_NAMESPACE, TASK_QUEUE: `${taskQueue}-into-default`, KEY_NAMESPACE: 'default' }),
    ]);
    for (const s of started) if (s.status === 'fulfilled') workers.push(s.value);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS as string });
    for (const namespace of namespaces) clients.set(namespace, new Client({ connection, namespace }));
  }, 240_000);

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await connection?.close();
    await deletePrefix(redis, prefix);
    await redis.quit();
    rmSync(bundleDir, { recursive: true, force: true });
  });

  itKeepsNamespacesApart({
    store: () => redis,
    prefix,
    namespaces,
    start: (namespace, scope, jobMs, shared) =>
      clients.get(namespace)!.workflow.start('namespacedRun', {
        taskQueue: shared ? `${taskQueue}-shared` : taskQueue,
        workflowId: `namespacedRun-${randomUUID()}`,
        args: [scope, scope, jobMs],
      }),
    cli: (...args) => runCli([...args, '--redis', process.env.REDIS_URL as string, '--prefix', prefix]),
  });

  it("a holder of another namespace that shares the keys puts back the waiters it cannot complete, and their own worker's reap completes them", async () => {
    // Workers of 'default' without keyNamespace park; the holder, in SECOND_NAMESPACE, files its
    // keys under 'default' too, and its client cannot complete a task token of 'default'.
    const scope = `session-${randomUUID()}`;
    const counterId = randomUUID();
    const into = `${taskQueue}-into-default`;
    const run = (namespace: string, queue: string) =>
      clients
        .get(namespace)!
        .workflow.start('parkedRun', { taskQueue: queue, workflowId: `parkedRun-${randomUUID()}`, args: [scope, counterId, 1_500, queue] });
    const holder = await run(SECOND_NAMESPACE, into);
    await waitFor('the holder to dispatch', async () => (await redis.get(counterKey(prefix, counterId))) === '1', { everyMs: 25 });
    const waiters = await Promise.all(Array.from({ length: 3 }, () => run('default', taskQueue)));
    const waitersKey = new FireOnceKeys(prefix).waiters(scope, 'slowJob');
    await waitFor('the 3 waiters to park', async () => (await redis.llen(waitersKey)) === 3, { everyMs: 25 });
    const results = (await Promise.all([holder, ...waiters].map((h) => h.result()))) as JobResult[];
    expect(new Set(results.map((r) => r.nonce)).size).toBe(1);
    expect(await redis.get(counterKey(prefix, counterId))).toBe('1');
    // Completed on the attempt that parked: not ended by their heartbeat timeout and fast-forwarded on a retry.
    expect(await Promise.all(waiters.map(firstActivityAttempt))).toEqual([1, 1, 1]);
  });
});
