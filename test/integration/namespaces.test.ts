import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { SECOND_NAMESPACE } from '../../sample-workflows/services';
import { runCli } from '../cli/run-cli';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { spawnWorker, type WorkerProcess } from '../support/workers';
import { itKeepsNamespacesApart } from './namespace-guarantees';

// One dev server with two namespaces (the global setup creates SECOND_NAMESPACE), one Redis, one
// key prefix: two worker processes per namespace on one task queue, and one per namespace with
// keyNamespace 'shared' on another.
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
    const started = await Promise.allSettled(
      namespaces.flatMap((NAMESPACE) => [
        spawnWorker(script, { ...base, NAMESPACE, TASK_QUEUE: taskQueue }),
        spawnWorker(script, { ...base, NAMESPACE, TASK_QUEUE: taskQueue }),
        spawnWorker(script, { ...base, NAMESPACE, TASK_QUEUE: `${taskQueue}-shared`, KEY_NAMESPACE: 'shared' }),
      ]),
    );
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
});
