import { idProblem, type IdKind } from '../common/ids';
import { FireOnceInvalidId } from './errors';

export { MAX_ID_BYTES, type IdKind } from '../common/ids';

// Everything outside this set is percent-encoded, `%` included, so the encoding is injective
// and an encoded ID can never carry a glob character, a colon, a brace, whitespace or NUL.
const UNRESERVED = /^[A-Za-z0-9._~-]$/;

/**
 * Encode one ID for use inside a key: UTF-8, then every byte outside `[A-Za-z0-9._~-]` as `%XX`.
 * Throws {@link FireOnceInvalidId} for an empty, whitespace-only, over-long or malformed ID.
 *
 * @example
 * ```ts
 * import { encodeId } from 'temporal-fire-once';
 * encodeId('scope', 'chat:7*'); // 'chat%3A7%2A'
 * ```
 */
export function encodeId(kind: IdKind, id: unknown): string {
  const problem = idProblem(kind, id); // the same check as setDispatchScope's
  if (problem !== undefined) throw new FireOnceInvalidId(problem);
  const bytes = Buffer.from(id as string, 'utf8');
  let out = '';
  for (const byte of bytes) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x80 && UNRESERVED.test(ch) ? ch : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * Inverse of {@link encodeId}; used by tests and tooling that read keys back.
 *
 * @example
 * ```ts
 * import { decodeId } from 'temporal-fire-once';
 * decodeId('chat%3A7%2A'); // 'chat:7*'
 * ```
 */
export function decodeId(encoded: string): string {
  return decodeURIComponent(encoded);
}

/** Keys prefixes must be plain: no braces, globs or whitespace. */
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/**
 * The one place keys are built. Layout, with `{…}` a Redis Cluster hash tag so that every key of
 * one scope lives in one slot:
 *
 * - lock:     `<prefix>:{<scope>}:lock:<step>`
 * - artifact: `<prefix>:{<scope>}:artifact:<jobType>`
 * - fencing:  `<prefix>:{<scope>}:fence:<step>`, the counter behind fencing tokens
 * - external: `<prefix>:{<scope>}:external:<jobType>`, a suggested key for artifacts that the
 *   dispatched job writes itself (external-artifact mode)
 * - channel:  `<prefix>:{<scope>}:wake`, the pub/sub channel that wakes waiters of the scope
 * - log:      `<prefix>:log`, the dispatch log stream (one per prefix, in its own slot)
 * - channel:  `<prefix>:invalidations`, where invalidated artifact keys are published
 *
 * @example
 * ```ts
 * import { FireOnceKeys } from 'temporal-fire-once';
 * const keys = new FireOnceKeys('fire-once');
 * keys.lock('session-42', 'dispatch-summary'); // 'fire-once:{session-42}:lock:dispatch-summary'
 * keys.artifact('chat:7', 'summary');          // 'fire-once:{chat%3A7}:artifact:summary'
 * keys.external('chat:7', 'summary');          // 'fire-once:{chat%3A7}:external:summary'
 * ```
 */
export class FireOnceKeys {
  constructor(readonly prefix: string) {}

  /** The hash-tagged part shared by every key of `scope`: `<prefix>:{<scope>}`. */
  scopeBase(scope: string): string {
    return `${this.prefix}:{${encodeId('scope', scope)}}`;
  }

  /** The fire-once lock of one `(scope, step)`. */
  lock(scope: string, step: string): string {
    return `${this.scopeBase(scope)}:lock:${encodeId('step', step)}`;
  }

  /** The result artifact of one `(scope, jobType)`. */
  artifact(scope: string, jobType: string): string {
    return `${this.scopeBase(scope)}:artifact:${encodeId('jobType', jobType)}`;
  }

  /** The dispatch log stream of this prefix. */
  log(): string {
    return `${this.prefix}:log`;
  }

  /** The pub/sub channel on which invalidated artifact keys are published to local caches. */
  invalidations(): string {
    return `${this.prefix}:invalidations`;
  }

  /** The fencing counter of one `(scope, step)`. */
  fence(scope: string, step: string): string {
    return `${this.scopeBase(scope)}:fence:${encodeId('step', step)}`;
  }

  /** The pub/sub channel on which commits and releases in `scope` wake waiters. */
  wakeChannel(scope: string): string {
    return `${this.scopeBase(scope)}:wake`;
  }

  /**
   * A key for an artifact that the dispatched job writes itself, in the scope's slot. Use it in
   * `artifact: { external: ({ scope, jobType }) => keys.external(scope, jobType) }` and have the
   * job write the same key.
   */
  external(scope: string, jobType: string): string {
    return `${this.scopeBase(scope)}:external:${encodeId('jobType', jobType)}`;
  }
}
