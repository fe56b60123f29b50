import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { Client, type WorkflowHandle } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { FireOncePlugin, fireOnce } from '../../src';
import { FireOnceKeys } from '../../src/core';
import { useWorkerFixture } from '../support/temporal';
import { waitFor } from '../support/wait';

// A parked waiter is heartbeated every third of its heartbeat timeout even when the worker's
// pollIntervalMs (how often it reaps) is far longer: else its first attempt times out while it waits.
describe('parked waiters under a heartbeat timeout shorter than pollIntervalMs', () => {
  const fx = useWorkerFixture('park-beat');

  /** A worker whose one guarded job heartbeats for `jobMs` and counts its dispatches outside the guard. */
  async function setUp(jobMs: number) {
    const { redis, prefix } = fx;
    const taskQueue = `fire-once-park-beat-${randomUUID()}`;
    const counter = `${prefix}:dispatches:${randomUUID()}`;
    const activities = {
      summarise: fireOnce(async (label: string, ms: number): Promise<string> => {
        const n = await redis.incr(counter); // counted outside the guard
        // The job heartbeats itself, as any activity under a heartbeat timeout must.
        for (const end = Date.now() + ms; Date.now() < end;) {
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
      client.workflow.start('heartbeatStepRun', { taskQueue, workflowId: `park-beat-${n}-${randomUUID()}`, args: [scope, 'summary', jobMs] });
    return { redis, worker, client, counter, scope, start };
  }

  it('live through a 3 s job with a 1 s heartbeat timeout and a 5 s pollIntervalMs, and get its result on their first attempt', async () => {
    const { redis, worker, counter, start } = await setUp(3_000);
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

  it('a parked waiter paused with `temporal activity pause` fails its attempt at once, as a running activity does, and completes once unpaused', async () => {
    const { redis, worker, client, counter, scope, start } = await setUp(6_000);
    const waitersKey = new FireOnceKeys(fx.prefix).waiters(scope, 'summarise');
    const pendingOf = async (h: WorkflowHandle) => (await h.describe()).raw.pendingActivities?.[0];
    const pace = { timeoutMs: 20_000, everyMs: 50 };
    const [results, whyPaused] = await worker.runUntil(async () => {
      const holder = await start('holder');
      await waitFor('the holder to dispatch', async () => Number(await redis.get(counter)) === 1, pace);
      const waiter = await start('w1');
      await waitFor('the waiter to park', async () => (await redis.llen(waitersKey)) === 1, pace);
      const activity = { namespace: 'default', execution: { workflowId: waiter.workflowId }, id: '1', identity: 'fire-once test' };
      await client.workflowService.pauseActivity(activity);
      // Its worker's next heartbeat (every third of the 1 s timeout) hears of the pause.
      await waitFor('the paused attempt to end', async () => (await pendingOf(waiter))?.lastFailure != null, pace);
      const failure = (await pendingOf(waiter))?.lastFailure;
      const why = failure?.applicationFailureInfo?.type ?? (failure?.timeoutFailureInfo ? 'timeout' : 'other');
      await client.workflowService.unpauseActivity(activity);
      return [await Promise.all([holder, waiter].map((h) => h.result())), why];
    });
    expect(whyPaused).toBe('ActivityPause'); // not its heartbeat timeout
    expect(results).toEqual(['summary #1', 'summary #1']);
    expect(Number(await redis.get(counter))).toBe(1);
  });
});
