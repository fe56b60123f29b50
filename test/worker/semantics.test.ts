import { ApplicationFailure, RawValue, defaultPayloadConverter, type Payload, type PayloadCodec, type PayloadConverter } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Redis } from 'ioredis';
import { FireOnceConfigError, FireOnceGuard, FireOncePlugin, fireOnce, fireOnceContext } from '../../src';
import { createFireOnceActivityInterceptor, fireOnceActivityMap, type FireOnceInterceptorConfig } from '../../src/core';
import { useGuardFixture } from '../support/redis';
import { storedPayload, writeLock } from '../support/records';

/** A codec that XORs every byte and marks the payload, standing in for an encryption codec. */
const xorCodec: PayloadCodec = {
  async encode(payloads: Payload[]) {
    return payloads.map((p) => ({
      metadata: { encoding: new TextEncoder().encode('binary/xor') },
      data: Uint8Array.from(
        Buffer.from(
          JSON.stringify({
            m: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
            d: Buffer.from(p.data ?? []).toString('base64'),
          }),
        ).map((b) => b ^ 0x5a),
      ),
    }));
  },
  async decode(payloads: Payload[]) {
    return payloads.map((p) => {
      const { m, d } = JSON.parse(Buffer.from((p.data ?? new Uint8Array()).map((b) => b ^ 0x5a)).toString()) as { m: Record<string, string>; d: string };
      return { metadata: Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Buffer.from(v, 'base64')])), data: Buffer.from(d, 'base64') };
    });
  },
};

describe('production semantics (MockActivityEnvironment, real Redis)', () => {
  const fx = useGuardFixture('sem');
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  beforeEach(() => ({ redis, prefix, guard } = fx));

  const counterKey = () => `${prefix}:counter`;
  const count = async () => Number((await redis.get(counterKey())) ?? 0);

  function run(activities: object, activityType: string, args: unknown[], config: Partial<FireOnceInterceptorConfig> = {}, info: object = {}) {
    const factory = createFireOnceActivityInterceptor({ guard, activities: fireOnceActivityMap(activities), pollIntervalMs: 20, ...config });
    const env = new MockActivityEnvironment(
      { namespace: 'default', activityType, startToCloseTimeoutMs: 10_000, currentAttemptScheduledTimestampMs: Date.now(), ...info },
      { interceptors: [factory] },
    );
    return env.run((activities as Record<string, (...a: unknown[]) => Promise<unknown>>)[activityType], ...args);
  }

  describe('payload conflicts', () => {
    const job = () =>
      fireOnce(
        async (scope: string, text: string) => {
          await redis.incr(counterKey());
          return `${scope}:${text}`;
        },
        { scope: ([scope]) => scope },
      );

    it('refuses other arguments for the same scope and step with non-retryable FireOnceKeyConflict', async () => {
      const activities = { job: job() };
      await run(activities, 'job', ['s', 'hello']);
      const err = await run(activities, 'job', ['s', 'other text']).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApplicationFailure);
      expect((err as ApplicationFailure).type).toBe('FireOnceKeyConflict');
      expect((err as ApplicationFailure).nonRetryable).toBe(true);
      expect(await count()).toBe(1);
    });

    it('also refuses them while the first call is still in flight', async () => {
      await guard.acquire({ scope: 's', step: 'job', jobType: 'job', holder: 'first', argsHash: 'some-other-hash' });
      const err = await run({ job: job() }, 'job', ['s', 'x']).catch((e: unknown) => e);
      expect((err as ApplicationFailure).type).toBe('FireOnceKeyConflict');
      expect(await count()).toBe(0);
    });

    it("shares the first call's outcome with onConflict: 'ignore', or when only conflictKey must match", async () => {
      const ignoring = {
        job: fireOnce(async (s: string, t: string) => (await redis.incr(counterKey()), `${s}:${t}`), { scope: ([s]) => s, onConflict: 'ignore' }),
      };
      await run(ignoring, 'job', ['s1', 'a']);
      expect(await run(ignoring, 'job', ['s1', 'b'])).toBeInstanceOf(RawValue);
      const keyed = {
        job: fireOnce(async (s: string, t: string) => (await redis.incr(counterKey()), `${s}:${t}`), { scope: ([s]) => s, conflictKey: ([s]) => s }),
      };
      const first = await run(keyed, 'job', ['s2', 'a']);
      const second = await run(keyed, 'job', ['s2', 'b']);
      expect(defaultPayloadConverter.fromPayload((second as RawValue).payload)).toBe(defaultPayloadConverter.fromPayload((first as RawValue).payload));
      expect(await count()).toBe(2);
    });

    it('recognises a later attempt of the same holder, whatever the arguments hash', async () => {
      const info = { workflowExecution: { workflowId: 'wf', runId: 'run-1' }, activityId: '7' };
      await guard.acquire({ scope: 's', step: 'job', jobType: 'job', holder: 'wf run-1 7', argsHash: 'stale-hash' }, { lockTtlMs: 200 });
      const activities = { job: job() };
      const result = await run(activities, 'job', ['s', 'x'], {}, { ...info, attempt: 2 });
      expect(defaultPayloadConverter.fromPayload((result as RawValue).payload)).toBe('s:x'); // waited, then took over
      expect(await count()).toBe(1);
    });
  });

  it('gives the activity its fencing token and lease signal through fireOnceContext()', async () => {
    const seen: number[] = [];
    const activities = {
      job: fireOnce(
        async (scope: string) => {
          const ctx = fireOnceContext();
          seen.push(ctx.fencingToken);
          expect(ctx.signal.aborted).toBe(false);
          expect(await ctx.renew()).toBe(true);
          if (seen.length === 1) throw new Error('fail the first time');
          return scope;
        },
        { scope: ([s]) => s },
      ),
    };
    await expect(run(activities, 'job', ['s'])).rejects.toThrow('fail the first time');
    await run(activities, 'job', ['s']);
    expect(seen).toHaveLength(2);
    expect(seen[1]).toBeGreaterThan(seen[0]); // the second holder's token is greater
    expect(() => fireOnceContext()).toThrow(/only available inside a guarded activity/);
  });

  it("'fixed' mode: fireOnceContext().renew() extends the lock to lockTtlMs, and resolves false once the lock is lost", async () => {
    const answers: boolean[] = [];
    const activities = {
      job: fireOnce(
        async (scope: string) => {
          const ctx = fireOnceContext();
          await redis.pexpire(ctx.lockKey, 1_000);
          answers.push(await ctx.renew());
          answers.push((await redis.pttl(ctx.lockKey)) > 30_000);
          await redis.del(ctx.lockKey); // lost: released by force, or expired
          answers.push(await ctx.renew());
          return scope;
        },
        { scope: ([s]) => s, lockTtlMs: 60_000 },
      ),
    };
    await run(activities, 'job', ['s'], { lockMode: 'fixed' });
    expect(answers).toEqual([true, true, false]);
  });

  it('aborts fireOnceContext().signal when the lease is lost mid-dispatch', async () => {
    const activities = {
      job: fireOnce(
        async (_scope: string) => {
          const { signal, lockKey } = fireOnceContext();
          await writeLock(redis, lockKey, 'stolen');
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
          throw signal.reason;
        },
        { scope: ([s]) => s, leaseMs: 1_000 },
      ),
    };
    const err = await run(activities, 'job', ['s']).catch((e: unknown) => e);
    expect((err as ApplicationFailure).type).toBe('FireOnceLockLost');
    expect((err as ApplicationFailure).nonRetryable).toBe(false);
  });

  it('stores artifacts through the worker payload codec, never in clear, and decodes them on fast-forward', async () => {
    const secret = 'the-secret-result-4242';
    const activities = { job: fireOnce(async (s: string) => (await redis.incr(counterKey()), { s, secret }), { scope: ([s]) => s }) };
    const first = await run(activities, 'job', ['s'], { payloadCodecs: [xorCodec] });
    const stored = await storedPayload(redis, guard.keys.artifact('s', 'job'));
    expect(stored).not.toBeNull();
    expect(stored!.includes(Buffer.from(secret))).toBe(false);
    const second = await run(activities, 'job', ['s'], { payloadCodecs: [xorCodec] });
    expect(defaultPayloadConverter.fromPayload((second as RawValue).payload)).toEqual({ s: 's', secret });
    expect(defaultPayloadConverter.fromPayload((first as RawValue).payload)).toEqual({ s: 's', secret });
    expect(await count()).toBe(1);
  });

  it('fails with FireOnceCorruptArtifact, dispatching nothing, when the codec cannot decode the artifact', async () => {
    const failing: PayloadCodec = { encode: async (p) => p, decode: async () => Promise.reject(new Error('wrong key')) };
    const activities = { job: fireOnce(async (s: string) => (await redis.incr(counterKey()), s), { scope: ([s]) => s }) };
    await run(activities, 'job', ['s'], { payloadCodecs: [xorCodec] });
    const err = await run(activities, 'job', ['s'], { payloadCodecs: [failing] }).catch((e: unknown) => e);
    expect((err as ApplicationFailure).type).toBe('FireOnceCorruptArtifact');
    expect(await count()).toBe(1);
  });

  it("fails with FireOnceCorruptArtifact, dispatching nothing and quoting nothing, when the worker's payload converter cannot read the artifact", async () => {
    // A plain JSON converter (not a composite one), as a fleet mid-way through a converter change
    // may run beside workers that stored the result with the SDK default.
    const plainJson: PayloadConverter = {
      toPayload: (value: unknown) => ({ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(value)) }),
      fromPayload: <T>(payload: Payload) => JSON.parse(Buffer.from(payload.data ?? []).toString()) as T,
    };
    const stored = Buffer.from('api-key-SECRET-1234');
    const activities = { job: fireOnce(async (s: string) => (await redis.incr(counterKey()), s === 's' ? new Uint8Array(stored) : s), { scope: ([s]) => s }) };
    await run(activities, 'job', ['s']);
    const artifact = await redis.getBuffer(guard.keys.artifact('s', 'job'));
    const err = (await run(activities, 'job', ['s'], { payloadConverter: plainJson }).catch((e: unknown) => e)) as ApplicationFailure;
    expect(err.type).toBe('FireOnceCorruptArtifact');
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toMatch(/payload converter \(SyntaxError\)/);
    expect(JSON.stringify([err.message, err.details, err.stack, (err.cause as Error | undefined)?.message])).not.toContain('SECRET');
    expect(await count()).toBe(1);
    expect(await redis.getBuffer(guard.keys.artifact('s', 'job'))).toEqual(artifact); // left as it was
  });

  it('delivers a result over maxArtifactBytes without storing it, and holds the lock instead', async () => {
    const big = 'x'.repeat(5_000);
    const activities = { job: fireOnce(async (s: string) => (await redis.incr(counterKey()), `${s}${big}`), { scope: ([s]) => s, lockTtlMs: 60_000 }) };
    const result = await run(activities, 'job', ['s'], { maxArtifactBytes: 1_000 });
    expect(defaultPayloadConverter.fromPayload<string>((result as RawValue).payload)).toHaveLength(5_001);
    expect(await redis.exists(guard.keys.artifact('s', 'job'))).toBe(0);
    expect(await redis.pttl(guard.keys.lock('s', 'job'))).toBeGreaterThan(30_000);
  });

  it('a call waiting in its slot is not handed a result over maxArtifactBytes: it dispatches again once the hold ends (the documented limit)', async () => {
    const big = 'x'.repeat(5_000);
    let release!: () => void;
    const holderMayReturn = new Promise<void>((r) => (release = r));
    const activities = {
      job: fireOnce(async (_scope: string, who: string) => (await redis.incr(counterKey()), who === 'holder' && (await holderMayReturn), `${who}${big}`), {
        scope: ([s]) => s,
        lockTtlMs: 1_500,
        onConflict: 'ignore',
      }),
    };
    const runOf = (who: string) => ({ workflowExecution: { workflowId: `wf-${who}`, runId: `run-${who}` } });
    const config = { maxArtifactBytes: 1_000, onInFlight: 'wait' as const };
    const holder = run(activities, 'job', ['s', 'holder'], config, runOf('holder'));
    while ((await count()) === 0) await new Promise((r) => setTimeout(r, 10));
    const waiter = run(activities, 'job', ['s', 'waiter'], config, runOf('waiter'));
    release();
    const text = (result: unknown) => defaultPayloadConverter.fromPayload<string>((result as RawValue).payload).slice(0, 6);
    expect(text(await holder)).toBe('holder');
    expect(text(await waiter)).toBe('waiter'); // its own dispatch, after the lock's 1.5 s hold
    expect(await count()).toBe(2);
  });

  it("hands every guard option to the plugin's guard: replicaSync included", () => {
    expect(new FireOncePlugin({ redis }).guard.options.replicaSync).toEqual({ replicas: 'auto', timeoutMs: 200 });
    expect(new FireOncePlugin({ redis, replicaSync: false }).guard.options.replicaSync).toEqual({ replicas: 0, timeoutMs: 200 });
    const plugin = new FireOncePlugin({ redis, keyPrefix: 'p1', storeTimeoutMs: 2_000, publishWakeUps: false, replicaSync: { replicas: 2, timeoutMs: 50 } });
    expect(plugin.guard.options).toMatchObject({ keyPrefix: 'p1', storeTimeoutMs: 2_000, publishWakeUps: false, replicaSync: { replicas: 2, timeoutMs: 50 } });
  });

  // A lease is renewed every third of it: one shorter than a second runs out under a Redis round
  // trip or a pause of the worker, and the job is dispatched again (6 dispatches for 6 runs at 1 ms,
  // 2 at a "30 seconds" typed as 30).
  it.each([1, 30, 999])('refuses a leaseMs of %d, shorter than a second, on the plugin and per activity', (leaseMs) => {
    const message = `leaseMs must be at least 1000 ms (got ${leaseMs}): the lock is renewed every third of it, and a shorter lease runs out under a Redis round trip or a pause of the worker, so the job is dispatched again`;
    expect(() => new FireOncePlugin({ redis, leaseMs })).toThrow(new FireOnceConfigError(message));
    expect(() => fireOnce(async () => 'r', { leaseMs })).toThrow(new FireOnceConfigError(`fireOnce(anonymous): ${message}`));
    expect(new FireOncePlugin({ redis, leaseMs: 1_000 }).fireOnceOptions.leaseMs).toBe(1_000);
  });

  it('refuses fireOnce() of a function already marked fire-once, whose options the outer call would drop', () => {
    async function summarise(): Promise<string> {
      return 's';
    }
    const inner = fireOnce(summarise, { jobType: 'inner-jt', step: 'inner-step' });
    expect(() => fireOnce(inner, { jobType: 'outer-jt' })).toThrow(
      new FireOnceConfigError('fireOnce(summarise): the function is already marked fire-once; give every option in one fireOnce() call'),
    );
  });

  it('warns at plugin construction when a lease is too short for a renewal to land within storeTimeoutMs', () => {
    const warnings: string[] = [];
    const spy = jest.spyOn(process, 'emitWarning').mockImplementation(ttlWarningInto(warnings));
    try {
      new FireOncePlugin({ redis, leaseMs: 6_000, storeTimeoutMs: 5_000 });
      new FireOncePlugin({ redis, leaseMs: 7_500, storeTimeoutMs: 5_000 });
    } finally {
      spy.mockRestore();
    }
    expect(warnings).toEqual([
      'leaseMs (6000) leaves a renewal sent at a third of it less than storeTimeoutMs (5000) to land before the lock expires: a slow Redis can let the lock lapse mid-job; make leaseMs at least 1.5 times storeTimeoutMs',
    ]);
  });

  it("warns at plugin construction when a 'fixed' lock is shorter than storeTimeoutMs", () => {
    const warnings: string[] = [];
    const spy = jest.spyOn(process, 'emitWarning').mockImplementation(ttlWarningInto(warnings));
    try {
      new FireOncePlugin({ redis, lockMode: 'fixed', lockTtlMs: 1, artifactTtlMs: 60_000 });
      new FireOncePlugin({ redis, lockMode: 'fixed', lockTtlMs: 5_000, artifactTtlMs: 60_000 });
    } finally {
      spy.mockRestore();
    }
    expect(warnings).toEqual([
      "lockTtlMs (1) in 'fixed' mode is shorter than storeTimeoutMs (5000): the lock can expire before the job has even started, and the next invocation then dispatches it again; make lockTtlMs longer than the longest job",
    ]);
  });

  it('warns at plugin construction when artifacts would expire before their lock or the resume window', () => {
    const warnings: string[] = [];
    const spy = jest.spyOn(process, 'emitWarning').mockImplementation(ttlWarningInto(warnings));
    try {
      new FireOncePlugin({ redis, artifactTtlMs: 10_000, leaseMs: 20_000 });
      new FireOncePlugin({ redis, artifactTtlMs: 60_000, resumeWindowMs: 3_600_000 });
      new FireOncePlugin({ redis });
    } finally {
      spy.mockRestore();
    }
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/artifactTtlMs \(10000\) is shorter than leaseMs \(20000\)/);
    expect(warnings[1]).toMatch(/shorter than resumeWindowMs/);
  });
});

/** An `emitWarning` stand-in that keeps each warning's text, marked if it lacks its code (`FIRE_ONCE_TTL`, which users filter on). */
function ttlWarningInto(warnings: string[]): never {
  return ((w: string, o?: { code?: string }) => void warnings.push(o?.code === 'FIRE_ONCE_TTL' ? w : `without code FIRE_ONCE_TTL: ${w}`)) as never;
}
