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

import { isUtf8 } from 'node:buffer';

const LOCK = /^(\S+) (\d+) (\S*) ([\s\S]*)$/;
const ARTIFACT_MAGIC = Buffer.from('3:');
const COLON = 0x3a;
/** Longest args hash a record may carry: a base64url SHA-256 is 43 characters. */
const MAX_HASH = 64;

/** The part of a lock record after `<token> <fencingToken> `, which acquire.lua appends. */
export function lockTail(argsHash: string, holder: string): string {
  return `${argsHash} ${holder}`;
}

/**
 * A lock record back from its string; `undefined` if it is not one this protocol writes.
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
  return { token: match[1], fencingToken: Number(match[2]), argsHash: match[3], holder: match[4] };
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
