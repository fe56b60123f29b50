import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { createReportActivities } from './activities';
import { intFromEnv, runMain } from '../shared/env';
import { serveByHand } from '../shared/temporal';

/** Task queue the failure-then-retry worker polls when run by hand. */
export const TASK_QUEUE = 'failure-then-retry';

/** Key prefix when run by hand; tests use their own. */
export const DEFAULT_KEY_PREFIX = 'failure-then-retry-sample';

/** What a report worker needs. The caller owns and closes `connection` and `redis`. */
export interface ReportWorkerOptions {
  readonly connection: NativeConnection;
  readonly redis: Redis;
  readonly taskQueue: string;
  readonly keyPrefix: string;
  /** How many dispatches of each report fail before rendering works. */
  readonly failFirst: number;
  /** How long one render takes. */
  readonly jobMs: number;
  /** A prebuilt bundle; without it the worker bundles `workflows.ts`. */
  readonly workflowBundle?: WorkflowBundle;
}

/**
 * A worker for `buildReport`, with the `FireOncePlugin` guarding `renderReport`.
 *
 * @example
 * ```ts
 * const worker = await createReportWorker({ connection, redis, taskQueue: 'reports', keyPrefix: 'demo', failFirst: 1, jobMs: 200 });
 * await worker.runUntil(client.workflow.execute(buildReport, { taskQueue: 'reports', workflowId, args: ['r-1'] }));
 * ```
 */
export async function createReportWorker(options: ReportWorkerOptions): Promise<Worker> {
  const { redis, keyPrefix } = options;
  const plugin = new FireOncePlugin({ redis, keyPrefix, pollIntervalMs: 50 });
  const activities = createReportActivities({ redis, keyPrefix, failFirst: options.failFirst, jobMs: options.jobMs });
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
    const failFirst = intFromEnv('FAIL_FIRST', 1);
    return serveByHand(
      (connection, redis) => createReportWorker({ connection, redis, taskQueue: TASK_QUEUE, keyPrefix, failFirst, jobMs: intFromEnv('JOB_MS', 500) }),
      `failure-then-retry worker on task queue ${TASK_QUEUE}, keys under ${keyPrefix}:, first ${failFirst} dispatch(es) of each report fail; Ctrl-C to stop`,
    );
  });
}
