import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Redis } from 'ioredis';
import { FireOnceGuard, fireOnce, type FireOnceOptions } from '../../src';
import { createFireOnceActivityInterceptor, fireOnceActivityMap } from '../../src/core';
import { useGuardFixture } from '../support/redis';

// External-artifact mode across namespaces: the `external` option is told the call's namespace,
// and a key under the guard's prefix that is not this scope's and namespace's is refused before
// anything is locked or dispatched.
describe('external artifacts are filed under the call namespace', () => {
  const fx = useGuardFixture('extns', { lockTtlMs: 60_000 });
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  beforeEach(() => ({ redis, prefix, guard } = fx));

  /** A counter the guard does not own: INCR inside the activity body. */
  const counterKey = () => `${prefix}:counter`;
  const count = async () => Number((await redis.get(counterKey())) ?? 0);

  function activityFor(external: NonNullable<FireOnceOptions['artifact']>) {
    return {
      dispatchJob: fireOnce(
        async (_scope: string) => {
          await redis.incr(counterKey());
        },
        { scope: ([scope]: [string]) => scope, jobType: 'report', artifact: external } as never,
      ),
    };
  }

  function run(activities: ReturnType<typeof activityFor>, namespace: string, scope = 'session-1') {
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), onInFlight: 'fail' });
    const env = new MockActivityEnvironment(
      { namespace, activityType: 'dispatchJob', startToCloseTimeoutMs: 10_000, currentAttemptScheduledTimestampMs: Date.now() },
      { interceptors: [factory] },
    );
    return env.run(activities.dispatchJob, scope);
  }

  const documented = activityFor({ external: ({ scope, jobType, namespace }) => guard.keysFor(namespace).external(scope, jobType) });

  it("a tenant's call checks its own namespace's key, not default's, and dispatches its own job", async () => {
    // default's job has written its artifact; tenant-b's has not.
    await redis.set(guard.keysFor('default').external('session-1', 'report'), 'done');
    await run(documented, 'default');
    expect(await count()).toBe(0); // default fast-forwards
    await run(documented, 'tenant-b');
    expect(await count()).toBe(1); // tenant-b dispatches its own
    expect(await redis.exists(guard.keysFor('tenant-b').lock('session-1', 'dispatchJob'))).toBe(1);
  });

  it.each([
    ["another namespace's external key", (g: FireOnceGuard) => g.keysFor('default').external('session-1', 'report')],
    ["another scope's external key", (g: FireOnceGuard) => g.keysFor('tenant-b').external('session-2', 'report')],
    ["this scope's own lock", (g: FireOnceGuard) => g.keysFor('tenant-b').lock('session-1', 'dispatchJob')],
    ["this scope's result artifact", (g: FireOnceGuard) => g.keysFor('tenant-b').artifact('session-1', 'report')],
    ["this scope's wake channel", (g: FireOnceGuard) => g.keysFor('tenant-b').wakeChannel('session-1')],
    ["another namespace's log", (g: FireOnceGuard) => g.keysFor('default').log()],
    ['the protocol marker', (g: FireOnceGuard) => g.keys.protocolMarker()],
    ['an empty key', () => ''],
  ])('refuses %s as a non-retryable FireOnceConfigError, locking and dispatching nothing', async (_name, keyOf) => {
    const activities = activityFor({ external: () => keyOf(guard) });
    const failure = await run(activities, 'tenant-b').catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect((failure as ApplicationFailure).type).toBe('FireOnceConfigError');
    expect((failure as ApplicationFailure).nonRetryable).toBe(true);
    expect(await count()).toBe(0);
    expect(await redis.keys(`${guard.keys.root}*:l:*`)).toEqual([]);
  });

  it("accepts a key of its own in the scope's slot and namespace, as the chat-session sample builds", async () => {
    const sampleShape = activityFor({ external: ({ scope, namespace }) => `${guard.keysFor(namespace).scopeBase(scope)}:result:report` });
    await redis.set(`${guard.keysFor('tenant-b').scopeBase('session-1')}:result:report`, 'done');
    await run(sampleShape, 'tenant-b');
    expect(await count()).toBe(0);
    await run(sampleShape, 'default');
    expect(await count()).toBe(1);
  });

  it("accepts a key outside the guard's prefix, the user's own key space", async () => {
    const own = activityFor({ external: ({ scope, namespace }) => `reports:${namespace}:${scope}` });
    await redis.set(`reports:tenant-b:session-1`, 'done');
    await run(own, 'tenant-b');
    expect(await count()).toBe(0);
    await run(own, 'tenant-b', 'session-9');
    expect(await count()).toBe(1);
    await redis.del('reports:tenant-b:session-1');
  });
});
