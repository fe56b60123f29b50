import { randomUUID } from 'node:crypto';
import { CompleteAsyncError, Context } from '@temporalio/activity';
import { Worker } from '@temporalio/worker';
import { FireOncePlugin, fireOnce, type FireOncePluginOptions } from '../../src';
import { counterKey, type JobResult } from './fixtures/activities';
import { waitFor } from '../support/wait';
import { newScope, useFeatures, type FeatureContext } from '../support/features';

// A guarded job that throws CompleteAsyncError: the activity dispatches, gives its slot back, and
// someone completes it later with client.activity.complete(taskToken, result). The guard never
// sees that completion.
describe('Temporal features: async activity completion', () => {
  const { context } = useFeatures('async');

  /** A worker whose guarded `asyncJob` counts its dispatch, leaves its task token in Redis and completes asynchronously. */
  async function withAsyncWorker<T>(
    artifact: 'result' | 'external',
    options: Partial<FireOncePluginOptions>,
    scenario: (ctx: FeatureContext, plugin: FireOncePlugin, tokens: (scope: string, n: number) => Promise<Buffer[]>) => Promise<T>,
  ): Promise<T> {
    const { ctx, base } = context();
    const plugin = new FireOncePlugin({ redis: ctx.redis, keyPrefix: ctx.prefix, pollIntervalMs: 50, ...options });
    const tokensKey = (scope: string) => `${ctx.prefix}:tokens:${scope}`;
    const job = async (scope: string): Promise<void> => {
      await ctx.redis.incr(counterKey(ctx.prefix, 'asyncJob', scope));
      await ctx.redis.rpush(tokensKey(scope), Buffer.from(Context.current().info.taskToken));
      throw new CompleteAsyncError();
    };
    const external = fireOnce(job, { artifact: { external: ({ scope, jobType, namespace }) => plugin.guard.keysFor(namespace).external(scope, jobType) } });
    const worker = await Worker.create({
      connection: base.connection,
      taskQueue: ctx.taskQueue,
      workflowBundle: base.workflowBundle,
      activities: { asyncJob: artifact === 'result' ? fireOnce(job) : external },
      plugins: [plugin],
    });
    /** The task tokens of the first `n` dispatches in `scope`, once there are that many. */
    const tokens = async (scope: string, n: number) => {
      await waitFor(`${n} dispatch(es) of asyncJob in ${scope}`, async () => (await ctx.redis.llen(tokensKey(scope))) >= n);
      return ctx.redis.lrangeBuffer(tokensKey(scope), 0, n - 1);
    };
    return worker.runUntil(scenario(ctx, plugin, tokens));
  }

  /** Resolve once `n` waiters are parked on the lock of `asyncJob` in `scope`. */
  const parked = (ctx: FeatureContext, plugin: FireOncePlugin, scope: string, n: number) =>
    waitFor(`${n} waiter(s) parked in ${scope}`, async () => (await ctx.redis.llen(plugin.guard.keysFor('default').waiters(scope, 'asyncJob'))) >= n);

  it("'result' mode: the result completed from outside is never stored; each run waits for the lock to expire and dispatches again, 3 runs, 3 dispatches", () =>
    withAsyncWorker('result', { leaseMs: 5_000, lockTtlMs: 600_000 }, async (ctx, plugin, tokens) => {
      const scope = newScope('async');
      const keys = plugin.guard.keysFor('default');
      const lockKey = keys.lock(scope, 'asyncJob');
      /** Once the n-th dispatch holds its lock for lockTtlMs (beyond its 5 s lease), bring the expiry forward: no test waits 10 minutes. */
      const expireLock = async (n: number) => {
        await tokens(scope, n);
        await waitFor(`the hold after dispatch ${n}`, async () => (await ctx.redis.pttl(lockKey)) > 5_000);
        await ctx.redis.pexpire(lockKey, 1);
      };
      const first = await ctx.start('asyncRun', [scope]);
      const [token] = await tokens(scope, 1);
      const pending = await ctx.start('asyncRun', [scope]); // started while the job is pending
      await parked(ctx, plugin, scope, 1);
      const completed: JobResult = { scope, nonce: randomUUID() };
      await ctx.client.activity.complete(token!, completed);
      expect(await first.result()).toEqual(completed);
      // Completed, yet nothing stored: the lock stands for lockTtlMs, and so does the wait.
      expect({ artifact: await ctx.redis.exists(keys.artifact(scope, 'asyncJob')), heldBeyondLease: (await ctx.redis.pttl(lockKey)) > 5_000 }).toEqual({
        artifact: 0,
        heldBeyondLease: true,
      });
      const after = await ctx.start('asyncRun', [scope]); // started after the completion
      await parked(ctx, plugin, scope, 2);
      // The lock expires; both waiters are failed so that they retry: one dispatches again and
      // completes asynchronously too, so the other waits for that lock as well, and dispatches.
      await expireLock(1);
      await expireLock(2);
      const redone = [0, 1].map(() => ({ scope, nonce: randomUUID() }));
      const [, second, third] = await tokens(scope, 3);
      await ctx.client.activity.complete(second!, redone[0]);
      await ctx.client.activity.complete(third!, redone[1]);
      expect(new Set(await Promise.all([pending.result(), after.result()]))).toEqual(new Set(redone));
      expect(await ctx.count('asyncJob', scope)).toBe(3);
    }));

  it('external-artifact mode: the completer writes the key, the waiting run is completed at once and a later one fast-forwards: one dispatch', () =>
    withAsyncWorker('external', {}, async (ctx, plugin, tokens) => {
      const scope = newScope('async-ext');
      const first = await ctx.start('asyncRun', [scope]);
      const [token] = await tokens(scope, 1);
      const second = await ctx.start('asyncRun', [scope]);
      await parked(ctx, plugin, scope, 1);
      // The completer: the job's own artifact first, then the activity (lockTtlMs is 15 minutes here).
      await ctx.redis.set(plugin.guard.keysFor('default').external(scope, 'asyncJob'), 'done');
      await ctx.client.activity.complete(token!, undefined);
      expect(await Promise.all([first.result(), second.result()])).toEqual([undefined, undefined]);
      expect(await (await ctx.start('asyncRun', [scope])).result()).toBeUndefined();
      expect(await ctx.count('asyncJob', scope)).toBe(1);
    }));
});
