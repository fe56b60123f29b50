import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { FireOncePlugin, fireOnce } from '../../src';
import { useWorkerFixture } from '../support/temporal';

// A parked waiter is heartbeated every third of its heartbeat timeout even when the worker's
// pollIntervalMs (how often it reaps) is far longer: else its first attempt times out while it waits.
describe('parked waiters under a heartbeat timeout shorter than pollIntervalMs', () => {
  const fx = useWorkerFixture('park-beat');

  it('live through a 3 s job with a 1 s heartbeat timeout and a 5 s pollIntervalMs, and get its result on their first attempt', async () => {
    const { redis, prefix } = fx;
    const taskQueue = `fire-once-park-beat-${randomUUID()}`;
    const counter = `${prefix}:dispatches:${randomUUID()}`;
    const activities = {
      summarise: fireOnce(async (label: string, jobMs: number): Promise<string> => {
        const n = await redis.incr(counter); // counted outside the guard
        // The job heartbeats itself, as any activity under a heartbeat timeout must.
        for (const end = Date.now() + jobMs; Date.now() < end;) {
          Context.current().heartbeat();
          await new Promise((r) => setTimeout(r, 200));
        }
        return `${label} #${n}`;
      }),
    };
    const worker = await Worker.create({
      connection: fx.native,
      taskQueue,
      workflowsPath: require.resolve('./fixtures/heartbeat/workflows'),
      activities,
      plugins: [new FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 5_000 })],
    });
    const client = new Client({ connection: fx.connection });
    const scope = `session-${randomUUID()}`;
    const start = (n: string) =>
      client.workflow.start('heartbeatStepRun', { taskQueue, workflowId: `park-beat-${n}-${randomUUID()}`, args: [scope, 'summary', 3_000] });
    const [seen, attempts] = await worker.runUntil(async () => {
      const holder = await start('holder');
      while (Number(await redis.get(counter)) === 0) await new Promise((r) => setTimeout(r, 25));
      const waiters = await Promise.all([start('w1'), start('w2')]);
      const results = await Promise.all([holder, ...waiters].map((h) => h.result()));
      const firstAttempts = await Promise.all(
        waiters.map(
          async (h) => (await h.fetchHistory()).events?.find((e) => e.activityTaskStartedEventAttributes)?.activityTaskStartedEventAttributes?.attempt,
        ),
      );
      return [results, firstAttempts];
    });
    expect(seen).toEqual(['summary #1', 'summary #1', 'summary #1']);
    expect(attempts).toEqual([1, 1]); // completed by the commit's hand-over, not after a heartbeat timeout
    expect(Number(await redis.get(counter))).toBe(1);
  });
});
