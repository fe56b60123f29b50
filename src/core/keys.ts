import { idProblem, type IdKind } from '../common/ids';
import { FireOnceConfigError, FireOnceInvalidId, describe } from './errors';

export { MAX_ID_BYTES, type IdKind } from '../common/ids';

/**
 * The protocol version: the `v3` segment of every key, and the value of the protocol marker.
 *
 * @example
 * ```ts
 * import { PROTOCOL_VERSION } from 'temporal-fire-once/core';
 * PROTOCOL_VERSION; // 3
 * ```
 */
export const PROTOCOL_VERSION = 3;

// An ID made only of these is its own encoding: the common case costs one regular expression.
const PLAIN = /^[A-Za-z0-9._~-]{1,512}$/;
// Everything outside this set is percent-encoded, `%` included, so the encoding is injective
// and an encoded ID can never carry a glob character, a colon, a slash, a brace, whitespace or NUL.
const UNRESERVED = /^[A-Za-z0-9._~-]$/;

/**
 * Encode one ID for use inside a key: UTF-8, then every byte outside `[A-Za-z0-9._~-]` as `%XX`.
 * Throws {@link FireOnceInvalidId} for an empty, whitespace-only, over-long or malformed ID.
 *
 * @example
 * ```ts
 * import { encodeId } from 'temporal-fire-once/core';
 * encodeId('scope', 'chat:7*'); // 'chat%3A7%2A'
 * ```
 */
export function encodeId(kind: IdKind, id: unknown): string {
  if (typeof id === 'string' && PLAIN.test(id)) return id;
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
 * Inverse of {@link encodeId}; used by tooling that reads keys back. Takes only what `encodeId`
 * writes: a needless or lower-case escape (`fin%65`, `%3a`), a character left unescaped (`a:b`),
 * a malformed escape or an ID the guard refuses throws {@link FireOnceInvalidId}, so that no two
 * keys read back as one ID and a key of someone else's never passes for the guard's own.
 *
 * @example
 * ```ts
 * import { decodeId } from 'temporal-fire-once/core';
 * decodeId('chat%3A7%2A'); // 'chat:7*'
 * ```
 */
export function decodeId(encoded: string): string {
  let id: string;
  try {
    id = decodeURIComponent(encoded);
  } catch {
    throw new FireOnceInvalidId(`${JSON.stringify(encoded)} is not an encoded ID: a malformed escape`);
  }
  if (encodeId('scope', id) !== encoded) throw new FireOnceInvalidId(`${JSON.stringify(encoded)} is not the encoding encodeId writes`);
  return id;
}

/** Keys prefixes must be plain: no braces, globs or whitespace. */
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** `value` if it is a plain key prefix; otherwise a {@link FireOnceConfigError} naming `label`. */
export function checkKeyPrefix(label: string, value: unknown): string {
  if (typeof value !== 'string' || !KEY_PREFIX_PATTERN.test(value)) {
    throw new FireOnceConfigError(`${label} must be 1-64 characters of [A-Za-z0-9._:-], starting with a letter or digit (got ${describe(value)})`);
  }
  return value;
}

/**
 * The Temporal namespace keys are filed under when none is given.
 *
 * @example
 * ```ts
 * import { DEFAULT_NAMESPACE, FireOnceKeys } from 'temporal-fire-once/core';
 * new FireOnceKeys('fire-once').namespace === DEFAULT_NAMESPACE; // true
 * ```
 */
export const DEFAULT_NAMESPACE = 'default';

/** What one key of a scope is: its kind and the step or job type it names. */
export type ScopeKeyKind = 'artifact' | 'lock' | 'waiters' | 'external';

const KIND_TAGS: Readonly<Record<ScopeKeyKind, string>> = { artifact: 'a', lock: 'l', waiters: 'w', external: 'x' };
const TAG_KINDS: Readonly<Record<string, ScopeKeyKind>> = { a: 'artifact', l: 'lock', w: 'waiters', x: 'external' };

/** A key of this layout read back by {@link FireOnceKeys.parse}. */
export interface ParsedKey {
  readonly namespace: string;
  readonly scope: string;
  readonly kind: ScopeKeyKind | 'wake';
  /** The step (lock, waiters) or job type (artifact, external); absent for the wake channel. */
  readonly id?: string;
}

/**
 * The one place keys are built and parsed. Protocol v3 layout, with `{…}` a Redis Cluster hash
 * tag so that every key of one scope in one namespace lives in one slot:
 *
 * - artifact: `<prefix>:v3:{<ns>/<scope>}:a:<jobType>`, a string (see `records.ts`)
 * - lock:     `<prefix>:v3:{<ns>/<scope>}:l:<step>`, a string (see `records.ts`)
 * - waiters:  `<prefix>:v3:{<ns>/<scope>}:w:<step>`, a list of parked waiters' entries (records.ts)
 * - external: `<prefix>:v3:{<ns>/<scope>}:x:<jobType>`, a suggested key for artifacts that the
 *   dispatched job writes itself (external-artifact mode)
 * - channel:  `<prefix>:v3:{<ns>/<scope>}:wake`, where commits and releases wake waiters
 * - log:      `<prefix>:v3:<ns>:log`, the namespace's dispatch log stream
 * - channel:  `<prefix>:v3:<ns>:invalidations`, where invalidated artifact keys are published
 * - marker:   `<prefix>:protocol`, the protocol version the prefix is written with
 *
 * Every ID is encoded by {@link encodeId}, which never emits `:`, `/`, `{` or `}`, so no scope,
 * step or namespace can forge another's key, and `v3:{` (scope keys) and `v3:<ns>:` (namespace
 * keys) never meet.
 *
 * @example
 * ```ts
 * import { FireOnceKeys } from 'temporal-fire-once/core';
 * const keys = new FireOnceKeys('fire-once');
 * keys.lock('session-42', 'dispatch-summary'); // 'fire-once:v3:{default/session-42}:l:dispatch-summary'
 * keys.artifact('chat:7', 'summary');          // 'fire-once:v3:{default/chat%3A7}:a:summary'
 * new FireOnceKeys('fire-once', 'tenant-b').log(); // 'fire-once:v3:tenant-b:log'
 * ```
 */
export class FireOnceKeys {
  /** `<prefix>:v3:`, the start of every key but the protocol marker. */
  readonly root: string;
  private readonly ns: string;

  constructor(
    readonly prefix: string,
    readonly namespace: string = DEFAULT_NAMESPACE,
  ) {
    // A brace in the prefix would move every key's Cluster slot to the prefix's hash tag.
    this.root = `${checkKeyPrefix('prefix', prefix)}:v${PROTOCOL_VERSION}:`;
    this.ns = encodeId('namespace', namespace);
  }

  /** The same layout for another namespace. */
  forNamespace(namespace: string): FireOnceKeys {
    return namespace === this.namespace ? this : new FireOnceKeys(this.prefix, namespace);
  }

  /** The hash-tagged part shared by every key of `scope`: `<prefix>:v3:{<ns>/<scope>}`. */
  scopeBase(scope: string): string {
    return `${this.root}{${this.ns}/${encodeId('scope', scope)}}`;
  }

  /** The result artifact of one `(scope, jobType)`. */
  artifact(scope: string, jobType: string): string {
    return `${this.scopeBase(scope)}:a:${encodeId('jobType', jobType)}`;
  }

  /** The fire-once lock of one `(scope, step)`. */
  lock(scope: string, step: string): string {
    return `${this.scopeBase(scope)}:l:${encodeId('step', step)}`;
  }

  /** The list of waiters parked on one `(scope, step)` while its lock is held. */
  waiters(scope: string, step: string): string {
    return `${this.scopeBase(scope)}:w:${encodeId('step', step)}`;
  }

  /**
   * A key for an artifact that the dispatched job writes itself, in the scope's slot. Use it in
   * `artifact: { external: ({ scope, jobType, namespace }) => guard.keysFor(namespace).external(scope, jobType) }`
   * and have the job write the same key.
   */
  external(scope: string, jobType: string): string {
    return `${this.scopeBase(scope)}:x:${encodeId('jobType', jobType)}`;
  }

  /**
   * Why `key` cannot be the external artifact key of `jobType` in `scope` under this namespace, or
   * `undefined` if it can. Under the prefix it must be a key of that scope and namespace that the
   * guard does not write (a lock, a result artifact...): any other would fast-forward on, or be
   * written by, a job that is not this call's. A key outside the prefix is the user's own.
   *
   * @example
   * ```ts
   * import { FireOnceKeys } from 'temporal-fire-once/core';
   * new FireOnceKeys('fire-once').externalKeyProblem('jobs:42', 's', 'report'); // undefined
   * ```
   */
  externalKeyProblem(key: unknown, scope: string, jobType: string): string | undefined {
    if (typeof key !== 'string' || key === '') return `must be a non-empty string (got ${JSON.stringify(key)})`;
    if (!key.startsWith(`${this.prefix}:`)) return undefined;
    const kind = this.parse(key)?.kind;
    if (key.startsWith(`${this.scopeBase(scope)}:`) && (kind === undefined || kind === 'external')) return undefined;
    return `is ${JSON.stringify(key)}: under the guard's prefix it must be a key of this scope in namespace ${JSON.stringify(this.namespace)} that the guard does not write, such as ${JSON.stringify(this.external(scope, jobType))} (guard.keysFor(namespace).external(scope, jobType))`;
  }

  /** The pub/sub channel on which commits and releases in `scope` wake waiters. */
  wakeChannel(scope: string): string {
    return `${this.scopeBase(scope)}:wake`;
  }

  /** The dispatch log stream of this namespace. */
  log(): string {
    return `${this.root}${this.ns}:log`;
  }

  /** The pub/sub channel on which this namespace's invalidated artifact keys are published. */
  invalidations(): string {
    return `${this.root}${this.ns}:invalidations`;
  }

  /** The key that records which protocol version this prefix is written with. */
  protocolMarker(): string {
    return `${this.prefix}:protocol`;
  }

  /** A SCAN pattern for every scope key of this namespace (encoded IDs carry no glob character). */
  namespacePattern(): string {
    return `${this.root}{${this.ns}/*`;
  }

  /**
   * Read back a scope key or wake channel of this prefix, in any namespace; `undefined` for
   * anything else (another prefix, the log, another protocol version, IDs that {@link decodeId}
   * refuses: encoded otherwise than `encodeId` writes them).
   */
  parse(key: string): ParsedKey | undefined {
    if (!key.startsWith(`${this.root}{`)) return undefined;
    const match = /^\{([^/{}:]+)\/([^/{}:]+)\}:(?:([alwx]):([^:]+)|(wake))$/.exec(key.slice(this.root.length));
    if (match === null) return undefined;
    const [, ns, scope, tag, id, wake] = match;
    try {
      const base = { namespace: decodeId(ns), scope: decodeId(scope) };
      return wake === undefined ? { ...base, kind: TAG_KINDS[tag], id: decodeId(id) } : { ...base, kind: 'wake' };
    } catch {
      return undefined; // an ID encodeId never writes so: a key someone else wrote in this shape
    }
  }

  /** The key of `kind` for `(scope, id)`, for code that walks every kind. */
  ofKind(kind: ScopeKeyKind, scope: string, id: string): string {
    return `${this.scopeBase(scope)}:${KIND_TAGS[kind]}:${encodeId(kind === 'artifact' || kind === 'external' ? 'jobType' : 'step', id)}`;
  }
}
