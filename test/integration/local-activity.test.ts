import { randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { FireOncePlugin, fireOnce } from '../../src';
import { useWorkerFixture } from '../support/temporal';

// The guard runs on local activities too: the workflow interceptor carries the scope into a local
// activity's header and the worker's activity interceptor guards it. The Temporal-native idiom
// cannot do this (its job is always a workflow plus an activity): docs/when-to-use.md.
describe('a guarded local activity on a real worker', () => {
  const fx = useWorkerFixture('local');

  /** A worker on its own task queue whose guarded job counts its runs in Redis, outside the guard. */
  async function setUp(name: string): Promise<{ worker: Worker; taskQueue: string; counter: string }> {
    const { redis, prefix } = fx;
    const taskQueue = `fire-once-${name}-${randomUUID()}`;
    const counter = `${prefix}:dispatches:${randomUUID()}`;
    const activities = {
      summarise: fireOnce(async (label: string, jobMs: number): Promise<string> => {
        const n = await redis.incr(counter);
        await new Promise((r) => setTimeout(r, jobMs));
        return `${label} #${n}`;
      }),
    };
    const worker = await Worker.create({
      connection: fx.native,
      taskQueue,
      workflowsPath: require.resolve('./fixtures/local/workflows'),
      activities,
      plugins: [new FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 50 })],
    });
    return { worker, taskQueue, counter };
  }

  it('fires once across runs: one dispatches, one waits for it, a later one fast-forwards', async () => {
    const { worker, taskQueue, counter } = await setUp('local');
    const client = new Client({ connection: fx.connection });
    const scope = `session-${randomUUID()}`;
    const start = (n: string) =>
      client.workflow.execute('localStepRun', { taskQueue, workflowId: `local-${n}-${randomUUID()}`, args: [scope, 'summary', 800] });
    const seen = await worker.runUntil(async () => {
      const [first, waited] = await Promise.all([start('first'), new Promise((r) => setTimeout(r, 200)).then(() => start('waited'))]);
      return [first, waited, await start('later')];
    });
    expect(seen).toEqual(['summary #1', 'summary #1', 'summary #1']);
    expect(Number(await fx.redis.get(counter))).toBe(1);
  });

  it("gives each retry of a waiting local activity its own attempt's time, not the first attempt's", async () => {
    const { worker, taskQueue, counter } = await setUp('local-retry');
    const client = new Client({ connection: fx.connection });
    const scope = `session-${randomUUID()}`;
    // The job runs 3 s. The waiter's attempts have 1.5 s each, so its first two give up at their
    // deadlines and its third finds the result. Timed from the first attempt's schedule instead,
    // every retry would be past its deadline at once, and the six attempts would end in under 2 s.
    const run = (n: string, startToCloseMs: number, attempts: number) =>
      client.workflow.execute('localStepRunRetried', {
        taskQueue,
        workflowId: `local-retry-${n}-${randomUUID()}`,
        args: [scope, 'summary', 3_000, startToCloseMs, attempts],
      });
    const seen = await worker.runUntil(() =>
      Promise.all([run('first', 20_000, 1), new Promise((r) => setTimeout(r, 300)).then(() => run('waited', 1_500, 6))]),
    );
    expect(seen).toEqual(['summary #1', 'summary #1']);
    expect(Number(await fx.redis.get(counter))).toBe(1);
  });
});
