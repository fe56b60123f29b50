/**
 * What the guard's calls take and give back: the lease a won lock gives, the decision of an
 * acquire, what a commit or a release found, and the per-call options.
 */
import { createHash } from 'node:crypto';
import type { DispatchTarget } from './target';

/** A held lock: what {@link FireOnceGuard.commit} and {@link FireOnceGuard.release} need. */
export interface Lease {
  readonly target: DispatchTarget;
  readonly lockKey: string;
  readonly artifactKey: string;
  readonly waitersKey: string;
  /** The random token the lock holds. Secret to its owner: log {@link holderId} instead. */
  readonly token: string;
  /**
   * The fencing token: strictly greater than every earlier holder's of this `(scope, step)`.
   * Send it with every write to a downstream system, which rejects writes with a lower one.
   */
  readonly fencingToken: number;
}

/** The decision of {@link FireOnceGuard.acquire}. */
export type AcquireOutcome =
  | {
      readonly kind: 'fast-forward';
      /** The stored result (the payload the commit stored), or empty for an external artifact. */
      readonly artifact: Buffer;
      readonly artifactKey: string;
      /** The artifact's TTL left in ms: always for an external artifact, else with `readTtl`. */
      readonly ttlMs?: number;
    }
  | { readonly kind: 'acquired'; readonly lease: Lease }
  | {
      readonly kind: 'held';
      readonly ttlMs: number;
      readonly lockKey: string;
      /** The holder identity stored with the lock. */
      readonly holder: string;
      /** True when the holder is an earlier attempt of this very call. */
      readonly sameHolder: boolean;
      readonly fencingToken: number;
    };

/** What a commit or a release found: whether the lock was still ours, and who was parked on it. */
export interface Settled {
  /** Commit: the lock still held this lease's token and is now deleted. Release: it was, and is deleted. */
  readonly ours: boolean;
  /** Entries of the waiters parked on the lock (`parseWaiter`), now handed to the caller to complete or fail. */
  readonly waiters: readonly Buffer[];
}

/** What a commit found: {@link Settled}, and whether the artifact was written. */
export interface Committed extends Settled {
  /**
   * False: the commit was refused and changed nothing, because another holder's lock stands, or
   * no lock stands and another result is stored (a later dispatch's). A late holder never
   * replaces the newest holder's result; `waiters` is empty then.
   */
  readonly stored: boolean;
}

/** Per-call overrides of the guard's TTLs. */
export interface AcquireOptions {
  /** The lock's initial TTL: a lease to be renewed, or a fixed TTL. */
  readonly lockTtlMs?: number;
  /** Read the artifact's TTL left on a fast-forward (for a cache that must not outlive it). */
  readonly readTtl?: boolean;
}

/** Options of one {@link FireOnceGuard.commit}. */
export interface CommitOptions {
  /** How long the artifact lives; the guard's `artifactTtlMs` when left out. */
  readonly artifactTtlMs?: number;
}

// The per-call options by name, for the guard's check of an unknown one.
export const ACQUIRE_OPTIONS: readonly string[] = Object.keys({ lockTtlMs: true, readTtl: true } satisfies Record<keyof AcquireOptions, true>);
export const COMMIT_OPTIONS: readonly string[] = Object.keys({ artifactTtlMs: true } satisfies Record<keyof CommitOptions, true>);

/**
 * A short hash of a lock token, safe to log.
 *
 * @example
 * ```ts
 * import { holderId } from 'temporal-fire-once/core';
 * holderId('a-secret-lock-token'); // 12 hex characters, safe to log
 * ```
 */
export function holderId(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 12);
}
