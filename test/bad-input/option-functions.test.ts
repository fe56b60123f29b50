import type { Redis } from 'ioredis';
import { FireOnceGuard, fireOnce, type FireOnceOptions } from '../../src';
import { asFailure, differences, dispatchCounter, runActivity, settle, type KeySnapshot, useBadInputFixture } from '../support/bystander';

// The option functions a user writes (scope, conflictKey, artifact.external) run on every call. One
// that throws, or a conflictKey value the payload converter refuses, is a bug in the worker's
// configuration: a non-retryable FireOnceConfigError naming the option, not an untyped error that
// Temporal would retry for ever. Nothing is dispatched and every key stays as it was.
describe('bad input: option functions that throw', () => {
  const fx = useBadInputFixture('bad-option-fn');
  let redis: Redis;
  let guard: FireOnceGuard;
  let before: KeySnapshot;
  let counter: ReturnType<typeof dispatchCounter>;
  beforeEach(() => ({ redis, guard, before, counter } = fx));

  const boom = (): never => {
    throw new TypeError('boom');
  };
  it.each<[string, FireOnceOptions<[string]>, RegExp]>([
    ['scope throws', { scope: boom }, /the scope option of activity "summarise" threw: TypeError: boom/],
    ['conflictKey throws', { scope: ([s]) => s, conflictKey: boom }, /the conflictKey option of activity "summarise" threw: TypeError: boom/],
    [
      'conflictKey returns a value the payload converter refuses (a BigInt)',
      { scope: ([s]) => s, conflictKey: () => 10n },
      /the conflictKey option of activity "summarise" gave a value the payload converter cannot serialise \(\w+\)/,
    ],
    [
      'artifact.external throws',
      { scope: ([s]) => s, artifact: { external: boom } },
      /the artifact\.external option of activity "summarise" threw: TypeError: boom/,
    ],
  ])('%s → FireOnceConfigError naming the option, non-retryable, nothing dispatched', async (_name, options, message) => {
    const activities = {
      summarise: fireOnce(async (_scope: string): Promise<void> => {
        await counter.hit();
      }, options),
    };
    const { error } = await settle(runActivity({ config: { guard }, activities, activityType: 'summarise', args: ['s'] }));
    const failure = asFailure(error);
    expect([failure.type, failure.nonRetryable]).toEqual(['FireOnceConfigError', true]);
    expect(failure.message).toMatch(message);
    expect(await counter.total()).toBe(0);
    expect(await differences(redis, before)).toEqual([]);
  });
});
