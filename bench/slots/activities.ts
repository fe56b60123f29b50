import { AsyncLocalStorage } from 'node:async_hooks';
import { Context } from '@temporalio/activity';
import type { ActivityInboundCallsInterceptor, ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { fireOnce } from '../../src';

/** One activity execution of a burst run, as the counting interceptor saw it. */
export interface Execution {
  readonly scope: string;
  readonly ms: number;
  /** This execution ran the job (the dispatch), rather than waiting for it. */
  readonly dispatched: boolean;
}

/** What the bench reads back: every burst execution, and every unrelated activity's schedule-to-start. */
export interface Records {
  readonly executions: Execution[];
  readonly scheduleToStartMs: Map<string, number[]>;
}

const running = new AsyncLocalStorage<{ dispatched: boolean }>();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The burst's job (in four in-flight policies) and the unrelated 10 ms activity. */
export function createActivities(redis: Redis, prefix: string, records: Records) {
  const job = async (counterId: string, ms: number): Promise<string> => {
    const store = running.getStore();
    if (store) store.dispatched = true;
    await redis.incr(`${prefix}:dispatches:${counterId}`); // a counter the guard does not own
    await sleep(ms);
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
      const list = records.scheduleToStartMs.get(tag) ?? [];
      list.push(Date.now() - currentAttemptScheduledTimestampMs);
      records.scheduleToStartMs.set(tag, list);
      await sleep(10);
    },
  };
}

export type BenchActivities = ReturnType<typeof createActivities>;

/**
 * Counts every execution of a burst activity and how long it held its slot, outside the guard:
 * it wraps the plugin's interceptor, so a parked execution (CompleteAsyncError) counts too.
 */
export function countingInterceptor(records: Records): ActivityInterceptorsFactory {
  return (ctx) => {
    if (!ctx.info.activityType.startsWith('job')) return {};
    const inbound: ActivityInboundCallsInterceptor = {
      execute: async (input, next) => {
        const started = performance.now();
        const store = { dispatched: false };
        try {
          return await running.run(store, () => next(input));
        } finally {
          const scope = String(input.args[0]);
          records.executions.push({ scope, ms: performance.now() - started, dispatched: store.dispatched });
        }
      },
    };
    return { inbound };
  };
}
