import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { createSummaryActivities } from './activities';
import { intFromEnv, runMain } from '../shared/env';
import { serveByHand } from '../shared/temporal';

/** Task queue the result-cache worker polls when run by hand. */
export const TASK_QUEUE = 'result-cache';

/** Key prefix when run by hand; tests use their own. */
export const DEFAULT_KEY_PREFIX = 'result-cache-sample';

/** What a result-cache worker needs. The caller owns and closes `connection` and `redis`. */
export interface SummaryWorkerOptions {
  readonly connection: NativeConnection;
  readonly redis: Redis;
  readonly taskQueue: string;
  readonly keyPrefix: string;
  /** How long the summary job takes. */
  readonly jobMs: number;
  /** The plugin's `leaseMs`: how long a step stays locked after its worker died. Its default (30 s) without. */
  readonly leaseMs?: number;
  /** A prebuilt bundle; without it the worker bundles `workflows.ts`. */
  readonly workflowBundle?: WorkflowBundle;
}

/**
 * A worker for `summarizeChat`, with the `FireOncePlugin` guarding `summarizeSession`.
 *
 * @example
 * ```ts
 * const worker = await createSummaryWorker({ connection, redis, taskQueue: 'result-cache', keyPrefix: 'demo', jobMs: 1_000 });
 * await worker.runUntil(client.workflow.execute(summarizeChat, { taskQueue: 'result-cache', workflowId, args: ['s-1'] }));
 * ```
 */
export async function createSummaryWorker(options: SummaryWorkerOptions): Promise<Worker> {
  const { redis, keyPrefix } = options;
  const plugin = new FireOncePlugin({ redis, keyPrefix, pollIntervalMs: 50, ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }) });
  const activities = createSummaryActivities({ redis, keyPrefix, jobMs: options.jobMs });
  return await Worker.create({
    connection: options.connection,
    taskQueue: options.taskQueue,
    activities,
    plugins: [plugin],
    ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : { workflowsPath: require.resolve('./workflows') }),
  });
}

if (require.main === module) {
  runMain(() => {
    const keyPrefix = process.env.KEY_PREFIX ?? DEFAULT_KEY_PREFIX;
    return serveByHand(
      (connection, redis) =>
        createSummaryWorker({
          connection,
          redis,
          taskQueue: TASK_QUEUE,
          keyPrefix,
          jobMs: intFromEnv('JOB_MS', 2_000),
          ...(process.env.LEASE_MS === undefined ? {} : { leaseMs: intFromEnv('LEASE_MS', 30_000) }),
        }),
      `result-cache worker on task queue ${TASK_QUEUE}, keys under ${keyPrefix}:; Ctrl-C to stop`,
    );
  });
}
