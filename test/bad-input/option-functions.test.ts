import type { Redis } from 'ioredis';
import { FireOnceGuard, fireOnce, type FireOnceOptions } from '../../src';
import { asFailure, differences, dispatchCounter, runActivity, settle, type KeySnapshot, useBadInputFixture } from '../support/bystander';

// The option functions a user writes (scope, conflictKey, artifact.external) run on every call. One
// that throws, or a conflictKey value the payload converter refuses, is a bug in the worker's
// configuration: a non-retryable FireOnceConfigError naming the option, not an untyped error that
// Temporal would retry for ever; so is one written `async`, whose Promise would hash as `{}` for
// every call or be no scope or key. Nothing is dispatched and every key stays as it was.
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
      'conflictKey is async (returns a Promise, which the converter would hash as {} for every call)',
      { scope: ([s]) => s, conflictKey: async ([s]) => s },
      /the conflictKey option of activity "summarise" returned a Promise: it must return the value itself/,
    ],
    [
      'conflictKey is async and rejects (no unhandled rejection)',
      { scope: ([s]) => s, conflictKey: async () => boom() },
      /the conflictKey option of activity "summarise" returned a Promise: it must return the value itself/,
    ],
    [
      'scope is async',
      { scope: async ([s]: [string]) => s } as unknown as FireOnceOptions<[string]>,
      /the scope option of activity "summarise" returned a Promise/,
    ],
    [
      'artifact.external is async',
      { scope: ([s]) => s, artifact: { external: (async () => 'job:key') as unknown as () => string } },
      /the artifact\.external option of activity "summarise" returned a Promise/,
    ],
    [
      'artifact.external returns undefined (it would fall back to storing the result)',
      { scope: ([s]) => s, artifact: { external: (() => undefined) as unknown as () => string } },
      /the external artifact key of "summarise" in scope "s" must be a non-empty string \(got undefined\)/,
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
