import type { Redis } from 'ioredis';
import { FireOnceGuard, fireOnce } from '../../src';
import { asFailure, differences, dispatchCounter, runActivity, settle, type KeySnapshot, useBadInputFixture } from './support/harness';

// Bad scopes, through the real activity interceptor (MockActivityEnvironment passes no headers,
// so "missing" is the header-less case a prebuilt bundle without the plugin produces). Each row:
// a typed, non-retryable failure naming the problem, nothing dispatched, every key intact.
describe('bad input: scope', () => {
  const fx = useBadInputFixture('bad-scope');
  let redis: Redis;
  let guard: FireOnceGuard;
  let before: KeySnapshot;
  let counter: ReturnType<typeof dispatchCounter>;
  beforeEach(() => ({ redis, guard, before, counter } = fx));

  /** Run a guarded activity whose scope option is `scope` (or none), and return its failure. */
  async function failureOf(scope: ((args: [string]) => string) | undefined) {
    const body = async (_text: string): Promise<string> => {
      await counter.hit();
      return 'dispatched';
    };
    const activities = { summarise: scope === undefined ? fireOnce(body) : fireOnce(body, { scope }) };
    const { value, error } = await settle(runActivity({ config: { guard }, activities, activityType: 'summarise', args: ['hello'] }));
    expect(value).toBeUndefined();
    return asFailure(error);
  }

  async function expectNothingDispatchedAndIntact() {
    expect(await counter.total()).toBe(0);
    expect(await differences(redis, before)).toEqual([]);
  }

  it('scope missing (no scope option, no header) → FireOnceMissingScope naming the activity', async () => {
    const failure = await failureOf(undefined);
    expect(failure.type).toBe('FireOnceMissingScope');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/activity "summarise" has no dispatch scope/);
    await expectNothingDispatchedAndIntact();
  });

  it('scope missing (scope option returns undefined) → FireOnceMissingScope naming the activity', async () => {
    const failure = await failureOf(() => undefined as unknown as string);
    expect(failure.type).toBe('FireOnceMissingScope');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/activity "summarise" has no dispatch scope/);
    await expectNothingDispatchedAndIntact();
  });

  it('scope empty → FireOnceInvalidId "scope must not be empty"', async () => {
    const failure = await failureOf(() => '');
    expect(failure.type).toBe('FireOnceInvalidId');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toBe('scope must not be empty or whitespace only (got "")');
    await expectNothingDispatchedAndIntact();
  });

  it('scope whitespace-only → FireOnceInvalidId "scope must not be empty or whitespace only"', async () => {
    const failure = await failureOf(() => ' \t\n\u00a0 ');
    expect(failure.type).toBe('FireOnceInvalidId');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/^scope must not be empty or whitespace only/);
    await expectNothingDispatchedAndIntact();
  });

  it('scope 10 kB long → FireOnceInvalidId "scope must be at most 512 bytes"', async () => {
    const failure = await failureOf(() => 's'.repeat(10 * 1024));
    expect(failure.type).toBe('FireOnceInvalidId');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toBe('scope must be at most 512 bytes of UTF-8 (got 10240)');
    await expectNothingDispatchedAndIntact();
  });

  it('scope with a lone surrogate → FireOnceInvalidId "scope must be well-formed Unicode"', async () => {
    const failure = await failureOf(() => 'session-\uD800');
    expect(failure.type).toBe('FireOnceInvalidId');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/^scope must be well-formed Unicode/);
    await expectNothingDispatchedAndIntact();
  });

  it('scope not a string (a number) → FireOnceInvalidId "scope must be a string"', async () => {
    const failure = await failureOf(() => 42 as unknown as string);
    expect(failure.type).toBe('FireOnceInvalidId');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toBe('scope must be a string (got number)');
    await expectNothingDispatchedAndIntact();
  });
});
