import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, type Worker, type WorkflowBundle } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { workflowInterceptorModules } from '../../src/core';
import { redisUrl, temporalAddress } from './env';

let installed = false;

/**
 * Keep the Temporal runtime to warnings and errors (or errors only), so that sample output stays
 * readable. The runtime can be installed once per process; later calls do nothing.
 */
export function quietTemporalLogs(level: 'WARN' | 'ERROR' = 'WARN'): void {
  if (installed) return;
  installed = true;
  try {
    Runtime.install({ logger: new DefaultLogger(level) });
  } catch {
    // Already installed by someone else in this process: keep theirs.
  }
}

/**
 * Bundle a sample's workflows once, with the fire-once workflow interceptor that carries the
 * dispatch scope. Every worker of the sample can then share the bundle, whatever its key prefix,
 * instead of paying for a webpack build per worker.
 */
export async function bundleSampleWorkflows(workflowsPath: string): Promise<WorkflowBundle> {
  const { code } = await bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: [...workflowInterceptorModules],
    logger: new DefaultLogger('WARN'),
  });
  return { code };
}

/**
 * The body of a sample's worker run by hand: connect to `TEMPORAL_ADDRESS` and `REDIS_URL`,
 * create the worker, print `banner`, and run until Ctrl-C (the worker shuts down on SIGINT and
 * SIGTERM), then close both connections.
 *
 * @example
 * ```ts
 * if (require.main === module) runMain(() => serveByHand((connection, redis) => createWorker({ connection, redis }), 'my worker; Ctrl-C to stop'));
 * ```
 */
export async function serveByHand(create: (connection: NativeConnection, redis: Redis) => Promise<Worker>, banner: string): Promise<void> {
  const connection = await NativeConnection.connect({ address: temporalAddress() });
  const redis = new Redis(redisUrl());
  try {
    const worker = await create(connection, redis);
    console.log(banner);
    await worker.run();
  } finally {
    redis.disconnect();
    await connection.close();
  }
}
