import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import { FireOncePlugin } from '../../../src';
import { spawnWorker, type WorkerProcess } from '../workers';
import { connectCluster } from './cluster';

/** Two worker processes with the guard on the cluster, on one task queue, and a client of their namespace. */
export interface ClusterWorkers {
  readonly taskQueue: string;
  readonly client: Client;
  /** Each worker process: running or how it ended, and the end of its stderr; for failure messages. */
  health(): string;
  stop(): Promise<void>;
}

const silent = { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

/**
 * Start two worker processes of test/cluster/fixtures/worker-process.ts on a fresh task queue:
 * one bundles workflowsPath itself, one loads a bundle prebuilt through the plugin (or both load
 * the prebuilt one, which is cheaper on a small machine, with `bothPrebuilt`).
 */
export async function startClusterWorkers(
  prefix: string,
  options: { pollIntervalMs?: number; bothPrebuilt?: boolean; countWakes?: boolean; namespace?: string; keyNamespace?: string; taskQueue?: string } = {},
): Promise<ClusterWorkers> {
  const taskQueue = options.taskQueue ?? `fire-once-cluster-${randomUUID()}`;
  const bundleDir = mkdtempSync(join(tmpdir(), 'fire-once-cluster-bundle-'));
  const bundler = connectCluster({ lazyConnect: true });
  const workers: WorkerProcess[] = [];
  let connection: Connection | undefined;
  const stop = async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await connection?.close();
    bundler.disconnect();
    rmSync(bundleDir, { recursive: true, force: true });
  };
  try {
    const { code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('../../integration/fixtures/workflows'),
      plugins: [new FireOncePlugin({ redis: bundler })],
      logger: silent,
    });
    const bundlePath = join(bundleDir, 'workflows-bundle.js');
    writeFileSync(bundlePath, code);
    const env = {
      TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS as string,
      REDIS_CLUSTER_NODES: process.env.REDIS_CLUSTER_NODES as string,
      TASK_QUEUE: taskQueue,
      KEY_PREFIX: prefix,
      POLL_INTERVAL_MS: String(options.pollIntervalMs ?? 50),
      COUNT_WAKES: options.countWakes ? '1' : '0',
      ...(options.namespace ? { NAMESPACE: options.namespace } : {}),
      ...(options.keyNamespace ? { KEY_NAMESPACE: options.keyNamespace } : {}),
    };
    const script = 'test/cluster/fixtures/worker-process.ts';
    const first = options.bothPrebuilt ? { ...env, WORKFLOW_BUNDLE: bundlePath } : env;
    const started = await Promise.allSettled([spawnWorker(script, first), spawnWorker(script, { ...env, WORKFLOW_BUNDLE: bundlePath })]);
    for (const s of started) if (s.status === 'fulfilled') workers.push(s.value);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS as string });
    const health = () =>
      workers
        .map(({ child, stderr }) => {
          const state = child.exitCode === null && child.signalCode === null ? 'running' : `ended (${child.exitCode ?? child.signalCode})`;
          return `worker ${child.pid}: ${state}; stderr ends: ${JSON.stringify(stderr().slice(-1500))}`;
        })
        .join('\n');
    return { taskQueue, client: new Client({ connection, ...(options.namespace ? { namespace: options.namespace } : {}) }), health, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
