import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { workflowInterceptorModules } from '../../src/core';
import { connectRedis, deletePrefix, testPrefix } from './redis';

/** What a sample's worker factory takes from the harness: connections, queue, prefix, bundle. */
export interface SampleWorkerBase {
  readonly connection: NativeConnection;
  readonly redis: Redis;
  readonly taskQueue: string;
  readonly keyPrefix: string;
  readonly workflowBundle: WorkflowBundle;
}

/** A sample test's connections, read inside tests once beforeAll has run. */
export interface SampleHarness {
  readonly redis: Redis;
  readonly client: Client;
  /** A fresh key prefix (deleted after the suite) and task queue, and a worker's base options on them. */
  fresh(): { readonly prefix: string; readonly taskQueue: string; readonly worker: SampleWorkerBase };
}

/**
 * The hooks every sample test needs: Temporal logs kept to `logLevel`, a Redis connection, a
 * Temporal client and worker connection, and the sample's workflows bundled once. Every prefix
 * handed out by `fresh()` is deleted after the suite.
 */
export function useSampleHarness(name: string, workflowsPath: string, logLevel: 'WARN' | 'ERROR' = 'WARN'): SampleHarness {
  let redis: Redis;
  let nativeConnection: NativeConnection;
  let connection: Connection;
  let client: Client;
  let workflowBundle: WorkflowBundle;
  const prefixes: string[] = [];

  beforeAll(async () => {
    quietTemporalLogs(logLevel);
    redis = connectRedis();
    nativeConnection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
    client = new Client({ connection });
    workflowBundle = await bundleSampleWorkflows(workflowsPath);
  });

  afterAll(async () => {
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
    redis.disconnect();
    await connection.close();
    await nativeConnection.close();
  });

  return {
    get redis() {
      return redis;
    },
    get client() {
      return client;
    },
    fresh() {
      const prefix = testPrefix(name);
      prefixes.push(prefix);
      const taskQueue = `${name}-${randomBytes(4).toString('hex')}`;
      return { prefix, taskQueue, worker: { connection: nativeConnection, redis, taskQueue, keyPrefix: prefix, workflowBundle } };
    },
  };
}

let runtimeInstalled = false;

/**
 * Keep the Temporal runtime's logs to `level`, so that test output stays readable. The runtime
 * can be installed once per process: the first call wins, and a runtime someone else installed
 * first is kept.
 */
export function quietTemporalLogs(level: 'WARN' | 'ERROR'): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  try {
    Runtime.install({ logger: new DefaultLogger(level) });
  } catch {
    // Already installed in this process: keep it.
  }
}

/** Bundle a sample's workflows once, with the workflow interceptor that carries the dispatch scope, as the samples do. */
async function bundleSampleWorkflows(workflowsPath: string): Promise<WorkflowBundle> {
  const { code } = await bundleWorkflowCode({ workflowsPath, workflowInterceptorModules: [...workflowInterceptorModules], logger: new DefaultLogger('WARN') });
  return { code };
}
