import { FireOnceConfigError, type DispatchTarget } from '../../src';
import type { FireOnceKeys } from '../../src/core';
import { useGuardFixture } from '../support/redis';

// A DispatchTarget is public input: its externalArtifactKey is what acquire tests for and what a
// commit of its lease writes. The guard takes one under its prefix only where the interceptor
// would: a key of the target's scope and namespace that the guard does not write itself.
describe('FireOnceGuard: the external artifact key of a target', () => {
  const fx = useGuardFixture('xkey');
  const mine = (externalArtifactKey: unknown): DispatchTarget => ({ scope: 'mine', step: 'job', jobType: 'job', externalArtifactKey }) as DispatchTarget;
  const allKeys = async () => (await fx.redis.keys(`${fx.prefix}:*`)).sort();

  it.each<[string, (keys: FireOnceKeys) => unknown]>([
    ["another scope's result", (keys) => keys.artifact('victim', 'job')],
    ["another scope's external key", (keys) => keys.external('victim', 'job')],
    ["another namespace's external key", (keys) => keys.forNamespace('elsewhere').external('mine', 'job')],
    ['its own result key', (keys) => keys.artifact('mine', 'job')],
    ['its own lock', (keys) => keys.lock('mine', 'job')],
    ['an empty key', () => ''],
  ])('%s: acquire refuses it with FireOnceConfigError, and touches nothing', async (_row, keyOf) => {
    const victim = await fx.guard.acquire({ scope: 'victim', step: 'job', jobType: 'job' });
    if (victim.kind !== 'acquired') throw new Error('the victim could not take its lock');
    await fx.guard.commit(victim.lease, Buffer.from("the victim's result"));
    const before = await allKeys();
    const stored = await fx.redis.getBuffer(victim.lease.artifactKey);
    const attempt = async () => {
      const outcome = await fx.guard.acquire(mine(keyOf(fx.guard.keys)));
      if (outcome.kind === 'acquired') await fx.guard.commit(outcome.lease, Buffer.from('forged')); // the job's result goes there
      return outcome.kind;
    };
    await expect(attempt()).rejects.toThrow(FireOnceConfigError);
    await expect(attempt()).rejects.toThrow(/external artifact key/);
    expect(await allKeys()).toEqual(before);
    expect(await fx.redis.getBuffer(victim.lease.artifactKey)).toEqual(stored);
  });

  it.each<[string, (keys: FireOnceKeys) => string]>([
    ['its own external key', (keys) => keys.external('mine', 'job')],
    ['a key outside the prefix', () => 'elsewhere:jobs:mine'],
  ])('%s: acquire takes it', async (_row, keyOf) => {
    const outcome = await fx.guard.acquire(mine(keyOf(fx.guard.keys)));
    expect(outcome.kind).toBe('acquired');
    if (outcome.kind === 'acquired') await fx.guard.release(outcome.lease);
  });
});
