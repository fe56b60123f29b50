import { AsyncLocalStorage } from 'node:async_hooks';
import { CompleteAsyncError, Context } from '@temporalio/activity';
import type { ActivityInboundCallsInterceptor, ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { fireOnce } from '../../src';

/** One activity execution of a burst run, as the counting interceptor saw it. */
export interface Execution {
  /** The worker process it ran on. */
  readonly pid: number;
  /** When it started, on this machine's clock (epoch ms). */
  readonly startedAt: number;
  /** How long it held its slot. */
  readonly ms: number;
  /** This execution ran the job (the dispatch), rather than waiting for it. */
  readonly dispatched: boolean;
  /** When the job's body returned (epoch ms); only for the dispatch. */
  readonly jobEndedAt?: number;
  /** It gave its slot back to complete asynchronously (`'park'`). */
  readonly parked: boolean;
}

/** Where the bench's worker processes record what the bench reads back, under its key prefix. */
export const recordKeys = {
  executions: (prefix: string, scope: string) => `${prefix}:executions:${scope}`,
  scheduleToStart: (prefix: string, tag: string) => `${prefix}:schedule-to-start:${tag}`,
  dispatches: (prefix: string, scope: string) => `${prefix}:dispatches:${scope}`,
};

const running = new AsyncLocalStorage<{ dispatched: boolean; jobEndedAt?: number }>();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The burst's job (in four in-flight policies) and the unrelated 10 ms activity. */
export function createActivities(redis: Redis, prefix: string) {
  const job = async (counterId: string, ms: number): Promise<string> => {
    const store = running.getStore();
    if (store) store.dispatched = true;
    await redis.incr(recordKeys.dispatches(prefix, counterId)); // a counter the guard does not own
    await sleep(ms);
    if (store) store.jobEndedAt = Date.now();
    return `result of ${counterId}`;
  };
  return {
    jobPark: fireOnce((counterId: string, ms: number) => job(counterId, ms), { step: 'job', onInFlight: 'park' }),
    jobWait: fireOnce((counterId: string, ms: number) => job(counterId, ms), { step: 'job', onInFlight: 'wait' }),
    jobFail: fireOnce((counterId: string, ms: number) => job(counterId, ms), { step: 'job', onInFlight: 'fail' }),
    jobSkip: fireOnce(
      async (counterId: string, ms: number): Promise<void> => {
        await job(counterId, ms);
      },
      { step: 'job', onInFlight: 'skip' },
    ),
    unrelated: async (tag: string): Promise<void> => {
      const { currentAttemptScheduledTimestampMs } = Context.current().info;
      await redis.rpush(recordKeys.scheduleToStart(prefix, tag), Date.now() - currentAttemptScheduledTimestampMs);
      await sleep(10);
    },
  };
}

export type BenchActivities = ReturnType<typeof createActivities>;

/**
 * Records every execution of a burst activity and how long it held its slot, outside the guard:
 * it wraps the plugin's interceptor, so a parked execution (CompleteAsyncError) counts too.
 */
export function countingInterceptor(redis: Redis, prefix: string): ActivityInterceptorsFactory {
  return (ctx) => {
    if (!ctx.info.activityType.startsWith('job')) return {};
    const inbound: ActivityInboundCallsInterceptor = {
      execute: async (input, next) => {
        const startedAt = Date.now();
        const started = performance.now();
        const store: { dispatched: boolean; jobEndedAt?: number } = { dispatched: false };
        let parked = false;
        try {
          return await running.run(store, () => next(input));
        } catch (err) {
          parked = err instanceof CompleteAsyncError;
          throw err;
        } finally {
          const execution: Execution = { pid: process.pid, startedAt, ms: performance.now() - started, ...store, parked };
          await redis.rpush(recordKeys.executions(prefix, String(input.args[0])), JSON.stringify(execution));
        }
      },
    };
    return { inbound };
  };
}
