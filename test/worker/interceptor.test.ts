import { CompleteAsyncError, Context, type Info } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure, RawValue, defaultPayloadConverter } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { WorkerOptions } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOnce, FireOnceConfigError, FireOnceGuard, FireOncePlugin, fireOnce, type FireOnceOptions } from '../../src';
import { ParkingLot, createFireOnceActivityInterceptor, formatWaiter, fireOnceActivityMap, type DefaultInFlightPolicy } from '../../src/core';
import { payloadToBytes } from '../../src/worker/artifact';
import { useGuardFixture } from '../support/redis';
import { writeArtifact, writeLock } from '../support/records';
import { waitFor } from '../support/wait';

// MockActivityEnvironment passes empty headers, so these tests give the scope through options;
// header propagation is covered by the integration suite on a real server.
describe('fire-once activity interceptor (MockActivityEnvironment)', () => {
  const fx = useGuardFixture('icpt', { lockTtlMs: 60_000 });
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  beforeEach(() => ({ redis, prefix, guard } = fx));

  /** A counter the guard does not own: INCR under the test's prefix inside the activity body. */
  const counterKey = () => `${prefix}:counter`;
  const count = async () => Number((await redis.get(counterKey())) ?? 0);

  function envFor(activities: object, activityType: string, onInFlight: DefaultInFlightPolicy = 'wait', info: Partial<Info> = {}, using = guard) {
    const factory = createFireOnceActivityInterceptor({ guard: using, activities: fireOnceActivityMap(activities), onInFlight, pollIntervalMs: 20 });
    return new MockActivityEnvironment(
      { namespace: 'default', activityType, startToCloseTimeoutMs: 10_000, currentAttemptScheduledTimestampMs: Date.now(), ...info },
      { interceptors: [factory] },
    );
  }

  function guarded<R>(body: (scope: string) => Promise<R>, options: FireOnceOptions = {}) {
    return fireOnce(
      async (scope: string) => {
        await redis.incr(counterKey());
        return body(scope);
      },
      { scope: ([scope]: [string]) => scope, ...options } as never,
    );
  }

  /** Someone else's lock, as acquire.lua writes it. */
  const holdLock = async (key: string) => {
    await writeLock(redis, key, 'someone-else', { holder: 'another workflow' });
  };

  const decode = (value: unknown) => defaultPayloadConverter.fromPayload((value as RawValue).payload);

  it('runs once, then fast-forwards with the byte-identical stored payload', async () => {
    const activities = { summarise: guarded(async (s) => ({ summary: `of ${s}`, n: 1 })) };
    const first = await envFor(activities, 'summarise').run(activities.summarise, 'scope-a');
    const second = await envFor(activities, 'summarise').run(activities.summarise, 'scope-a');
    expect(first).toBeInstanceOf(RawValue);
    expect(decode(first)).toEqual({ summary: 'of scope-a', n: 1 });
    expect(Buffer.compare(payloadToBytes((second as RawValue).payload), payloadToBytes((first as RawValue).payload))).toBe(0);
    expect(await count()).toBe(1);
  });

  it('on success the artifact takes over from the lock: a later call fast-forwards and never dispatches', async () => {
    const activities = { summarise: guarded(async () => 'ok') };
    await envFor(activities, 'summarise').run(activities.summarise, 'scope-a');
    expect(await redis.exists(guard.keys.lock('scope-a', 'summarise'))).toBe(0);
    expect(await redis.exists(guard.keys.artifact('scope-a', 'summarise'))).toBe(1);
    expect(decode(await envFor(activities, 'summarise').run(activities.summarise, 'scope-a'))).toBe('ok');
    expect(await count()).toBe(1);
  });

  it('releases on failure, rethrows the original error unchanged, and the next call dispatches again', async () => {
    const boom = new Error('job failed');
    let fail = true;
    const activities = {
      job: guarded(async () => {
        if (fail) throw boom;
        return 'second time lucky';
      }),
    };
    await expect(envFor(activities, 'job').run(activities.job, 's')).rejects.toBe(boom);
    expect(await redis.exists(guard.keys.lock('s', 'job'))).toBe(0);
    fail = false;
    expect(decode(await envFor(activities, 'job').run(activities.job, 's'))).toBe('second time lucky');
    expect(await count()).toBe(2);
  });

  it('releases on cancellation', async () => {
    const activities = { job: guarded(() => Context.current().cancelled) };
    const env = envFor(activities, 'job');
    const running = env.run(activities.job, 's');
    await waitFor('the job to start', async () => (await count()) === 1, { timeoutMs: 2_000 });
    env.cancel();
    await expect(running).rejects.toBeInstanceOf(CancelledFailure);
    expect(await redis.exists(guard.keys.lock('s', 'job'))).toBe(0);
  });

  // A cancellation can land while the lock is being taken, e.g. while an in-slot wait's re-check is
  // on the wire. If that acquire wins, the job must not run for a cancelled call, nor the lock keep
  // others out until its TTL.
  it('dispatches nothing and gives the lock back when the cancellation came while the lock was being taken', async () => {
    const activities = { job: guarded(async () => 'ran') };
    const lockKey = guard.keys.lock('s', 'job');
    await holdLock(lockKey);
    let calls = 0;
    const racing = Object.create(guard) as FireOnceGuard;
    racing.acquire = async (target, options) => {
      if (++calls === 1) {
        const held = await guard.acquire(target, options);
        await redis.del(lockKey); // the holder failed and let go
        return held;
      }
      const sent = guard.acquire(target, options);
      env.cancel();
      return sent;
    };
    const env = envFor(activities, 'job', 'wait', {}, racing);
    await expect(env.run(activities.job, 's')).rejects.toBeInstanceOf(CancelledFailure);
    expect(calls).toBe(2);
    expect(await count()).toBe(0);
    expect(await redis.exists(lockKey)).toBe(0);
  });

  it('treats CompleteAsyncError as neither success nor failure: the lock stays, no artifact', async () => {
    const activities = {
      job: guarded(async () => {
        throw new CompleteAsyncError();
      }),
    };
    await expect(envFor(activities, 'job').run(activities.job, 's')).rejects.toBeInstanceOf(CompleteAsyncError);
    expect(await redis.exists(guard.keys.lock('s', 'job'))).toBe(1);
    expect(await redis.exists(guard.keys.artifact('s', 'job'))).toBe(0);
  });

  it("WARNs when a 'result'-mode job completes asynchronously, whose result the guard never sees; not in external-artifact mode", async () => {
    const warned = async (options: FireOnceOptions, scope: string) => {
      const warnings: string[] = [];
      const logger = {
        log: () => undefined,
        trace: () => undefined,
        debug: () => undefined,
        info: () => undefined,
        error: () => undefined,
        warn: (m: string) => warnings.push(m),
      };
      const activities = {
        job: guarded(async () => {
          throw new CompleteAsyncError();
        }, options),
      };
      const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), onInFlight: 'wait', pollIntervalMs: 20 });
      const env = new MockActivityEnvironment(
        { namespace: 'default', activityType: 'job', startToCloseTimeoutMs: 10_000, currentAttemptScheduledTimestampMs: Date.now() },
        { interceptors: [factory], logger },
      );
      await expect(env.run(activities.job, scope)).rejects.toBeInstanceOf(CompleteAsyncError);
      return warnings;
    };
    expect(await warned({}, 'async-result')).toEqual([
      expect.stringMatching(/^fire-once: the job completes asynchronously, but in 'result' mode .* artifact: \{ external \}/),
    ]);
    const external = { artifact: { external: ({ scope }: { scope: string }) => guard.keys.external(scope, 'job') } } as FireOnceOptions;
    expect(await warned(external, 'async-external')).toEqual([]);
  });

  const jobs: [string, () => Promise<string>][] = [
    ['commits', async () => 'ok'],
    ['fails', async () => Promise.reject(ApplicationFailure.nonRetryable('job failed', 'JobFailed'))],
  ];
  it.each(jobs)('a holder with no Temporal client that %s puts the waiters parked on its lock back on their list', async (_, job) => {
    // Another worker's waiter parks on this holder's lock while the job runs (PROTOCOL.md section
    // 7: whoever cannot complete a waiter it is handed must put it back for that worker's reap).
    const lot = new ParkingLot(guard);
    const activities = {
      job: guarded(async (s) => {
        expect((await lot.park({ scope: s, step: 'job', jobType: 'job' }, Buffer.from('waiter-1'))).kind).toBe('parked');
        return job();
      }),
    };
    await envFor(activities, 'job')
      .run(activities.job, 's')
      .catch(() => undefined);
    expect(await redis.lrange(guard.keys.waiters('s', 'job'), 0, -1)).toEqual([formatWaiter('', Buffer.from('waiter-1')).toString()]); // as it parked
    expect(await redis.pttl(guard.keys.waiters('s', 'job'))).toBeGreaterThan(0);
  });

  it.each([
    ['fail', 'FireOnceInFlight'],
    ['skip', undefined],
  ] as const)("in-flight policy '%s'", async (policy, failureType) => {
    await holdLock(guard.keys.lock('s', 'job'));
    // 'skip' is per activity only; 'fail' is set worker-wide here.
    const activities = { job: guarded(async () => undefined, policy === 'skip' ? { onInFlight: 'skip' } : {}) };
    const result = await envFor(activities, 'job', policy === 'skip' ? 'wait' : policy)
      .run(activities.job, 's')
      .catch((e: unknown) => e);
    if (failureType === undefined) {
      expect(result).toBeUndefined();
    } else {
      expect(result).toBeInstanceOf(ApplicationFailure);
      const failure = result as ApplicationFailure;
      expect(failure.type).toBe(failureType);
      expect(failure.nonRetryable).toBe(false);
      // The holder's fencing token (its start) is 1 µs after the epoch: half its run time far
      // exceeds the lock's 30 s TTL, so the delay is the TTL left, with no fixed cap.
      expect(failure.nextRetryDelay).toBeGreaterThan(20_000);
      expect(failure.nextRetryDelay).toBeLessThanOrEqual(30_000);
    }
    expect(await count()).toBe(0);
  });

  it("'wait' returns the holder's artifact when it commits, without dispatching", async () => {
    const holder = await guard.acquire({ scope: 's', step: 'job', jobType: 'job' });
    if (holder.kind !== 'acquired') throw new Error('expected acquired');
    const activities = { job: guarded(async () => 'mine') };
    const waiting = envFor(activities, 'job').run(activities.job, 's');
    setTimeout(() => void guard.commit(holder.lease, payloadToBytes(defaultPayloadConverter.toPayload('theirs'))), 100);
    expect(decode(await waiting)).toBe('theirs');
    expect(await count()).toBe(0);
  });

  it("'wait' heartbeats while it waits when the activity has a heartbeat timeout", async () => {
    const holder = await guard.acquire({ scope: 's', step: 'job', jobType: 'job' });
    if (holder.kind !== 'acquired') throw new Error('expected acquired');
    const activities = { job: guarded(async () => 'mine') };
    const env = envFor(activities, 'job', 'wait', { heartbeatTimeoutMs: 100 });
    let heartbeats = 0;
    env.on('heartbeat', () => heartbeats++);
    const waiting = env.run(activities.job, 's');
    await waitFor('3 heartbeats of the waiter', async () => heartbeats >= 3, { timeoutMs: 2_000 });
    await guard.release(holder.lease);
    expect(decode(await waiting)).toBe('mine'); // the holder failed: this call competed and won
    expect(await count()).toBe(1);
  });

  // Temporal keeps one set of heartbeat details per activity, across attempts, and each heartbeat
  // replaces it. A waiter runs none of the job, so its heartbeats must carry the details an earlier
  // attempt recorded, or the attempt that dispatches next finds its progress gone.
  it("'wait' heartbeats with the details an earlier attempt recorded, never erasing them", async () => {
    const holder = await guard.acquire({ scope: 's', step: 'job', jobType: 'job' });
    if (holder.kind !== 'acquired') throw new Error('expected acquired');
    const activities = { job: guarded(async () => 'mine') };
    const env = envFor(activities, 'job', 'wait', { heartbeatTimeoutMs: 100, attempt: 2, heartbeatDetails: { page: 5 } });
    const details: unknown[] = [];
    env.on('heartbeat', (d: unknown) => details.push(d));
    const waiting = env.run(activities.job, 's');
    await waitFor('2 heartbeats of the waiter', async () => details.length >= 2, { timeoutMs: 2_000 });
    await guard.release(holder.lease);
    expect(decode(await waiting)).toBe('mine');
    expect(details).toEqual(details.map(() => ({ page: 5 })));
  });

  it("'wait' gives up with a retryable FireOnceInFlight before start-to-close", async () => {
    await holdLock(guard.keys.lock('s', 'job'));
    const activities = { job: guarded(async () => 'x') };
    const err = await envFor(activities, 'job', 'wait', { startToCloseTimeoutMs: 300 })
      .run(activities.job, 's')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect((err as ApplicationFailure).type).toBe('FireOnceInFlight');
    expect(await count()).toBe(0);
  });

  it("'wait' gives up before schedule-to-close when that comes first, so a timed-out activity never dispatches from its slot", async () => {
    await holdLock(guard.keys.lock('s', 'job'));
    const activities = { job: guarded(async () => 'x') };
    // A later attempt: 10 s since the first was scheduled, 300 ms of schedule-to-close left, and a minute of start-to-close.
    const info = { startToCloseTimeoutMs: 60_000, scheduledTimestampMs: Date.now() - 10_000, scheduleToCloseTimeoutMs: 10_300 };
    const err = await envFor(activities, 'job', 'wait', info)
      .run(activities.job, 's')
      .catch((e: unknown) => e);
    expect((err as ApplicationFailure).type).toBe('FireOnceInFlight');
    expect(await count()).toBe(0);
  });

  it('fails a missing scope with non-retryable FireOnceMissingScope naming the activity, dispatching nothing', async () => {
    const activities = { job: fireOnce(async () => redis.incr(counterKey())) };
    const err = await envFor(activities, 'job')
      .run(activities.job)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect((err as ApplicationFailure).type).toBe('FireOnceMissingScope');
    expect((err as ApplicationFailure).nonRetryable).toBe(true);
    expect((err as ApplicationFailure).message).toContain('"job"');
    expect(await count()).toBe(0);
  });

  it('refuses an unserialisable result with non-retryable FireOnceUnstorableResult and keeps the lock', async () => {
    const activities = { job: guarded(async () => ({ big: 1n })) };
    const err = await envFor(activities, 'job')
      .run(activities.job, 's')
      .catch((e: unknown) => e);
    expect((err as ApplicationFailure).type).toBe('FireOnceUnstorableResult');
    expect((err as ApplicationFailure).nonRetryable).toBe(true);
    expect(await redis.exists(guard.keys.lock('s', 'job'))).toBe(1);
  });

  it('fails a corrupt artifact with non-retryable FireOnceCorruptArtifact and does not dispatch', async () => {
    await writeArtifact(redis, guard.keys.artifact('s', 'job'), Buffer.from([0xff, 0xff, 0xff]));
    const activities = { job: guarded(async () => 'x') };
    const err = await envFor(activities, 'job')
      .run(activities.job, 's')
      .catch((e: unknown) => e);
    expect((err as ApplicationFailure).type).toBe('FireOnceCorruptArtifact');
    expect(await count()).toBe(0);
    expect(await redis.exists(guard.keys.artifact('s', 'job'))).toBe(1);
  });

  it('lets unmarked activities run every time, untouched', async () => {
    const activities = { plain: async () => redis.incr(counterKey()) };
    await envFor(activities, 'plain').run(activities.plain);
    await envFor(activities, 'plain').run(activities.plain);
    expect(await count()).toBe(2);
  });

  // Temporal retries any error that is not an ApplicationFailure marked non-retryable (it makes a
  // retryable one of its name), so a plain FireOnceConfigError would fail every attempt for ever.
  it('refuses to run a fire-once activity on a worker without the interceptor, with a non-retryable FireOnceConfigError', async () => {
    const activities = { job: guarded(async () => 'x') };
    const bare = new MockActivityEnvironment({ namespace: 'default', activityType: 'job' });
    const err = await bare.run(activities.job, 's').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect([(err as ApplicationFailure).type, (err as ApplicationFailure).nonRetryable]).toEqual(['FireOnceConfigError', true]);
    expect((err as ApplicationFailure).message).toMatch(/marked fire-once, but this worker has no FireOncePlugin/);
    expect(await count()).toBe(0);
  });

  it("names the cause when the worker's fire-once interceptor did not list the activity: one wired by hand with a map without it", async () => {
    // The plugin reads the worker's activities as the worker runs, a later plugin's included
    // (workflow-features.test.ts); an interceptor wired by hand has only the map it was given.
    const activities = { job: guarded(async () => 'x') };
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap({}), onInFlight: 'wait', pollIntervalMs: 20 });
    const env = new MockActivityEnvironment(
      { namespace: 'default', activityType: 'job', startToCloseTimeoutMs: 2_000, currentAttemptScheduledTimestampMs: Date.now() },
      { interceptors: [factory] },
    );
    const err = await env.run(activities.job, 's').catch((e: unknown) => e);
    expect([(err as ApplicationFailure).type, (err as ApplicationFailure).nonRetryable]).toEqual(['FireOnceConfigError', true]);
    expect((err as ApplicationFailure).message).toBe(
      'activity "job" is marked fire-once, but the fire-once interceptor of this worker was not given it: build the interceptor\'s map with fireOnceActivityMap ' +
        "from every activity the worker registers, a plugin's included (FireOncePlugin reads them as the worker runs). Refusing to dispatch unguarded",
    );
    expect(await count()).toBe(0);
  });

  it('names the cause when a fire-once function is called inside an unmarked activity of the worker: not a plugin order', async () => {
    const summarise = fireOnce(async function summarise(_scope: string) {
      await redis.incr(counterKey());
      return 'x';
    });
    const activities = { outer: async () => summarise('s'), summarise };
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), onInFlight: 'wait', pollIntervalMs: 20 });
    const env = new MockActivityEnvironment(
      { namespace: 'default', activityType: 'outer', startToCloseTimeoutMs: 2_000, currentAttemptScheduledTimestampMs: Date.now() },
      { interceptors: [factory] },
    );
    const err = await env.run(activities.outer).catch((e: unknown) => e);
    expect([(err as ApplicationFailure).type, (err as ApplicationFailure).nonRetryable]).toEqual(['FireOnceConfigError', true]);
    expect((err as ApplicationFailure).message).toBe(
      'the fire-once function "summarise" was called inside activity "outer", which is not marked fire-once: ' +
        'a guard runs around the activity a workflow schedules, so call it from the workflow, or mark that activity itself. Refusing to dispatch unguarded',
    );
    expect(await count()).toBe(0);
  });

  it('refuses, as the worker is configured, a FireOncePlugin given twice or beside a fire-once interceptor wired by hand; one plugin serves many workers', () => {
    const activities = { job: guarded(async () => 'x') };
    const plugin = new FireOncePlugin({ redis });
    const options = (): WorkerOptions => ({ taskQueue: 'q', activities });
    const twice = new FireOnceConfigError(
      'this worker already has a fire-once activity interceptor (FireOncePlugin given twice, or beside one made by createFireOnceActivityInterceptor): give it one',
    );
    expect(() => plugin.configureWorker(plugin.configureWorker(options()))).toThrow(twice);
    expect(() => new FireOncePlugin({ redis }).configureWorker(plugin.configureWorker(options()))).toThrow(twice);
    const byHand = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities) });
    expect(() => plugin.configureWorker({ ...options(), interceptors: { activity: [byHand] } })).toThrow(twice);
    // Two workers of one plugin, each configured once: each gets its one interceptor.
    for (let worker = 0; worker < 2; worker++) expect(plugin.configureWorker(options()).interceptors?.activity).toHaveLength(1);
  });

  it('refuses an activity guarded twice on one worker with a non-retryable FireOnceConfigError, dispatching nothing and giving the lock back', async () => {
    // The plugin's interceptor and one wired by hand (or the plugin given twice): the inner one
    // would find the outer one's lock and wait out every attempt on it, never dispatching.
    const activities = { job: guarded(async () => 'x') };
    const factory = () => createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), onInFlight: 'wait', pollIntervalMs: 20 });
    const twice = new MockActivityEnvironment(
      { namespace: 'default', activityType: 'job', startToCloseTimeoutMs: 2_000, currentAttemptScheduledTimestampMs: Date.now() },
      { interceptors: [factory(), factory()] },
    );
    const err = await twice.run(activities.job, 's').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect([(err as ApplicationFailure).type, (err as ApplicationFailure).nonRetryable]).toEqual(['FireOnceConfigError', true]);
    expect((err as ApplicationFailure).message).toMatch(/guarded twice on this worker/);
    expect(await count()).toBe(0);
    expect(await redis.exists(guard.keys.lock('s', 'job'))).toBe(0);
  });

  it('guards @FireOnce class methods, bound so Object.entries registers them', async () => {
    class Jobs {
      constructor(private readonly label: string) {}

      @FireOnce({ scope: ([scope]) => scope as string, jobType: 'report' })
      async report(scope: string): Promise<string> {
        await redis.incr(counterKey());
        return `${this.label}:${scope}`;
      }

      async plain(): Promise<number> {
        return 1;
      }
    }
    const instance = new Jobs('r');
    const registered = Object.fromEntries(Object.entries(instance));
    expect(Object.keys(registered)).toContain('report');
    expect([...fireOnceActivityMap(instance).keys()]).toEqual(['report']);
    const a = await envFor(instance, 'report').run(registered.report, 'x');
    const b = await envFor(instance, 'report').run(registered.report, 'x');
    expect(decode(a)).toBe('r:x');
    expect(decode(b)).toBe('r:x');
    expect(await count()).toBe(1);
  });
});
