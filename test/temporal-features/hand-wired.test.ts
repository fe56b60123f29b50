import { FireOnceKeys, parseEvent, type DispatchEvent } from '../../src/core';
import { newScope, oneResult, twoRunsThenOne, useFeatures, type FeatureContext } from '../support/features';
import { startScript } from '../support/scripts';
import { firstActivityAttempt } from '../support/temporal';
import { waitFor } from '../support/wait';
import { FAILS_ONCE, startHandWiredWorker, type HandWiredWorker } from './fixtures/hand-wired';

// docs/usage.md "Wiring by hand" end to end on the Temporal dev server: two workers wired as its
// snippet says (one loads a bundle built with workflowInterceptorModules, one bundles its
// workflowsPath with them as interceptors.workflowModules), on one task queue and one Redis, and
// then closed as "What you build, you close" says. Dispatches are counted by the job bodies.

const JOB_MS = 1_500;
const WORKFLOWS = require.resolve('./fixtures/workflows');

describe('hand-wired workers, as docs/usage.md wires and closes them', () => {
  const { context } = useFeatures('handwired');
  let ctx: FeatureContext;
  let wired: HandWiredWorker[] = [];
  let runs: Promise<void>[] = [];
  /** Every scope a test dispatched in, for the dispatch log's check at the end. */
  const scopes: string[] = [];
  const scoped = (name: string) => {
    const scope = newScope(name);
    scopes.push(scope);
    return scope;
  };

  beforeAll(async () => {
    const fresh = context();
    ctx = fresh.ctx;
    const common = { redisUrl: process.env.REDIS_URL!, temporalAddress: process.env.TEMPORAL_ADDRESS!, taskQueue: ctx.taskQueue, keyPrefix: ctx.prefix };
    wired = await Promise.all([
      startHandWiredWorker({ ...common, workflows: { workflowBundle: fresh.base.workflowBundle } }),
      startHandWiredWorker({ ...common, workflows: { workflowsPath: WORKFLOWS } }),
    ]);
    runs = wired.map((w) => w.worker.run());
  });

  let closed = false;
  /** Stop both workers, then close what was built for them, as the docs say. */
  async function stopAndClose(): Promise<number[]> {
    closed = true;
    for (const w of wired) if (w.worker.getState() === 'RUNNING') w.worker.shutdown();
    await Promise.allSettled(runs);
    return Promise.all(wired.map((w) => w.close()));
  }

  // Only if a test failed before the one that stops them: left open, they would keep jest from exiting.
  afterAll(async () => void (closed || (await stopAndClose())));

  it('racing runs of one scope: 1 dispatch, and every run gets its result', async () => {
    const scope = scoped('race');
    oneResult(await twoRunsThenOne(ctx, 'dispatchRun', scope, JOB_MS), scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(1);
  });

  it('a failed dispatch releases the lock, and the retry dispatches again: 2 dispatches', async () => {
    const scope = scoped(FAILS_ONCE);
    const result = await (await ctx.start('retriedRun', [scope, 0, 'dispatchJob'])).result();
    expect(result.scope).toBe(scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(2);
    expect(await ctx.count('dispatchJob', scope, 'finished')).toBe(1);
    expect(await ctx.redis.exists(new FireOnceKeys(ctx.prefix).lock(scope, 'dispatchJob'))).toBe(0);
    oneResult([result, await (await ctx.start('dispatchRun', [scope, 0])).result()], scope); // and a later run fast-forwards
    expect(await ctx.count('dispatchJob', scope)).toBe(2);
  });

  it('parked waiters, watched by their worker’s ParkedWatch, are completed with the holder’s result by its commit', async () => {
    const scope = scoped('parked');
    const options = { job: 'dispatchJob', heartbeatTimeoutMs: 5_000 } as const;
    const holder = await ctx.start('parkableRun', [scope, JOB_MS * 2, options]);
    await ctx.started('dispatchJob', scope);
    const waiters = await Promise.all([0, 1, 2].map(() => ctx.start('parkableRun', [scope, JOB_MS * 2, options])));
    await waitFor('3 parked waiters', async () => (await ctx.redis.llen(new FireOnceKeys(ctx.prefix).waiters(scope, 'dispatchJob'))) === 3);
    const results = await Promise.all([holder, ...waiters].map(async (h) => (await h.result()).result!));
    oneResult(results, scope);
    expect(await ctx.count('dispatchJob', scope)).toBe(1);
    // Completed by the hand-over on the attempt that parked, not by a timeout and a retry that fast-forwarded.
    expect(await Promise.all(waiters.map(firstActivityAttempt))).toEqual([1, 1, 1]);
  });

  it('continue-as-new keeps the scope: the next run fast-forwards, 1 dispatch', async () => {
    const scope = scoped('can');
    const runs = await (await ctx.start('continueAsNewRun', [scope, 0, 2, []])).result();
    expect(runs.map((r) => r.inheritedScope)).toEqual([undefined, scope]);
    oneResult(
      runs.map((r) => r.result),
      scope,
    );
    expect(await ctx.count('dispatchJob', scope)).toBe(1);
  });

  it('once the workers stop, closing what the docs say leaves the dispatch log with every decision', async () => {
    expect(await stopAndClose()).toEqual([0, 0]); // every entry answered by Redis
    const entries = (await ctx.redis.xrange(new FireOnceKeys(ctx.prefix).log(), '-', '+')).map(([, fields]) => parseEvent(fields));
    const [race, failsOnce, parked, can] = scopes.map((scope) => countBy(entries.filter((e) => e.scope === scope)));
    // The second racing run waited in its slot, unless it started only once the first had committed.
    const waited = race['in-flight-waited'] === undefined ? {} : { 'in-flight-waited': 1 };
    expect({ race, failsOnce, parked, can }).toEqual({
      race: { dispatched: 1, committed: 1, ...waited, 'fast-forwarded': 2 },
      failsOnce: { dispatched: 2, 'released-on-failure': 1, committed: 1, 'fast-forwarded': 1 },
      parked: { dispatched: 1, 'in-flight-parked': 3, committed: 1 },
      can: { dispatched: 1, committed: 1, 'fast-forwarded': 1 },
    });
  });

  it('a hand-wired worker process closed as the docs say exits by itself: nothing left open', async () => {
    const { ctx: own } = context();
    const worker = startScript('test/temporal-features/fixtures/hand-wired-worker.ts', [], {
      REDIS_URL: process.env.REDIS_URL!,
      TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS!,
      TASK_QUEUE: own.taskQueue,
      KEY_PREFIX: own.prefix,
      WORKFLOWS_PATH: WORKFLOWS,
    });
    try {
      await worker.waitFor('READY');
      const scope = newScope('process');
      oneResult(await twoRunsThenOne(own, 'dispatchRun', scope, 200), scope);
      const exited = worker.interrupt();
      await waitFor('the worker process to exit by itself once it has closed', async () => worker.child.exitCode !== null, { timeoutMs: 20_000, everyMs: 100 });
      expect({ code: await exited, closed: worker.stdout().includes('CLOSED unanswered=0') }).toEqual({ code: 0, closed: true });
    } finally {
      await worker.stop();
    }
  });
});

/** How many entries of each decision. */
function countBy(entries: readonly DispatchEvent[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of entries) counts[e.decision] = (counts[e.decision] ?? 0) + 1;
  return counts;
}
