import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { ActivityInterceptorsFactory, Worker } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FireOncePlugin, fireOnce, fireOnceContext } from '../../src';
import { CapturingLogger, decoded, settle } from '../support/bystander';

/** What one run of the worker scenario saw. */
export interface ScenarioReport {
  readonly holder: { readonly value?: unknown; readonly error?: unknown };
  readonly waiter: { readonly value?: unknown; readonly error?: unknown };
  /** A third invocation that parked its task token (`'park'`) and was completed by the holder's commit. */
  readonly parked: { readonly value?: unknown; readonly error?: unknown };
  readonly failing: { readonly value?: unknown; readonly error?: unknown };
  /** An external-artifact dispatcher: it only tests that the job's own key exists. */
  readonly external: { readonly value?: unknown; readonly error?: unknown };
  /** What `fireOnceContext().renew()` (guard.extend) answered inside the holder. */
  readonly renewed: unknown;
  /** Most subscribers the scope's wake channel had while the waiter waited. */
  readonly wakeSubscribers: number;
  /** Subscribers of the invalidation channel while the worker ran (the local cache). */
  readonly invalidationSubscribers: number;
  readonly invalidated: { readonly value?: unknown; readonly error?: unknown };
  /** The invocation after the invalidation: it replaces the committed lock and dispatches again. */
  readonly rerun: { readonly value?: unknown; readonly error?: unknown };
  /** Whether the failing activity's lock was released (compare-and-delete). */
  readonly lockAfterFailure: number;
  readonly dispatches: number;
}

/**
 * Everything a worker does with Redis, run through FireOncePlugin on a client that logs in as
 * `username`: the ready check, acquire, lease renewal (extend), a second invocation that waits on
 * the wake channel while the first holds the lock, a third that parks (`'park'`) and is completed
 * by the commit, commit with its wake-up publish and the
 * dispatch log, the local cache's invalidation subscription and an invalidation, a failing
 * dispatch that releases its lock, and an external-artifact dispatch held after success. `admin` (unrestricted) only observes, and keeps the counter.
 */
export async function runWorkerScenario(options: {
  readonly url: string;
  readonly username: string;
  readonly password: string;
  readonly prefix: string;
  readonly admin: Redis;
  readonly tls?: object;
  /** The Temporal namespace the worker serves (its keys are filed under it). @defaultValue 'default' */
  readonly namespace?: string;
}): Promise<ScenarioReport> {
  const { url, username, password, prefix, admin } = options;
  const namespace = options.namespace ?? 'default';
  const redis = new Redis(url, { username, password, maxRetriesPerRequest: 1, ...(options.tls ? { tls: options.tls } : {}) });
  redis.on('error', () => undefined);
  const plugin = new FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 100, storeTimeoutMs: 2_000, localCache: true, dispatchLogMaxLen: 1_000 });
  const counterKey = `${prefix}:dispatches`;
  const keys = plugin.guard.keysFor(namespace);
  let started!: () => void;
  const holderStarted = new Promise<void>((resolve) => (started = resolve));
  let finish!: () => void;
  const holderMayFinish = new Promise<void>((resolve) => (finish = resolve));
  let renewed: unknown;
  async function job(scope: string): Promise<string> {
    await admin.incr(counterKey);
    renewed = await fireOnceContext()
      .renew()
      .catch((e: unknown) => e);
    started();
    await holderMayFinish;
    return `summary of ${scope}`;
  }
  // The holder hands parked waiters over through the worker's Temporal client. Only Redis is under
  // test here, so this client records the completion instead of sending it to a server.
  let completeParked!: (value: unknown) => void;
  const parkedCompleted = new Promise<unknown>((resolve) => (completeParked = resolve));
  const client = {
    withAbortSignal: (_signal: AbortSignal, fn: () => unknown) => fn(),
    activity: {
      complete: async (_token: Uint8Array, value: unknown) => completeParked(value),
      fail: async (_token: Uint8Array, err: unknown) => completeParked(err),
      heartbeat: async () => undefined,
    },
  } as unknown as Client;

  const activities = {
    summarise: fireOnce((scope: string) => job(scope), { scope: ([scope]) => scope }),
    summariseInSlot: fireOnce((scope: string) => job(scope), { scope: ([scope]) => scope, step: 'summarise', onInFlight: 'wait' }),
    failing: fireOnce(
      async (_scope: string): Promise<string> => {
        await admin.incr(counterKey);
        throw new Error('the job failed');
      },
      { scope: ([scope]) => scope },
    ),
    dispatchExternal: fireOnce(
      async (_scope: string): Promise<void> => {
        await admin.incr(counterKey);
      },
      { scope: ([scope]) => scope, artifact: { external: ({ scope, jobType }) => keys.external(scope, jobType) } },
    ),
  };
  const configured = plugin.configureWorker({ taskQueue: 'acl', namespace, activities });
  const factory = configured.interceptors?.activity?.at(-1) as ActivityInterceptorsFactory;
  let runs = 0;
  const run = (activityType: keyof typeof activities, logger: CapturingLogger) =>
    new MockActivityEnvironment(
      {
        namespace,
        activityType,
        workflowExecution: { workflowId: 'chat-s', runId: `run-${++runs}` }, // each invocation a new run
        startToCloseTimeoutMs: 5_000,
        currentAttemptScheduledTimestampMs: Date.now(),
        taskToken: Buffer.from(`token-${runs}`),
      },
      { interceptors: [factory], logger, client },
    ).run(activities[activityType] as (scope: string) => Promise<unknown>, 's');

  const numsub = async (channel: string) => Number(((await admin.pubsub('NUMSUB', channel)) as [string, number])[1]);
  const logger = new CapturingLogger();
  let report: ScenarioReport | undefined;
  try {
    // runWorker is what Worker.run goes through: it attaches the local cache and, when the
    // worker stops, closes the plugin's subscriber connection.
    await plugin.runWorker({} as Worker, async () => {
      const invalidationSubscribers = await numsub(keys.invalidations());
      const holder = settle(run('summarise', logger));
      await Promise.race([holderStarted, holder]);
      let waiterSettled = false;
      const waiter = settle(run('summariseInSlot', logger)).finally(() => (waiterSettled = true));
      const parking = await settle(run('summarise', logger)); // completes asynchronously
      const parkedKeys = await admin.llen(keys.waiters('s', 'summarise'));
      // Until the waiter is subscribed (or has given up, when subscribing is denied).
      let wakeSubscribers = 0;
      for (let i = 0; i < 500 && wakeSubscribers === 0 && !waiterSettled; i++) {
        wakeSubscribers = await numsub(keys.wakeChannel('s'));
        if (wakeSubscribers === 0) await new Promise((r) => setTimeout(r, 20));
      }
      finish();
      const [holderOutcome, waiterOutcome] = await Promise.all([holder, waiter]);
      // A commit the ACL denies hands nothing over: give up on the completion after a while.
      const notCompleted = new Promise<{ error: Error }>((resolve) => setTimeout(() => resolve({ error: new Error('never completed') }), 3_000).unref());
      const parkedAndCompleted = parkedCompleted.then((value) => ({ value }));
      const parked =
        (parking.error as Error | undefined)?.name === 'CompleteAsyncError' && parkedKeys === 1
          ? await Promise.race([parkedAndCompleted, notCompleted])
          : parking;
      const failing = await settle(run('failing', logger));
      const lockAfterFailure = await admin.exists(keys.lock('s', 'failing'));
      const external = await settle(run('dispatchExternal', logger));
      const invalidated = await settle(plugin.invalidate('s', 'summarise', namespace));
      const rerun = await settle(run('summarise', logger));
      report = {
        holder: readable(holderOutcome),
        waiter: readable(waiterOutcome),
        parked: readable(parked),
        failing: readable(failing),
        external: readable(external),
        renewed,
        wakeSubscribers,
        invalidationSubscribers,
        invalidated,
        rerun: readable(rerun),
        lockAfterFailure,
        dispatches: Number((await admin.get(counterKey)) ?? 0),
      };
    });
  } finally {
    finish();
    redis.disconnect();
  }
  return report!;
}

function readable(outcome: { value?: unknown; error?: unknown }) {
  if (outcome.error !== undefined) {
    const err = outcome.error as Error & { type?: string };
    return { error: `${err.type ?? err.name}: ${err.message}` };
  }
  return { value: outcome.value === undefined ? undefined : decoded(outcome.value) };
}
