import { ApplicationFailure, CancelledFailure, RawValue, defaultPayloadConverter } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOnceConfigError, FireOnceGuard, fireOnce } from '../../src';
import { WakeHub, createFireOnceActivityInterceptor, fireOnceActivityMap } from '../../src/core';
import { HAND_OFF_HEADER, handOffOf } from '../../src/common/hand-off';
import { payloadToBytes } from '../../src/worker/artifact';
import { useGuardFixture } from '../support/redis';
import { waitFor } from '../support/wait';

// The worker's side of the hand-off (src/common/hand-off.ts): a local activity marked by the
// plugin's workflow interceptor, waiting in its slot for another holder, ends with the
// non-retryable FireOnceWorkerShutdown once its worker's `workerStopping` aborts. Nothing else
// does: an unmarked local activity (a bundle built before 0.9.0) and a remote activity wait on.
// The end to end run, with the workflow side, is test/temporal-features/local-activity-shutdown.test.ts.
describe('a waiting local activity whose worker begins to shut down (MockActivityEnvironment)', () => {
  const fx = useGuardFixture('handoff', { lockTtlMs: 60_000 });
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  let wake: WakeHub;
  beforeEach(() => {
    ({ redis, prefix, guard } = fx);
    wake = new WakeHub(redis);
  });
  afterEach(() => wake.close());

  /** A counter the guard does not own: INCR inside the activity body. */
  const count = async () => Number((await redis.get(`${prefix}:counter`)) ?? 0);
  const activities = {
    job: fireOnce(
      async (): Promise<string> => {
        await redis.incr(`${prefix}:counter`);
        return 'mine';
      },
      { scope: ([scope]: [string]) => scope } as never,
    ),
  };

  /** Sets the hand-off header on the call, as the plugin's workflow interceptor does (MockActivityEnvironment passes none). */
  const marked: ActivityInterceptorsFactory = () => ({
    inbound: { execute: (input, next) => next({ ...input, headers: { ...input.headers, [HAND_OFF_HEADER]: defaultPayloadConverter.toPayload(true) } }) },
  });

  const interceptor = (stopping: AbortController) =>
    createFireOnceActivityInterceptor({
      guard,
      activities: fireOnceActivityMap(activities),
      onInFlight: 'wait',
      pollIntervalMs: 20,
      wake,
      workerStopping: stopping.signal,
    });

  /** A waiter on worker `stopping`: local or not, marked or not. */
  function waiter(stopping: AbortController, options: { local: boolean; mark: boolean }) {
    const env = new MockActivityEnvironment(
      { namespace: 'default', activityType: 'job', isLocal: options.local, startToCloseTimeoutMs: 10_000, currentAttemptScheduledTimestampMs: Date.now() },
      { interceptors: options.mark ? [marked, interceptor(stopping)] : [interceptor(stopping)] },
    );
    return env.run(activities.job, 's').catch((err: unknown) => err);
  }

  const holdLock = async () => {
    const holder = await guard.acquire({ scope: 's', step: 'job', jobType: 'job' });
    if (holder.kind !== 'acquired') throw new Error('expected acquired');
    return holder.lease;
  };
  /** Resolves once the waiter waits: it has subscribed to the scope's wake channel. */
  const waiting = () =>
    waitFor('the waiter to wait on the wake channel', async () => {
      const [, subscribers] = (await redis.pubsub('NUMSUB', guard.keys.wakeChannel('s'))) as [string, number];
      return Number(subscribers) === 1;
    });
  const decode = (value: unknown) => defaultPayloadConverter.fromPayload((value as RawValue).payload);

  it('a marked local activity ends its wait at once with the non-retryable FireOnceWorkerShutdown; the holder keeps its lock, nothing is dispatched', async () => {
    await holdLock();
    const lock = await redis.get(guard.keys.lock('s', 'job'));
    const stopping = new AbortController();
    const ended = waiter(stopping, { local: true, mark: true });
    await waiting();
    stopping.abort();
    const failure = await ended;
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect([(failure as ApplicationFailure).type, (failure as ApplicationFailure).nonRetryable]).toEqual(['FireOnceWorkerShutdown', true]);
    // What the workflow interceptor reads of it: the hand-off of attempt 1.
    expect(handOffOf(failure as ApplicationFailure)).toEqual({ attempt: 1 });
    expect(await redis.get(guard.keys.lock('s', 'job'))).toBe(lock);
    expect(await count()).toBe(0);
  });

  it('one that starts on a worker already shutting down, and finds the lock held, ends the same way', async () => {
    await holdLock();
    const stopping = new AbortController();
    stopping.abort();
    expect(((await waiter(stopping, { local: true, mark: true })) as ApplicationFailure).type).toBe('FireOnceWorkerShutdown');
    expect(await count()).toBe(0);
  });

  it.each([
    ['an unmarked local activity (its workflow cannot take the wait back)', { local: true, mark: false }],
    ['a remote activity (the SDK cancels it after shutdownGraceTime)', { local: false, mark: true }],
  ])('%s waits on, and gets the holder’s result', async (_, options) => {
    const lease = await holdLock();
    const stopping = new AbortController();
    const result = waiter(stopping, options);
    await waiting();
    stopping.abort();
    await new Promise((r) => setTimeout(r, 100)); // five polls: still waiting
    await guard.commit(lease, payloadToBytes(defaultPayloadConverter.toPayload('theirs')));
    expect(decode(await result)).toBe('theirs');
    expect(await count()).toBe(0);
  });

  it('a cancellation that comes first ends the wait as a cancellation, not a hand-off', async () => {
    await holdLock();
    const stopping = new AbortController();
    const env = new MockActivityEnvironment(
      { namespace: 'default', activityType: 'job', isLocal: true, startToCloseTimeoutMs: 10_000 },
      { interceptors: [marked, interceptor(stopping)] },
    );
    const ended = env.run(activities.job, 's').catch((err: unknown) => err);
    await waiting();
    env.cancel();
    stopping.abort();
    expect(await ended).toBeInstanceOf(CancelledFailure);
    expect(await count()).toBe(0);
  });

  /**
   * A `workerStopping` not made by Node's own AbortController (a polyfill's, a framework's), which
   * the interceptor takes, keeping count of the listeners it holds.
   */
  class OwnSignal extends EventTarget {
    aborted = false;
    reason: unknown;
    readonly listeners = new Set<unknown>();
    override addEventListener(...args: Parameters<EventTarget['addEventListener']>): void {
      this.listeners.add(args[1]);
      super.addEventListener(...args);
    }
    override removeEventListener(...args: Parameters<EventTarget['removeEventListener']>): void {
      this.listeners.delete(args[1]);
      super.removeEventListener(...args);
    }
  }
  const ownController = () => {
    const signal = new OwnSignal();
    const abort = () => ((signal.aborted = true), (signal.reason = new Error('stopping')), signal.dispatchEvent(new Event('abort')));
    return { signal, abort } as unknown as AbortController & { signal: OwnSignal };
  };

  it('takes a workerStopping of its own kind, and once each wait ends holds no listener on it: the worker keeps nothing of its waits', async () => {
    const stopping = ownController();
    const lease = await holdLock();
    const result = waiter(stopping, { local: true, mark: true });
    await waiting();
    await guard.commit(lease, payloadToBytes(defaultPayloadConverter.toPayload('theirs')));
    expect(decode(await result)).toBe('theirs');
    expect(stopping.signal.listeners.size).toBe(0);

    await guard.invalidate('s', 'job');
    await holdLock();
    const ended = waiter(stopping, { local: true, mark: true });
    await waiting();
    stopping.abort();
    expect(((await ended) as ApplicationFailure).type).toBe('FireOnceWorkerShutdown');
    expect([stopping.signal.listeners.size, await count()]).toEqual([0, 0]);
  });

  it('refuses a workerStopping that is not an AbortSignal, naming it', () => {
    expect(() => createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), workerStopping: true } as never)).toThrow(
      expect.objectContaining({
        name: FireOnceConfigError.name,
        message: expect.stringMatching(/workerStopping must be an AbortSignal \(got true\)/),
      }) as Error,
    );
  });
});
