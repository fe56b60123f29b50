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

  it('fires once across runs: one dispatches, one waits for it, a later one fast-forwards', async () => {
    const { redis, prefix } = fx;
    const taskQueue = `fire-once-local-${randomUUID()}`;
    const counter = `${prefix}:dispatches:${randomUUID()}`;
    const activities = {
      summarise: fireOnce(async (label: string, jobMs: number): Promise<string> => {
        const n = await redis.incr(counter); // counted outside the guard
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
    const client = new Client({ connection: fx.connection });
    const scope = `session-${randomUUID()}`;
    const start = (n: string) =>
      client.workflow.execute('localStepRun', { taskQueue, workflowId: `local-${n}-${randomUUID()}`, args: [scope, 'summary', 800] });
    const seen = await worker.runUntil(async () => {
      const [first, waited] = await Promise.all([start('first'), new Promise((r) => setTimeout(r, 200)).then(() => start('waited'))]);
      return [first, waited, await start('later')];
    });
    expect(seen).toEqual(['summary #1', 'summary #1', 'summary #1']);
    expect(Number(await redis.get(counter))).toBe(1);
  });
});
