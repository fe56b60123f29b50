// The ID table that test/bad-input/ids-both-sides.test.ts feeds to the workflow side
// (setDispatchScope, in a real workflow) and to the worker side (the guard, fireOnce and the
// activity interceptor). Pure data: the fixture workflow imports it inside the sandbox and looks a
// row up by name, so every ID reaches setDispatchScope exactly as written here, whatever a payload
// converter would make of it on the way.

/** One ID and what is wrong with it as a `scope` (`undefined`: nothing, both sides accept it). */
export interface IdRow {
  readonly name: string;
  readonly id: unknown;
  readonly problem: string | undefined;
}

const tooLong = (bytes: number) => `scope must be at most 512 bytes of UTF-8 (got ${bytes})`;
const loneSurrogate = 'scope must be well-formed Unicode (it contains a lone surrogate)';

export const BAD_IDS: readonly IdRow[] = [
  { name: 'a number', id: 42, problem: 'scope must be a string (got number)' },
  { name: 'null', id: null, problem: 'scope must be a string (got object)' },
  { name: 'undefined', id: undefined, problem: 'scope must be a string (got undefined)' },
  { name: 'an object', id: { id: 'session-1' }, problem: 'scope must be a string (got object)' },
  { name: 'empty', id: '', problem: 'scope must not be empty or whitespace only (got "")' },
  { name: 'blank (space, tab, newline, NBSP)', id: ' \t\n\u00a0 ', problem: 'scope must not be empty or whitespace only (got " \\t\\n\u00a0 ")' },
  { name: '513 bytes of ASCII', id: 'a'.repeat(513), problem: tooLong(513) },
  { name: '513 bytes of 3-byte characters', id: '€'.repeat(171), problem: tooLong(513) },
  { name: '516 bytes of 4-byte characters (surrogate pairs)', id: '🔥'.repeat(129), problem: tooLong(516) },
  { name: '10 kB', id: 's'.repeat(10 * 1024), problem: tooLong(10 * 1024) },
  { name: 'a lone high surrogate', id: 'session-\uD800', problem: loneSurrogate },
  { name: 'a lone low surrogate', id: '\uDC00-session', problem: loneSurrogate },
  { name: 'a surrogate pair in the wrong order', id: 'x\uDC00\uD83Dy', problem: loneSurrogate },
  { name: 'a high surrogate at the very end', id: 'session-\uD83D', problem: loneSurrogate },
  { name: 'a lone surrogate in 600 bytes (named before the length)', id: `${'a'.repeat(600)}\uD800`, problem: loneSurrogate },
];

/** Nasty but valid: both sides accept them, and the guard dispatches once under each. */
export const GOOD_IDS: readonly IdRow[] = [
  { name: '512 bytes of ASCII', id: 'a'.repeat(512), problem: undefined },
  { name: '512 bytes of 2-, 3- and 4-byte characters', id: `${'é'.repeat(10)}${'€'.repeat(100)}${'🔥'.repeat(40)}${'x'.repeat(32)}`, problem: undefined },
  { name: '512 bytes of 4-byte characters (128 surrogate pairs)', id: '🔥'.repeat(128), problem: undefined },
  { name: 'NUL', id: 'session\u0000one', problem: undefined },
  { name: 'glob characters, braces and colons', id: '*?[a-z]{x}:%', problem: undefined },
  { name: 'surrounding whitespace', id: '  session-1\n', problem: undefined },
];

export const ID_ROWS: readonly IdRow[] = [...BAD_IDS, ...GOOD_IDS];

/** The row called `name`; throws for a name the table does not have. */
export function idRow(name: string): IdRow {
  const row = ID_ROWS.find((r) => r.name === name);
  if (row === undefined) throw new Error(`no ID row called ${JSON.stringify(name)}`);
  return row;
}

/** The same problem as `row.problem`, for a step or job type instead of a scope. */
export function problemAs(row: IdRow, kind: 'step' | 'jobType'): string | undefined {
  return row.problem?.replace(/^scope /, `${kind} `);
}
