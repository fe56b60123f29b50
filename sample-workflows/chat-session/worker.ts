import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { createChatActivities } from './activities';
import { DEFAULT_KEY_PREFIX, DEFAULT_TIMINGS, TASK_QUEUE, chatKeys, lockTtlFor, type JobTimings } from './config';
import { intFromEnv, runMain } from '../shared/env';
import { serveByHand } from '../shared/temporal';

/** What a chat-session worker needs. The caller owns and closes `connection` and `redis`. */
export interface ChatWorkerOptions {
  readonly connection: NativeConnection;
  readonly redis: Redis;
  readonly taskQueue: string;
  /** Prefix of the sample's own keys (job list, counters, summaries); shared with the job runner. */
  readonly keyPrefix: string;
  /**
   * The `FireOncePlugin`'s `keyPrefix`: its locks, fencing counters and dispatch log
   * (`<guardKeyPrefix>:log`, what `npx fire-once report --prefix <guardKeyPrefix>` reads).
   * @defaultValue `keyPrefix`
   */
  readonly guardKeyPrefix?: string;
  /** The job runner's timings, from which the lock TTL is derived. */
  readonly timings: JobTimings;
  /** A prebuilt bundle (see `bundleSampleWorkflows`); without it the worker bundles `workflows.ts`. */
  readonly workflowBundle?: WorkflowBundle;
}

/**
 * A worker for the chat-session workflows, with the `FireOncePlugin` guarding `dispatchSummary`.
 *
 * @example
 * ```ts
 * const worker = await createChatWorker({ connection, redis, taskQueue: 'chat-session', keyPrefix: 'chat-sample', timings });
 * await worker.runUntil(client.workflow.execute(chatTurn, { taskQueue: 'chat-session', workflowId, args }));
 * ```
 */
export async function createChatWorker(options: ChatWorkerOptions): Promise<Worker> {
  const { redis, keyPrefix } = options;
  const plugin = new FireOncePlugin({ redis, keyPrefix: options.guardKeyPrefix ?? keyPrefix, pollIntervalMs: 50 });
  const activities = createChatActivities({ redis, keys: chatKeys(keyPrefix), lockTtlMs: lockTtlFor(options.timings) });
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
    const timings = {
      jobMs: intFromEnv('JOB_MS', DEFAULT_TIMINGS.jobMs),
      artifactDelayMs: intFromEnv('ARTIFACT_DELAY_MS', DEFAULT_TIMINGS.artifactDelayMs),
    };
    const keyPrefix = process.env.KEY_PREFIX ?? DEFAULT_KEY_PREFIX;
    return serveByHand(
      (connection, redis) => createChatWorker({ connection, redis, taskQueue: TASK_QUEUE, keyPrefix, timings }),
      `chat-session worker on task queue ${TASK_QUEUE}, keys under ${keyPrefix}:; Ctrl-C to stop`,
    );
  });
}
