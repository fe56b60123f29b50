import type { Redis } from 'ioredis';
import { FireOnceGuard, fireOnce } from '../../src';
import { asFailure, differences, dispatchCounter, runActivity, settle, type KeySnapshot, useBadInputFixture } from '../support/bystander';

// Missing scopes, through the real activity interceptor (MockActivityEnvironment passes no headers,
// so "missing" is the header-less case a prebuilt bundle without the plugin produces). Each row:
// a typed, non-retryable failure naming the problem, nothing dispatched, every key intact.
describe('bad input: missing scope', () => {
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
    expect(failure.message).toMatch(/^activity "summarise" has no dispatch scope: call setDispatchScope\(\) in the workflow, or give fireOnce a scope option/);
    await expectNothingDispatchedAndIntact();
  });

  it('scope missing (scope option returns undefined) → FireOnceMissingScope naming the activity and the option, not setDispatchScope', async () => {
    const failure = await failureOf(() => undefined as unknown as string);
    expect(failure.type).toBe('FireOnceMissingScope');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/^activity "summarise" has no dispatch scope: its scope option returned undefined: make it return the scope/);
    expect(failure.message).not.toContain('setDispatchScope');
    await expectNothingDispatchedAndIntact();
  });

  // In external-artifact mode the scope reaches the user's `external` function, which builds the
  // key from it: a bad scope is still the documented FireOnceInvalidId, found before that function
  // runs, not a FireOnceConfigError blaming the option for the key builder's refusal.
  it.each<[string, unknown, string]>([
    ['empty', '', 'scope must not be empty or whitespace only (got "")'],
    ['null', null, 'scope must be a string (got object)'],
    ['513 bytes', 'a'.repeat(513), 'scope must be at most 512 bytes of UTF-8 (got 513)'],
  ])('external-artifact mode, scope %s → FireOnceInvalidId, the external function never called', async (_name, scope, problem) => {
    let built = 0;
    const activities = {
      dispatch: fireOnce(
        async (_text: string): Promise<void> => {
          await counter.hit();
        },
        {
          scope: () => scope as string,
          artifact: {
            external: (ids) => {
              built++;
              return guard.keysFor(ids.namespace).external(ids.scope, ids.jobType);
            },
          },
        },
      ),
    };
    const { error } = await settle(runActivity({ config: { guard }, activities, activityType: 'dispatch', args: ['hello'] }));
    const failure = asFailure(error);
    expect([failure.type, failure.nonRetryable]).toEqual(['FireOnceInvalidId', true]);
    expect(failure.message).toContain(problem);
    expect(built).toBe(0);
    await expectNothingDispatchedAndIntact();
  });

  // Empty, blank, over-long, malformed and non-string scopes: ids-both-sides.test.ts, which feeds
  // one table of IDs to this interceptor, to the guard and to setDispatchScope in a real workflow.
});
