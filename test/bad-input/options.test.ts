import type { Redis } from 'ioredis';
import { FireOnce, FireOnceConfigError, FireOnceGuard, FireOncePlugin, fireOnce } from '../../src';
import { createFireOnceActivityInterceptor, fireOnceActivityMap, type FireOnceInterceptorConfig } from '../../src/core';
import { differences, dispatchCounter, type KeySnapshot, useBadInputFixture } from '../support/bystander';

/** One bad number per row, with what the error must say about the field it was given to. */
const BAD_NUMBERS: readonly (readonly [string, unknown, (field: string) => RegExp])[] = [
  ['negative', -5, (f) => new RegExp(`${f} must be a positive integer \\(got -5\\)$`)],
  ['zero', 0, (f) => new RegExp(`${f} must be a positive integer \\(got 0\\)$`)],
  ['NaN', NaN, (f) => new RegExp(`${f} must be a positive integer \\(got NaN\\)$`)],
  ['fractional', 1.5, (f) => new RegExp(`${f} must be a positive integer \\(got 1.5\\)$`)],
  ['Infinity', Infinity, (f) => new RegExp(`${f} must be a positive integer \\(got Infinity\\)$`)],
  ['absurd (1e15 ms, 31,000 years)', 1e15, (f) => new RegExp(`${f} must be at most \\d+ (ms|bytes|entries) \\(got 1000000000000000\\)$`)],
  ['a numeric string', '60000', (f) => new RegExp(`${f} must be a positive integer \\(got "60000"\\)$`)],
];

const PLUGIN_FIELDS = ['lockTtlMs', 'artifactTtlMs', 'storeTimeoutMs', 'pollIntervalMs', 'leaseMs', 'maxArtifactBytes', 'resumeWindowMs', 'dispatchLogMaxLen'];
const GUARD_FIELDS = ['lockTtlMs', 'artifactTtlMs', 'storeTimeoutMs'];
const ACTIVITY_FIELDS = ['lockTtlMs', 'artifactTtlMs', 'leaseMs'];
const CACHE_FIELDS = ['maxEntries', 'maxBytes', 'maxAgeMs'];
const INTERCEPTOR_FIELDS = ['pollIntervalMs', 'leaseMs', 'maxArtifactBytes'];

/** "" if `fn` throws a FireOnceConfigError matching `message`, else what it did instead. */
function problem(where: string, fn: () => unknown, message: RegExp): string {
  try {
    fn();
    return `${where}: accepted`;
  } catch (err) {
    if (!(err instanceof FireOnceConfigError)) return `${where}: threw ${(err as Error).name}: ${(err as Error).message}`;
    return message.test(err.message) ? '' : `${where}: message ${JSON.stringify(err.message)} does not match ${message}`;
  }
}

describe('bad input: options', () => {
  const fx = useBadInputFixture('bad-opt');
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  let before: KeySnapshot;
  let counter: ReturnType<typeof dispatchCounter>;
  beforeEach(() => ({ redis, prefix, guard, before, counter } = fx));

  const job = async (_s: string): Promise<string> => {
    await counter.hit();
    return 'ran';
  };

  async function expectNothingDispatchedAndIntact() {
    expect(await counter.total()).toBe(0);
    expect(await differences(redis, before)).toEqual([]);
  }

  describe.each(BAD_NUMBERS)('a %s TTL or size → FireOnceConfigError naming the field', (_name, value, message) => {
    it('at construction: plugin, guard, localCache, fireOnce and @FireOnce', async () => {
      const problems = [
        ...PLUGIN_FIELDS.map((f) => problem(`plugin ${f}`, () => new FireOncePlugin({ redis, keyPrefix: prefix, [f]: value }), message(f))),
        ...GUARD_FIELDS.map((f) => problem(`guard ${f}`, () => new FireOnceGuard({ redis, keyPrefix: prefix, [f]: value }), message(f))),
        ...CACHE_FIELDS.map((f) => problem(`localCache ${f}`, () => new FireOncePlugin({ redis, localCache: { [f]: value } }), message(`localCache.${f}`))),
        ...ACTIVITY_FIELDS.map((f) => problem(`fireOnce ${f}`, () => fireOnce(job, { [f]: value }), message(`fireOnce\\(job\\): ${f}`))),
        ...ACTIVITY_FIELDS.map((f) => problem(`@FireOnce ${f}`, () => FireOnce({ [f]: value }), message(`@FireOnce: ${f}`))),
      ].filter(Boolean);
      expect(problems).toEqual([]);
      await expectNothingDispatchedAndIntact();
    });

    it('per call: guard.acquire, guard.extend and guard.commit write nothing', async () => {
      const target = { scope: 's', step: 'job', jobType: 'job' };
      const acquire = await guard.acquire(target).catch((e: unknown) => e);
      if (!('kind' in (acquire as object)) || (acquire as { kind: string }).kind !== 'acquired') throw new Error('expected to acquire');
      const { lease } = acquire as { lease: Parameters<FireOnceGuard['release']>[0] };
      const lockBefore = await redis.dumpBuffer(lease.lockKey);
      const calls: [string, () => Promise<unknown>, RegExp][] = [
        ['acquire lockTtlMs', () => guard.acquire({ ...target, scope: 'other' }, { lockTtlMs: value as number }), message('lockTtlMs')],
        ['extend lockTtlMs', () => guard.extend(lease, value as number), message('lockTtlMs')],
        ['commit artifactTtlMs', () => guard.commit(lease, Buffer.from('x'), { artifactTtlMs: value as number }), message('artifactTtlMs')],
      ];
      for (const [where, call, pattern] of calls) {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect({ where, type: (err as Error | undefined)?.name, message: (err as Error | undefined)?.message }).toEqual({
          where,
          type: 'FireOnceConfigError',
          message: expect.stringMatching(pattern),
        });
      }
      expect(await redis.exists(guard.keys.lock('other', 'job'), guard.keys.artifact('s', 'job'))).toBe(0);
      expect(Buffer.compare((await redis.dumpBuffer(lease.lockKey))!, lockBefore!)).toBe(0);
      await expectNothingDispatchedAndIntact();
    });

    it('hand-wired createFireOnceActivityInterceptor: pollIntervalMs, leaseMs, maxArtifactBytes', async () => {
      const activities = fireOnceActivityMap({ job: fireOnce(job, { scope: ([s]) => s }) });
      const problems = INTERCEPTOR_FIELDS.map((f) =>
        problem(`interceptor ${f}`, () => createFireOnceActivityInterceptor({ guard, activities, [f]: value } as FireOnceInterceptorConfig), message(f)),
      ).filter(Boolean);
      expect(problems).toEqual([]);
      await expectNothingDispatchedAndIntact();
    });
  });

  it('hand-wired createFireOnceActivityInterceptor: a misspelt onInFlight or lockMode → FireOnceConfigError naming the field', async () => {
    const activities = fireOnceActivityMap({ job: fireOnce(job, { scope: ([s]) => s }) });
    const problems = [
      problem(
        'interceptor onInFlight',
        () => createFireOnceActivityInterceptor({ guard, activities, onInFlight: 'wiat' } as never),
        /onInFlight must be one of park, wait, fail \(got "wiat"\)/,
      ),
      problem(
        'interceptor lockMode',
        () => createFireOnceActivityInterceptor({ guard, activities, lockMode: 'leese' } as never),
        /lockMode must be one of lease, fixed \(got "leese"\)/,
      ),
    ].filter(Boolean);
    expect(problems).toEqual([]);
    await expectNothingDispatchedAndIntact();
  });

  // The plugin takes `dispatchLog: true` and `localCache: true`; the interceptor takes the objects
  // they stand for. A plugin option copied onto it must be refused when the worker is built, not
  // fail each call with an untyped TypeError that Temporal retries for ever.
  it('hand-wired createFireOnceActivityInterceptor: a wake, dispatchLog, cache or parkedWatch that is not one → FireOnceConfigError naming it', async () => {
    const activities = fireOnceActivityMap({ job: fireOnce(job, { scope: ([s]) => s }) });
    const problems = ['wake', 'dispatchLog', 'cache', 'parkedWatch'].map((f) =>
      problem(
        `interceptor ${f}`,
        () => createFireOnceActivityInterceptor({ guard, activities, [f]: true } as never),
        new RegExp(`${f} must be an? [A-Za-z]+ \\(got true\\)`),
      ),
    );
    expect(problems.filter(Boolean)).toEqual([]);
    await expectNothingDispatchedAndIntact();
  });

  it("onInFlight 'skip' worker-wide → FireOnceConfigError, and a type error: it would resolve undefined for activities that return a value", async () => {
    const activities = fireOnceActivityMap({ job: fireOnce(job, { scope: ([s]) => s }) });
    const message = /onInFlight 'skip' resolves undefined.*set it per activity/;
    const problems = [
      // @ts-expect-error 'skip' is a per-activity policy, type-checked against the activity's return type
      problem('plugin', () => new FireOncePlugin({ redis, onInFlight: 'skip' }), message),
      // @ts-expect-error as above
      problem('interceptor', () => createFireOnceActivityInterceptor({ guard, activities, onInFlight: 'skip' }), message),
    ].filter(Boolean);
    expect(problems).toEqual([]);
    await expectNothingDispatchedAndIntact();
  });

  it('unknown option names → FireOnceConfigError naming the option, and a type error', async () => {
    const activities = fireOnceActivityMap({ job: fireOnce(job, { scope: ([s]) => s }) });
    const problems = [
      // @ts-expect-error lockTTL is not an option (lockTtlMs is)
      problem('plugin', () => new FireOncePlugin({ redis, lockTTL: 5_000 }), /unknown option "lockTTL"/),
      // @ts-expect-error ttl is not an option
      problem('guard', () => new FireOnceGuard({ redis, ttl: 5_000 }), /unknown option "ttl"/),
      // @ts-expect-error maxEntry is not an option (maxEntries is)
      problem('localCache', () => new FireOncePlugin({ redis, localCache: { maxEntry: 5 } }), /unknown option "maxEntry"/),
      // @ts-expect-error stepName is not an option (step is)
      problem('fireOnce', () => fireOnce(job, { stepName: 'x' }), /fireOnce\(job\): unknown option "stepName"/),
      // @ts-expect-error jobtype is not an option (jobType is)
      problem('@FireOnce', () => FireOnce({ jobtype: 'x' }), /@FireOnce: unknown option "jobtype"/),
      // @ts-expect-error pollInterval is not an option (pollIntervalMs is)
      problem('interceptor', () => createFireOnceActivityInterceptor({ guard, activities, pollInterval: 5 }), /unknown option "pollInterval"/),
    ].filter(Boolean);
    expect(problems).toEqual([]);
    await expectNothingDispatchedAndIntact();
  });
});
