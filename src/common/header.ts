import { str, u8, type Payload } from '@temporalio/common';

/**
 * The Temporal header that carries the dispatch scope from a workflow to the activities it
 * schedules. Pure constant: safe in the workflow sandbox and on the worker.
 *
 * @example
 * ```ts
 * import { SCOPE_HEADER } from 'temporal-fire-once/workflow';
 * SCOPE_HEADER; // 'temporal-fire-once-scope'
 * ```
 */
export const SCOPE_HEADER = 'temporal-fire-once-scope';

/**
 * The string a scope header carries, or `undefined` when it carries none: the one reader of the
 * header, in the workflow and in the activity interceptor, as PROTOCOL.md section 10 asks and as
 * the Python package reads it. Anything but a `json/plain` payload of well-formed UTF-8 holding a
 * JSON string is ignored, never thrown: another SDK, interceptor or client may have written it
 * (a codec's encoding, garbage), and a throw in the workflow's inbound interceptor fails every
 * workflow task. Whether the string is a valid scope is for the caller to check. Sandbox-safe.
 */
export function scopeFromHeader(payload: Payload | undefined): string | undefined {
  const encoding = payload?.metadata?.encoding;
  const data = payload?.data;
  if (encoding == null || data == null || str(encoding) !== 'json/plain') return undefined;
  const text = str(data);
  if (!sameBytes(u8(text), data)) return undefined; // not well-formed UTF-8 (or a byte order mark)
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return typeof value === 'string' ? value : undefined;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
