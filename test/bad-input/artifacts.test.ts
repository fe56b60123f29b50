import { defaultPayloadConverter } from '@temporalio/common';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { FireOnceGuard, fireOnce } from '../../src';
import { payloadToBytes } from '../../src/worker/artifact';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { storedPayload, writeArtifact } from '../support/records';
import { asFailure, decoded, differences, dispatchCounter, runActivity, seedBystander, settle, snapshot } from '../support/bystander';

// A stored artifact that is not a valid payload must end the call with the non-retryable
// FireOnceCorruptArtifact: never a crash, never a silent re-dispatch, and the bad artifact is
// left as it is, byte for byte, for inspection.
describe('bad input: corrupted artifacts', () => {
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  let counter: ReturnType<typeof dispatchCounter>;

  beforeAll(() => {
    redis = connectRedis();
  });
  beforeEach(async () => {
    prefix = testPrefix('bad-artifact');
    guard = new FireOnceGuard({ redis, keyPrefix: prefix, lockTtlMs: 60_000 });
    counter = dispatchCounter(redis, prefix);
    await seedBystander(guard);
  });
  afterEach(() => deletePrefix(redis, prefix));
  afterAll(() => redis.quit());

  const activities = {
    job: fireOnce(
      async (scope: string) => {
        await counter.hit();
        return `ran for ${scope}`;
      },
      { scope: ([scope]) => scope },
    ),
  };
  const artifactKey = () => guard.keys.artifact('s', 'job');
  const valid = payloadToBytes(defaultPayloadConverter.toPayload({ summary: 'a real result' }));

  /** Store `write`'s artifact with a TTL, run the activity, and expect a corrupt-artifact failure. */
  async function expectCorrupt(write: () => Promise<unknown>) {
    await write();
    await redis.pexpire(artifactKey(), 60_000);
    const before = await snapshot(redis, prefix);
    const { value, error } = await settle(runActivity({ config: { guard }, activities, activityType: 'job', args: ['s'] }));
    const dispatched = await counter.total();
    const outcome =
      error === undefined
        ? { returned: decoded(value) }
        : { type: (error as { type?: string }).type ?? (error as Error).name, message: (error as Error).message };
    expect({ dispatched, outcome }).toEqual({
      dispatched: 0,
      outcome: { type: 'FireOnceCorruptArtifact', message: expect.stringMatching(/^stored artifact /) },
    });
    expect(asFailure(error).nonRetryable).toBe(true);
    expect(await differences(redis, before)).toEqual([]);
  }

  it('artifact payload of garbage bytes → FireOnceCorruptArtifact, nothing dispatched, left intact', async () => {
    await expectCorrupt(() => writeArtifact(redis, artifactKey(), Buffer.from([0xff, 0xfe, 0xfd, 0x00, 0x80])));
  });

  it('artifact payload truncated mid-way → FireOnceCorruptArtifact, nothing dispatched, left intact', async () => {
    await expectCorrupt(() => writeArtifact(redis, artifactKey(), valid.subarray(0, valid.length - 5)));
  });

  it('artifact payload empty → FireOnceCorruptArtifact, nothing dispatched, left intact', async () => {
    await expectCorrupt(() => writeArtifact(redis, artifactKey(), Buffer.alloc(0)));
  });

  it('artifact payload without encoding metadata → FireOnceCorruptArtifact, nothing dispatched, left intact', async () => {
    const bare = payloadToBytes({ metadata: {}, data: Buffer.from('"no encoding"') });
    await expectCorrupt(() => writeArtifact(redis, artifactKey(), bare));
  });

  it('artifact payload of random bytes (200 cases) → a typed outcome, never a dispatch or a crash', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 0, maxLength: 64 }), async (bytes) => {
        await redis.del(artifactKey());
        await writeArtifact(redis, artifactKey(), Buffer.from(bytes));
        const { error } = await settle(runActivity({ config: { guard }, activities, activityType: 'job', args: ['s'] }));
        // Random bytes can happen to be a payload with an encoding: then it is fast-forwarded.
        if (error !== undefined) expect(asFailure(error).type).toBe('FireOnceCorruptArtifact');
        expect(await counter.total()).toBe(0);
        expect(Buffer.compare((await storedPayload(redis, artifactKey()))!, Buffer.from(bytes))).toBe(0);
      }),
      { numRuns: 200 },
    );
  });

  it('artifact that is a bare payload with no record header (as v0.1 stored artifacts) → FireOnceCorruptArtifact, nothing dispatched, left intact', async () => {
    await expectCorrupt(() => redis.set(artifactKey(), valid));
  });

  it('artifact of the wrong Redis type (a hash, as protocol v2 stored artifacts) → FireOnceCorruptArtifact, nothing dispatched, left intact', async () => {
    await expectCorrupt(() => redis.hset(artifactKey(), 'p', valid, 'h', ''));
  });

  it('artifact record whose args hash never ends → FireOnceCorruptArtifact, nothing dispatched, left intact', async () => {
    await expectCorrupt(() => redis.set(artifactKey(), `3:${'h'.repeat(80)}`));
  });
});
