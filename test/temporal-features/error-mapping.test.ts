import { randomUUID } from 'node:crypto';
import { CompleteAsyncError } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, Next } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { fireOnce } from '../../src';
import { FireOnceKeys } from '../../src/core';
import { firstActivityAttempt } from '../support/temporal';
import { waitFor } from '../support/wait';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';
import { counterKey, type JobResult } from './fixtures/activities';

// docs/parked-waiters.md, step 1: an activity interceptor of the user's own, given in
// WorkerOptions (so outside the plugin's), that maps every error to an ApplicationFailure must
// rethrow CompleteAsyncError, the way a parked waiter gives its slot back. Both kinds run here on
// a real worker, with retriedRun's waiters (retries allowed, so they park) on a holder whose job
// runs until the test opens its gate: no timing decides what is observed.
describe('Temporal features: an error-mapping activity interceptor outside the plugin', () => {
  const { withWorker } = useFeatures('mapping');

  /** Maps every error of the activities inside it to a retryable `MappedError`; with `rethrowCompleteAsync`, all but CompleteAsyncError. */
  const mapping = (rethrowCompleteAsync: boolean): ActivityInboundCallsInterceptor => ({
    async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
      try {
        return await next(input);
      } catch (err) {
        if (rethrowCompleteAsync && err instanceof CompleteAsyncError) throw err;
        throw ApplicationFailure.create({ type: 'MappedError', message: `mapped: ${(err as Error).message}` });
      }
    },
  });

  const gateKey = (ctx: FeatureContext, scope: string) => `${ctx.prefix}:gate:${scope}`;
  /** dispatchJob, counted as the fixture's, that ends once the test sets its scope's gate key. */
  const gatedDispatchJob = (redis: Redis, prefix: string) =>
    fireOnce(async (scope: string): Promise<JobResult> => {
      await redis.incr(counterKey(prefix, 'dispatchJob', scope));
      while (!(await redis.exists(`${prefix}:gate:${scope}`))) await new Promise((r) => setTimeout(r, 20));
      return { scope, nonce: randomUUID() };
    });

  const run = (rethrowCompleteAsync: boolean, scenario: (ctx: FeatureContext) => Promise<void>) =>
    withWorker(async (ctx) => scenario(ctx), {
      worker: {
        interceptors: { activity: [() => ({ inbound: mapping(rethrowCompleteAsync) })] },
      },
      activities: (redis, prefix) => ({ dispatchJob: gatedDispatchJob(redis, prefix) }),
    });

  /** The holder dispatched, and three runs of the same scope after it. */
  const holderAndWaiters = async (ctx: FeatureContext, scope: string) => {
    const holder = await ctx.start('retriedRun', [scope, 0, 'dispatchJob']);
    await ctx.started('dispatchJob', scope);
    const waiters = await Promise.all([1, 2, 3].map(() => ctx.start('retriedRun', [scope, 0, 'dispatchJob'])));
    return { holder, waiters };
  };
  const attempt = async (h: WorkflowHandle) => (await h.describe()).raw.pendingActivities?.[0]?.attempt ?? 0;
  const lastFailureType = async (h: WorkflowHandle) => (await h.describe()).raw.pendingActivities?.[0]?.lastFailure?.applicationFailureInfo?.type;

  it('one that rethrows CompleteAsyncError keeps parking intact: the waiters park once and get the one dispatch’s result', () =>
    run(true, async (ctx) => {
      const scope = newScope('rethrows');
      const { holder, waiters } = await holderAndWaiters(ctx, scope);
      const parked = () => ctx.redis.llen(new FireOnceKeys(ctx.prefix).waiters(scope, 'dispatchJob'));
      await waitFor('the 3 waiters to park', async () => (await parked()) === 3);
      expect(await Promise.all(waiters.map(attempt))).toEqual([1, 1, 1]);

      await ctx.redis.set(gateKey(ctx, scope), '1');
      oneResult(await Promise.all([holder, ...waiters].map((h) => h.result())), scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
      // Completed on the attempt that parked: no failed attempt, no backoff.
      expect(await Promise.all(waiters.map(firstActivityAttempt))).toEqual([1, 1, 1]);
    }));

  it('one that maps CompleteAsyncError fails every parked attempt, which retries and parks again: still one dispatch', () =>
    run(false, async (ctx) => {
      const scope = newScope('maps');
      const { holder, waiters } = await holderAndWaiters(ctx, scope);
      await waitFor('each waiter to be on a later attempt', async () => (await Promise.all(waiters.map(attempt))).every((n) => n >= 2));
      expect(await Promise.all(waiters.map(lastFailureType))).toEqual(['MappedError', 'MappedError', 'MappedError']);

      await ctx.redis.set(gateKey(ctx, scope), '1');
      oneResult(await Promise.all([holder, ...waiters].map((h) => h.result())), scope);
      expect(await ctx.count('dispatchJob', scope)).toBe(1);
      expect((await Promise.all(waiters.map(firstActivityAttempt))).every((n) => (n ?? 0) >= 2)).toBe(true);
    }));
});
