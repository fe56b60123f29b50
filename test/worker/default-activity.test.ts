import { ApplicationFailure, defaultPayloadConverter, type RawValue } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { fireOnce, type FireOnceOptions } from '../../src';
import { createFireOnceActivityInterceptor, fireOnceActivityMap } from '../../src/core';
import { useGuardFixture } from '../support/redis';

// The SDK runs a worker's `default` activity for every activity type it has no function of (a
// dynamic activity, in the Python SDK's words). The interceptor looks its options up by the type
// each call names, which is never `default`.
describe("a fire-once worker's default activity", () => {
  const fx = useGuardFixture('dflt');

  /** A counter the guard does not own: INCR under the test's prefix inside the activity body. */
  const count = async () => Number((await fx.redis.get(`${fx.prefix}:counter`)) ?? 0);

  function activities() {
    return {
      default: fireOnce(
        async (scope: string) => {
          await fx.redis.incr(`${fx.prefix}:counter`);
          return `default ran for ${scope}`;
        },
        { scope: ([scope]: [string]) => scope },
      ),
      plain: async (scope: string) => `plain ran for ${scope}`,
    };
  }

  function envFor(map: ReadonlyMap<string, FireOnceOptions>, activityType: string) {
    const factory = createFireOnceActivityInterceptor({ guard: fx.guard, activities: map, pollIntervalMs: 20 });
    return new MockActivityEnvironment(
      { namespace: 'default', activityType, startToCloseTimeoutMs: 10_000, currentAttemptScheduledTimestampMs: Date.now() },
      { interceptors: [factory] },
    );
  }

  it('is guarded under the type each call names: it runs once, then fast-forwards', async () => {
    const registered = activities();
    const first = await envFor(fireOnceActivityMap(registered), 'summarise').run(registered.default, 's');
    const second = await envFor(fireOnceActivityMap(registered), 'summarise').run(registered.default, 's');
    expect(defaultPayloadConverter.fromPayload((first as RawValue).payload)).toBe('default ran for s');
    expect(defaultPayloadConverter.fromPayload((second as RawValue).payload)).toBe('default ran for s');
    expect(await count()).toBe(1);
    expect(await fx.redis.exists(fx.guard.keys.artifact('s', 'summarise'))).toBe(1);
  });

  it('lends its options to no activity the worker has a function of', async () => {
    const registered = activities();
    expect(await envFor(fireOnceActivityMap(registered), 'plain').run(registered.plain, 's')).toBe('plain ran for s');
    expect(await fx.redis.exists(fx.guard.keys.lock('s', 'plain'), fx.guard.keys.artifact('s', 'plain'))).toBe(0);
  });

  it('is refused, not run unguarded, when the map it was looked up in was built by hand', async () => {
    // A Map built by hand does not say which types the worker has functions of.
    const registered = activities();
    const map = new Map([...fireOnceActivityMap(registered)]);
    const err = await envFor(map, 'summarise')
      .run(registered.default, 's')
      .catch((e: unknown) => e);
    expect([(err as ApplicationFailure).type, (err as ApplicationFailure).nonRetryable]).toEqual(['FireOnceConfigError', true]);
    expect(await count()).toBe(0);
  });
});
