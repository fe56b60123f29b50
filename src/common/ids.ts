/**
 * The one validation of a scope, step or job type, shared by the workflow side
 * (`setDispatchScope`) and the worker side (`encodeId`), so that both accept and refuse the same
 * IDs with the same message. Sandbox-safe: no `node:*`, no `Buffer`, no `isWellFormed` (the
 * UTF-8 length and the lone-surrogate check are one pass over the UTF-16 code units).
 */

/**
 * Longest accepted scope, step, job type or namespace, in UTF-8 bytes, before encoding.
 *
 * @example
 * ```ts
 * import { MAX_ID_BYTES } from 'temporal-fire-once/core';
 * Buffer.byteLength('session-42') <= MAX_ID_BYTES; // true
 * ```
 */
export const MAX_ID_BYTES = 512;

/** Which kind of ID is being checked; named in error messages. */
export type IdKind = 'scope' | 'step' | 'jobType' | 'namespace';

/**
 * What is wrong with `id` as a `kind`, as the message of a `FireOnceInvalidId`, or `undefined`
 * when it is usable: a string, not empty or whitespace only, well-formed Unicode (no lone
 * surrogate), and at most {@link MAX_ID_BYTES} bytes of UTF-8. Any other character, NUL and
 * glob characters included, is fine: keys percent-encode IDs.
 */
export function idProblem(kind: IdKind, id: unknown): string | undefined {
  if (typeof id !== 'string') return `${kind} must be a string (got ${typeof id})`;
  if (id.trim().length === 0) return `${kind} must not be empty or whitespace only (got ${JSON.stringify(id)})`;
  const bytes = utf8Length(id);
  if (bytes === undefined) return `${kind} must be well-formed Unicode (it contains a lone surrogate)`;
  if (bytes > MAX_ID_BYTES) return `${kind} must be at most ${MAX_ID_BYTES} bytes of UTF-8 (got ${bytes})`;
  return undefined;
}

/** The UTF-8 length of `text` in bytes, or `undefined` if it holds a lone surrogate. */
function utf8Length(text: string): number | undefined {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit < 0xd800 || unit > 0xdfff) bytes += 3;
    else if (unit <= 0xdbff && isLowSurrogate(text.charCodeAt(i + 1))) {
      bytes += 4; // a surrogate pair: one code point above U+FFFF
      i++;
    } else return undefined;
  }
  return bytes;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff; // NaN past the end is not
}
