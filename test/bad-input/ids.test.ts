import type { Redis } from 'ioredis';
import { FireOnceGuard, fireOnce } from '../../src';
import { encodeId } from '../../src/core';
import { BYSTANDER, decoded, differences, dispatchCounter, runActivity, scanKeys, type KeySnapshot, useBadInputFixture } from '../support/bystander';

// IDs with glob characters, separators, braces, control characters or non-ASCII text are
// accepted: keys.ts percent-encodes them. Each row shows, on a real Redis, that such an ID works,
// that it never shares a key with its look-alikes (the ID with the character left out or replaced,
// or the literal text of its own encoding), and that SCAN MATCH on one scope's key base finds
// that scope's keys and no other's.
const ROWS: readonly (readonly [string, string])[] = [
  ['asterisk', '*'],
  ['question mark', '?'],
  ['open bracket', '['],
  ['close bracket', ']'],
  ['open brace', '{'],
  ['close brace', '}'],
  ['colon', ':'],
  ['newline', '\n'],
  ['NUL', '\0'],
  ['non-ASCII text', 'é日本🔥'],
];

describe('bad input: IDs with special characters work, on distinct keys', () => {
  const fx = useBadInputFixture('bad-ids');
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  let before: KeySnapshot;
  let counter: ReturnType<typeof dispatchCounter>;
  beforeEach(() => ({ redis, prefix, guard, before, counter } = fx));

  const allKeys = (pattern: string) => scanKeys(redis, pattern);

  it.each(ROWS)('scope, step and job type containing %s work, without colliding or globbing', async (_name, c) => {
    const scopes = [`a${c}b`, 'ab', 'aXb', encodeId('scope', `a${c}b`)];
    const steps = [
      { step: `send${c}`, jobType: `report${c}` },
      { step: 'send', jobType: 'report' },
      { step: encodeId('step', `send${c}`), jobType: encodeId('jobType', `report${c}`) },
    ];
    const label = (scope: string, step: string) => JSON.stringify([scope, step]);
    const activities = Object.fromEntries(
      steps.map(({ step, jobType }, i) => [
        `job${i}`,
        fireOnce(
          async (scope: string) => {
            await counter.hit(label(scope, step));
            return { scope, step };
          },
          { scope: ([scope]) => scope, step, jobType },
        ),
      ]),
    );

    for (const round of [1, 2]) {
      for (const scope of scopes) {
        for (const [i, { step }] of steps.entries()) {
          const result = await runActivity({ config: { guard }, activities, activityType: `job${i}`, args: [scope] });
          expect({ round, result: decoded(result) }).toEqual({ round, result: { scope, step } });
        }
      }
    }
    for (const scope of scopes) for (const { step } of steps) expect(await counter.count(label(scope, step))).toBe(1);

    const keysOf = (scope: string, { step, jobType }: (typeof steps)[number]) => [
      guard.keys.lock(scope, step),
      guard.keys.waiters(scope, step),
      guard.keys.artifact(scope, jobType),
    ];
    const all = scopes.flatMap((scope) => steps.flatMap((s) => keysOf(scope, s)));
    expect(new Set(all).size).toBe(scopes.length * steps.length * 3); // no two IDs share a key
    // Each commit deleted its lock: the artifacts are all that is left.
    const expected = scopes.flatMap((scope) => steps.map((s) => guard.keys.artifact(scope, s.jobType)));
    const bystanderBase = guard.keys.scopeBase(BYSTANDER.scope);
    const stored = (await allKeys(`${prefix}:*`)).filter(
      (k) => k !== counter.key && !k.startsWith(bystanderBase) && k !== guard.keys.log() && k !== guard.keys.protocolMarker(),
    );
    expect(stored).toEqual([...expected].sort());
    for (const key of stored) expect(key).toMatch(new RegExp(`^${prefix}:v3:\\{default\\/[A-Za-z0-9._~%-]+\\}:a:[A-Za-z0-9._~%-]+$`));

    // SCAN MATCH on one scope's base is glob-safe: it finds that scope's keys and nobody else's.
    for (const scope of scopes) {
      const own = expected.filter((k) => k.startsWith(`${guard.keys.scopeBase(scope)}:`)).sort();
      expect(own).toHaveLength(steps.length);
      expect(await allKeys(`${guard.keys.scopeBase(scope)}:*`)).toEqual(own);
    }
    expect(await differences(redis, before)).toEqual([]);
  });

  it('IDs are not normalised: é as one code point (NFC) and as e + combining accent (NFD) are two scopes', async () => {
    const [nfc, nfd] = ['caf\u00e9', 'cafe\u0301'];
    expect(nfc.normalize('NFC')).toBe(nfd.normalize('NFC')); // the same text to a reader
    const activities = {
      job: fireOnce(
        async (scope: string) => {
          await counter.hit(scope);
          return scope;
        },
        { scope: ([scope]) => scope, step: 'send', jobType: 'report' },
      ),
    };
    for (const scope of [nfc, nfd, nfc, nfd])
      expect(decoded(await runActivity({ config: { guard }, activities, activityType: 'job', args: [scope] }))).toBe(scope);
    expect([await counter.count(nfc), await counter.count(nfd)]).toEqual([1, 1]);
    expect(guard.keys.artifact(nfc, 'report')).not.toBe(guard.keys.artifact(nfd, 'report'));
    expect(await differences(redis, before)).toEqual([]);
  });
});
