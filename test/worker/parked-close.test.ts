import { performance } from 'node:perf_hooks';
import { CompleteAsyncError } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, type Worker } from '@temporalio/worker';
import { FireOncePlugin, fireOnce } from '../../src';
import { FireOnceKeys } from '../../src/core';
import { useGuardFixture } from '../support/redis';
import { writeLock } from '../support/records';

// When its last worker stops, the plugin fails the waiters its workers parked so that they retry
// at once (ParkedWatch.close), through the worker's Temporal client, and gives Temporal at most
// 10 s to take those failures. Here the client's calls never return (a Temporal that takes the
// request and never answers): the worker must still stop, at the bound, and say what it left.
// Under jest's fake clock (timers and Date only, real Redis I/O), so the bound is checked to the
// millisecond without waiting 10 s.
describe("a stopping worker, and a Temporal that never answers its parked waiters' failures", () => {
  const BOUND_MS = 10_000;
  const fx = useGuardFixture('parked-close');
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it("runWorker resolves 10 s after the worker's body ends, not before, and WARNs how many of its waiters' failures went unanswered", async () => {
    const warn = jest.spyOn(Runtime.instance().logger, 'warn').mockImplementation(() => undefined);
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask', 'performance'] });
    const { redis, prefix } = fx;
    const plugin = new FireOncePlugin({ redis, keyPrefix: prefix, dispatchLog: false });
    const activities = { job: fireOnce(async (scope: string) => `job of ${scope}`, { scope: ([scope]: [string]) => scope }) };
    const { interceptors } = plugin.configureWorker({ taskQueue: 'parked-close', activities });

    // The worker's Temporal client: it answers the failure of waiter-1, and takes waiter-2's and never answers.
    const failed: string[] = [];
    let bothFailed!: () => void;
    const failing = new Promise<void>((resolve) => (bothFailed = resolve));
    const client = {
      withAbortSignal: (_signal: AbortSignal, fn: () => unknown) => fn(),
      activity: {
        fail: (token: Uint8Array) => {
          const waiter = Buffer.from(token).toString();
          if (failed.push(waiter) === 2) bothFailed();
          return waiter === 'waiter-1' ? Promise.resolve() : new Promise(() => undefined);
        },
      },
    } as unknown as Client;

    // Another worker's holder has the lock: two activities of this worker park on it, and the worker stops.
    await writeLock(redis, new FireOnceKeys(prefix).lock('s', 'job'), 'another-holder', { ttlMs: 600_000 });
    let stopped = false;
    const run = plugin
      .runWorker({} as Worker, async () => {
        for (const token of ['waiter-1', 'waiter-2']) {
          const env = new MockActivityEnvironment(
            { namespace: 'default', activityType: 'job', taskToken: Buffer.from(token), startToCloseTimeoutMs: 600_000 },
            { client, interceptors: interceptors?.activity, logger: new DefaultLogger('ERROR') },
          );
          await expect(env.run(activities.job, 's')).rejects.toBeInstanceOf(CompleteAsyncError); // parked
        }
      })
      .then(() => (stopped = true));
    await failing; // the stopping worker asked Temporal to fail both
    expect(failed.sort()).toEqual(['waiter-1', 'waiter-2']);

    await jest.advanceTimersByTimeAsync(BOUND_MS - 1);
    expect({ after: `${BOUND_MS - 1} ms`, stopped }).toEqual({ after: `${BOUND_MS - 1} ms`, stopped: false });
    await jest.advanceTimersByTimeAsync(1);
    // What is left after the bound (closing the subscriber) takes a few turns of real I/O at most.
    for (const deadline = performance.now() + 5_000; !stopped && performance.now() < deadline;) await new Promise((r) => setImmediate(r));
    expect({ after: `${BOUND_MS} ms`, stopped }).toEqual({ after: `${BOUND_MS} ms`, stopped: true });
    await run;
    expect(warn).toHaveBeenCalledWith(
      expect.stringMatching(/^fire-once: 1 parked waiters' failures had no answer from Temporal within 10000 ms as the last worker stopped/),
      { unanswered: 1 },
    );
  });
});
