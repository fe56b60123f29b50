import type { Redis } from 'ioredis';
import { FireOnceGuard, fireOnce } from '../../src';
import {
  CapturingLogger,
  asFailure,
  decoded,
  differences,
  dispatchCounter,
  runActivity,
  settle,
  type KeySnapshot,
  useBadInputFixture,
} from '../support/bystander';

// Results the guard cannot store. The activity did run (its job was dispatched once), so the
// row's claim is: a typed outcome, no second dispatch on retry, no artifact, other keys intact.
describe('bad input: results', () => {
  const fx = useBadInputFixture('bad-result');
  let redis: Redis;
  let guard: FireOnceGuard;
  let before: KeySnapshot;
  let counter: ReturnType<typeof dispatchCounter>;
  beforeEach(() => ({ redis, guard, before, counter } = fx));

  const guarded = (result: () => unknown) => ({
    job: fireOnce(
      async (_scope: string): Promise<unknown> => {
        await counter.hit();
        return result();
      },
      { scope: ([scope]) => scope, onInFlight: 'fail' },
    ),
  });

  /** A retry finds the lock kept: it fails in flight and dispatches nothing. */
  async function expectRetryHeldOff(activities: ReturnType<typeof guarded>) {
    const retry = await settle(runActivity({ config: { guard }, activities, activityType: 'job', args: ['s'] }));
    expect(asFailure(retry.error).type).toBe('FireOnceInFlight');
    expect(await counter.total()).toBe(1);
    expect(await redis.exists(guard.keys.artifact('s', 'job'))).toBe(0);
    expect(await redis.exists(guard.keys.lock('s', 'job'))).toBe(1);
    expect(await differences(redis, before)).toEqual([]);
  }

  it('result with a BigInt → FireOnceUnstorableResult, lock kept, not dispatched again', async () => {
    const activities = guarded(() => ({ total: 10n }));
    const failure = asFailure((await settle(runActivity({ config: { guard }, activities, activityType: 'job', args: ['s'] }))).error);
    expect(failure.type).toBe('FireOnceUnstorableResult');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/^the result of job cannot be serialised by the payload converter/);
    await expectRetryHeldOff(activities);
  });

  it('result that is a circular object → FireOnceUnstorableResult, lock kept, not dispatched again', async () => {
    const activities = guarded(() => {
      const node: { name: string; self?: unknown } = { name: 'loop' };
      node.self = node;
      return node;
    });
    const failure = asFailure((await settle(runActivity({ config: { guard }, activities, activityType: 'job', args: ['s'] }))).error);
    expect(failure.type).toBe('FireOnceUnstorableResult');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/^the result of job cannot be serialised by the payload converter/);
    await expectRetryHeldOff(activities);
  });

  it('result over maxArtifactBytes → delivered, not stored, FireOnceArtifactTooLarge logged, not dispatched again', async () => {
    const big = 'x'.repeat(4_096);
    const activities = guarded(() => ({ big }));
    const logger = new CapturingLogger();
    const result = await runActivity({ config: { guard, maxArtifactBytes: 1_024 }, activities, activityType: 'job', args: ['s'], logger });
    expect(decoded(result)).toEqual({ big });
    const errors = logger.entries.filter((e) => e.level === 'ERROR');
    expect(errors).toHaveLength(1);
    expect(errors[0].message).toMatch(/^fire-once: artifact of \d+ bytes exceeds maxArtifactBytes \(1024\); not stored/);
    expect(errors[0].meta).toMatchObject({ type: 'FireOnceArtifactTooLarge', scope: 's', step: 'job', key: guard.keys.lock('s', 'job') });
    await expectRetryHeldOff(activities);
  });
});
