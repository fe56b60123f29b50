/**
 * The values the guard stores, protocol v3: one module for the guard, the CLI and the tests, so
 * that nothing else knows their bytes. Both are plain strings, so Redis keeps each in one
 * allocation (a hash with a 256-byte field would leave listpack encoding).
 *
 * - lock:     `<token> <fencingToken> <argsHash> <holder>`; written by acquire.lua, compared by its
 *   leading `<token> ` in commit, release and extend. The token never holds a space; the holder
 *   (workflow ID, run ID, activity ID) is the rest of the string and may.
 * - artifact: `3:<argsHash>:<payload>`; written by commit.lua, read back whole by acquire.lua. The
 *   args hash is base64url or empty, so the second `:` ends it; the payload is opaque bytes.
 * - parked waiter, an entry of a waiter list: `w:<argsHash>:<task token>`, pushed by park.lua, so
 *   that whoever hands the waiters a result gives it only to those whose arguments it was made
 *   with. An entry without the `w:` is a bare task token (0.2.3 and earlier), with no args hash.
 */

/** A lock record, as {@link parseLock} reads it. */
export interface LockRecord {
  readonly token: string;
  readonly fencingToken: number;
  /** `''` when the holder's call skipped payload-conflict checks. */
  readonly argsHash: string;
  readonly holder: string;
}

/** An artifact record, as {@link parseArtifact} reads it. */
export interface ArtifactRecord {
  /** `''` when the call that produced it skipped payload-conflict checks. */
  readonly argsHash: string;
  readonly payload: Buffer;
}

/** A parked waiter's entry, as {@link parseWaiter} reads it. */
export interface WaiterEntry {
  /** `''` when the waiter skipped payload-conflict checks, or parked before entries carried it. */
  readonly argsHash: string;
  /** The waiter's activity task token: what completes or fails it. */
  readonly token: Buffer;
}

import { isUtf8 } from 'node:buffer';
import { FireOnceInvalidId } from './errors';

// Fields end at an ASCII space only, as in every language: JavaScript's `\s` would also end one at
// a no-break space or U+3000, where the Python package reads on (PROTOCOL.md section 4).
const LOCK = /^([^ ]+) (\d+) ([^ ]*) ([\s\S]*)$/;
const ARTIFACT_MAGIC = Buffer.from('3:');
// A task token is a protobuf message, which never starts with a 'w' (wire type 7 does not exist).
const WAITER_MAGIC = Buffer.from('w:');
const COLON = 0x3a;
/** Longest args hash a record may carry: a base64url SHA-256 is 43 characters. */
const MAX_HASH = 64;
const ARGS_HASH = new RegExp(`^[A-Za-z0-9_-]{0,${MAX_HASH}}$`);

/**
 * A call's args hash (`''` when absent), if every record can carry it: base64url, at most 64
 * characters. Otherwise `FireOnceInvalidId`: a space or colon would end its field early.
 */
export function checkArgsHash(argsHash: unknown): string {
  if (argsHash === undefined) return '';
  if (typeof argsHash === 'string' && ARGS_HASH.test(argsHash)) return argsHash;
  throw new FireOnceInvalidId(`argsHash must be base64url, at most ${MAX_HASH} characters (got ${JSON.stringify(argsHash)})`);
}

/** The part of a lock record after `<token> <fencingToken> `, which acquire.lua appends. */
export function lockTail(argsHash: string, holder: string): string {
  return `${argsHash} ${holder}`;
}

/**
 * A lock record back from its string; `undefined` if it is not one this protocol writes. Fields
 * end at an ASCII space; a fencing token past `Number.MAX_SAFE_INTEGER` is not one.
 *
 * @example
 * ```ts
 * import { parseLock } from 'temporal-fire-once/core';
 * parseLock('token-1 1796288676577574 h1 wf-1 run-1 act-1')?.holder; // 'wf-1 run-1 act-1'
 * ```
 */
export function parseLock(value: string): LockRecord | undefined {
  const match = LOCK.exec(value);
  if (match === null) return undefined;
  const fencingToken = Number(match[2]);
  // Past 2^53 - 1 a number is not exact: two holders' tokens could read equal (PROTOCOL.md section 4).
  if (!Number.isSafeInteger(fencingToken)) return undefined;
  return { token: match[1], fencingToken, argsHash: match[3], holder: match[4] };
}

/**
 * The artifact record of a payload, as commit.lua stores it.
 *
 * @example
 * ```ts
 * import { formatArtifact } from 'temporal-fire-once/core';
 * formatArtifact('', Buffer.from('result')).toString(); // '3::result'
 * ```
 */
export function formatArtifact(argsHash: string, payload: Buffer): Buffer {
  return Buffer.concat([ARTIFACT_MAGIC, Buffer.from(argsHash, 'latin1'), ARTIFACT_MAGIC.subarray(1), payload]);
}

/**
 * The artifact record as commit.lua's argument: the bytes of {@link formatArtifact}, as a string
 * when the payload is UTF-8 (which the args hash, base64url, always is). ioredis encodes a string
 * argument as UTF-8, so Redis receives the same bytes; a command of strings only is written as one
 * string, where a Buffer argument makes ioredis assemble and write a Buffer, which cost 3 to 4 us
 * more CPU per commit in bench/cost/profile.ts (bench/RESULTS.md, issue 11).
 */
export function artifactArgument(argsHash: string, payload: Buffer): string | Buffer {
  return isUtf8(payload) ? `3:${argsHash}:${payload.toString('utf8')}` : formatArtifact(argsHash, payload);
}

/**
 * An artifact record back from its bytes; `undefined` if it is not one this protocol writes.
 *
 * @example
 * ```ts
 * import { parseArtifact } from 'temporal-fire-once/core';
 * parseArtifact(Buffer.from('3:h1:result'))?.argsHash; // 'h1'
 * parseArtifact(Buffer.from('not a record')); // undefined
 * ```
 */
export function parseArtifact(value: Buffer): ArtifactRecord | undefined {
  if (value.length < 3 || value[0] !== ARTIFACT_MAGIC[0] || value[1] !== COLON) return undefined;
  const end = value.indexOf(COLON, 2);
  if (end < 0 || end - 2 > MAX_HASH) return undefined;
  return { argsHash: value.toString('latin1', 2, end), payload: value.subarray(end + 1) };
}

/**
 * The entry a waiter parks as (park.lua pushes it as it is).
 *
 * @example
 * ```ts
 * import { formatWaiter } from 'temporal-fire-once/core';
 * formatWaiter('h1', Buffer.from('token')).toString(); // 'w:h1:token'
 * ```
 */
export function formatWaiter(argsHash: string, token: Uint8Array): Buffer {
  return Buffer.concat([WAITER_MAGIC, Buffer.from(argsHash, 'latin1'), WAITER_MAGIC.subarray(1), token]);
}

/**
 * A waiter list's entry back: its args hash and task token. An entry that is not `w:<argsHash>:…`
 * is a bare task token, as releases before 0.2.4 parked them.
 *
 * @example
 * ```ts
 * import { parseWaiter } from 'temporal-fire-once/core';
 * parseWaiter(Buffer.from('w:h1:token')).argsHash; // 'h1'
 * parseWaiter(Buffer.from('\ntoken')).argsHash; // '' (a bare task token)
 * ```
 */
export function parseWaiter(entry: Buffer): WaiterEntry {
  const end = entry[0] === WAITER_MAGIC[0] && entry[1] === COLON ? entry.indexOf(COLON, 2) : -1;
  if (end < 0 || end - 2 > MAX_HASH) return { argsHash: '', token: entry };
  return { argsHash: entry.toString('latin1', 2, end), token: entry.subarray(end + 1) };
}
