import { createHash } from 'node:crypto';
import type { Payload, PayloadConverter } from '@temporalio/common';
import { FireOnceConfigError } from '../core/errors';
import type { FireOnceOptions } from './activity-options';
import { converterFailure } from './artifact';

const JSON_PLAIN = 'json/plain';
const BINARY_NULL = 'binary/null';

/**
 * The hash stored with the lock and the artifact to detect calls with other arguments (PROTOCOL.md,
 * "Args hash"): SHA-256, base64url, over the payloads the worker's converter makes of the
 * arguments (or of `conflictKey(args)`). A `json/plain` payload counts by its canonical JSON
 * (keys sorted, no whitespace, integral numbers without a fraction), and a `binary/null` one as
 * JSON `null` (the Python SDK sends `None`, and TypeScript `undefined`, that way), so that
 * workers of every SDK hash the same arguments alike; any other payload by its metadata and
 * bytes. `''` when conflicts are ignored.
 */
export function argsHash(options: FireOnceOptions, args: readonly unknown[], converter: PayloadConverter): string {
  if (options.onConflict === 'ignore') return '';
  const values = options.conflictKey === undefined ? args : [notAPromise(options.conflictKey(args as unknown[]))];
  const hash = createHash('sha256');
  for (const value of values) {
    const payload = toPayload(converter, value);
    const canonical = canonicalJson(payload);
    if (canonical !== undefined) {
      hash.update(`j${Buffer.byteLength(canonical)}:`).update(canonical);
      continue;
    }
    const metadata = Object.entries(payload.metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
    hash.update(`p${metadata.length}:`);
    for (const [key, bytes] of metadata) hash.update(`${Buffer.byteLength(key)}:${key}${bytes?.length ?? 0}:`).update(bytes ?? new Uint8Array());
    hash.update(`${payload.data?.length ?? 0}:`).update(payload.data ?? new Uint8Array());
  }
  return hash.digest('base64url');
}

/**
 * `value`, unless it is a Promise (or any thenable): an option function written `async` returns
 * one, which the payload converter would hash as `{}` for every call, so no conflict would ever be
 * found. Throws {@link FireOnceConfigError}, after making sure a rejection is not left unhandled.
 */
export function notAPromise<T>(value: T): T {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return value;
  const then = (value as { then?: unknown }).then;
  if (typeof then !== 'function') return value;
  then.call(value, undefined, () => undefined);
  throw new FireOnceConfigError('returned a Promise: it must return the value itself (a synchronous function, not an async one)');
}

/** The arguments reached the worker through this converter, so only a `conflictKey` value can fail here. */
function toPayload(converter: PayloadConverter, value: unknown): Payload {
  try {
    return converter.toPayload(value);
  } catch (err) {
    throw new FireOnceConfigError(`gave a value the payload converter cannot serialise (${converterFailure(err)})`);
  }
}

/** The canonical JSON of a `json/plain` or `binary/null` payload, or `undefined` for any other payload. */
function canonicalJson(payload: Payload): string | undefined {
  const encoding = payload.metadata?.encoding;
  if (encoding === undefined || encoding === null) return undefined;
  const name = Buffer.from(encoding).toString();
  if (name === BINARY_NULL) return 'null';
  if (name !== JSON_PLAIN) return undefined;
  return stringify(JSON.parse(Buffer.from(payload.data ?? new Uint8Array()).toString('utf8')));
}

function stringify(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stringify).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${stringify((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
