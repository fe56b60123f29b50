import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ACQUIRE_REPLY, PROTOCOL_SCRIPTS } from '../../src/core/scripts';

/**
 * Ties the spin model (model/fire-once.pml, docs/model.md) to the code: the model's reply
 * alphabet, its `#define <SCRIPT>_<REPLY> <code>` block, must match the replies each Lua script
 * states in its header and returns in its body, and acquire's names must be ACQUIRE_REPLY's. A
 * reply added, renamed or renumbered on either side fails here until the other side follows, so
 * the model cannot drift from src/core/scripts/*.lua silently.
 */

/** Scripts the model leaves out, and why. Adding a script to PROTOCOL_SCRIPTS fails this test until it is modelled or listed here. */
const NOT_MODELLED: Readonly<Record<string, string>> = {
  fireOnceLogAppendV3: 'the dispatch log records decisions; it decides nothing',
};
/** Replies the model never produces, and why. */
const NEVER_PRODUCED: Readonly<Record<string, string>> = {
  ACQUIRE_CORRUPT: "the model's artifact key always holds a string",
  PARK_CORRUPT: "the model's artifact key always holds a string",
  REAP_CORRUPT: "the model's artifact key always holds a string",
};
/** The model's stand-ins (codes >= 100) for the replies without a code (a bulk string, an integer). */
const UNCODED = { FAST_FORWARD: 'a bulk string', ACQUIRED: 'an integer' } as const;

const pml = readFileSync(join(__dirname, '../../model/fire-once.pml'), 'utf8');
const modelled = PROTOCOL_SCRIPTS.filter((s) => !(s.command in NOT_MODELLED));
/** `fireOnceAcquireV3` → `ACQUIRE`. */
const prefixOf = (command: string) =>
  command
    .replace(/^fireOnce/, '')
    .replace(/V\d+$/, '')
    .toUpperCase();

/** The model's alphabet: prefix → reply name → code. */
function modelAlphabet(): Map<string, Map<string, number>> {
  const alphabet = new Map<string, Map<string, number>>();
  for (const m of pml.matchAll(/^#define ([A-Z]+)_([A-Z_]+)\s+(\d+)/gm)) {
    const [, prefix, name, code] = m;
    if (!modelled.some((s) => prefixOf(s.command) === prefix)) continue;
    if (!alphabet.has(prefix)) alphabet.set(prefix, new Map());
    alphabet.get(prefix)!.set(name, Number(code));
  }
  return alphabet;
}

/** The header's "Returns" section of a script (up to the end of the comment). */
function returnsSection(lua: string): string {
  const header = lua.slice(0, lua.indexOf(']]'));
  const at = header.search(/^\s*Returns/m);
  if (at < 0) throw new Error('no Returns section in the header');
  return header.slice(at);
}

/** Integer codes a header states: the leading `0`, `1 or 0`, `{3, ...}` of each reply line. */
function headerCodes(lua: string): Set<number> {
  const codes = new Set<number>();
  for (const m of returnsSection(lua).matchAll(/^\s+\{?(\d+)(?: or (\d+))?[\s,}]/gm)) {
    codes.add(Number(m[1]));
    if (m[2] !== undefined) codes.add(Number(m[2]));
  }
  return codes;
}

/** Integer codes a script body returns literally: `return 0`, `return {5, ...}`, `ours = 1`, the code put before waiters. */
function bodyCodes(lua: string): Set<number> {
  const body = lua.slice(lua.indexOf(']]') + 2);
  const found = body.matchAll(/(?:return \{?|ours = |table\.insert\(waiters, 1, )(\d+)/g);
  return new Set([...found].map((m) => Number(m[1])));
}

const sorted = (s: Iterable<number>) => [...s].sort((a, b) => a - b);
const alphabet = modelAlphabet();

describe('the spin model speaks the Lua scripts’ alphabet (model/fire-once.pml)', () => {
  test('it models every protocol script but the ones listed as not modelled', () => {
    expect([...alphabet.keys()].sort()).toEqual(modelled.map((s) => prefixOf(s.command)).sort());
  });

  test('acquire: the model names every reply of acquire.lua, with ACQUIRE_REPLY’s codes', () => {
    const acquire = alphabet.get('ACQUIRE')!;
    const lua = modelled.find((s) => prefixOf(s.command) === 'ACQUIRE')!.lua;
    // Each reply line: the reply's shape, then its name ('    {3, pttl, lock}       HELD: ...').
    const headerNames = new Set([...returnsSection(lua).matchAll(/^ {4}\S[^\n]*? {2,}([A-Z][A-Z_]+)\b/gm)].map((m) => m[1]));
    const codeNames = [...Object.keys(ACQUIRE_REPLY), ...Object.keys(UNCODED)].sort();
    expect([...acquire.keys()].sort()).toEqual(codeNames);
    expect([...headerNames].sort()).toEqual(codeNames);
    for (const [name, code] of Object.entries(ACQUIRE_REPLY)) {
      expect({ name, code: acquire.get(name) }).toEqual({ name, code });
      expect(returnsSection(lua)).toMatch(new RegExp(`\\{${code},[^\\n]*\\b${name}\\b`));
    }
    expect(sorted(bodyCodes(lua))).toEqual(sorted(Object.values(ACQUIRE_REPLY)));
    for (const name of Object.keys(UNCODED)) expect(acquire.get(name)).toBeGreaterThanOrEqual(100);
  });

  test.each(modelled.map((s) => prefixOf(s.command)).filter((p) => p !== 'ACQUIRE'))('%s: the model’s codes are the header’s and the body’s', (prefix) => {
    const lua = modelled.find((s) => prefixOf(s.command) === prefix)!.lua;
    const names = [...alphabet.get(prefix)!];
    const model = sorted(new Set(names.filter(([, code]) => code < 100).map(([, code]) => code)));
    expect(model).toEqual(sorted(headerCodes(lua)));
    // A stand-in names a reply without a code, which the header names the same way.
    for (const [name] of names.filter(([, code]) => code >= 100)) {
      expect(Object.keys(UNCODED)).toContain(name);
      expect(returnsSection(lua)).toMatch(new RegExp(`^\\s+<(bulk string|integer)>\\s+${name}\\b`, 'm'));
    }
    for (const code of bodyCodes(lua)) expect(model).toContain(code);
  });

  test('the model uses every reply it names, except the ones it never produces', () => {
    const unused = [...alphabet].flatMap(([prefix, names]) =>
      [...names.keys()].map((name) => `${prefix}_${name}`).filter((define) => pml.split(define).length - 1 < 2),
    );
    expect(unused.sort()).toEqual(Object.keys(NEVER_PRODUCED).sort());
  });
});
