import type { Info } from '@temporalio/activity';
import { FireOnceConfigError } from '../core/errors';
import { encodeId } from '../core/keys';
import { checkBoolean, checkDuration, checkKnownKeys, describe } from '../core/options';

/**
 * What a guarded activity does when another invocation holds the lock:
 * - `'wait'`: wait for the artifact and return it; compete again if the holder fails.
 * - `'fail'`: throw the retryable `FireOnceInFlight`, with `nextRetryDelay` from the lock's TTL.
 * - `'skip'`: resolve `undefined` at once. Only for activities typed `Promise<void>`.
 */
export type InFlightPolicy = 'wait' | 'fail' | 'skip';

/**
 * How the lock lives while the activity runs:
 * - `'lease'`: a short `leaseMs` TTL, renewed every third of it while the activity is alive, so a
 *   crashed worker blocks retries for at most about one lease.
 * - `'fixed'`: the seed's fixed `lockTtlMs`, never renewed: for dispatchers whose job outlives
 *   the activity by an unknown margin.
 */
export type LockMode = 'lease' | 'fixed';

/** What a call whose arguments differ from the first call's does: fail, or share its outcome. */
export type ConflictPolicy = 'fail' | 'ignore';

/** The IDs an external artifact key is built from. */
export interface ArtifactIds {
  readonly scope: string;
  readonly jobType: string;
}

/**
 * External-artifact mode: the activity only dispatches a job, and the job itself writes its
 * artifact later under `key(ids)`. The guard tests that key exists and never writes it; a
 * fast-forward resolves `undefined`. In a Redis Cluster the key must share the lock's slot: put
 * `{<scope>}` hash tag of `FireOnceKeys.scopeBase(scope)` in it.
 */
export interface ExternalArtifact {
  readonly external: (ids: ArtifactIds) => string;
}

/** Options of one guarded activity, given to `fireOnce()` or `@FireOnce()`. */
export interface FireOnceOptions<A extends readonly unknown[] = unknown[]> {
  /**
   * Step the lock is named after.
   * @defaultValue the activity type
   */
  readonly step?: string;
  /**
   * Job type the artifact is named after.
   * @defaultValue `step`
   */
  readonly jobType?: string;
  /**
   * The scope of this call, from its arguments. Overrides the scope set by `setDispatchScope()`.
   * @defaultValue the scope propagated from the workflow
   */
  readonly scope?: (args: A, info: Info) => string;
  /**
   * In-flight policy of this activity.
   * @defaultValue the plugin's `onInFlight` (`'wait'`)
   */
  readonly onInFlight?: InFlightPolicy;
  /**
   * Lock mode of this activity.
   * @defaultValue the plugin's `lockMode` (`'lease'`)
   */
  readonly lockMode?: LockMode;
  /**
   * Lease of this activity, in `'lease'` mode.
   * @defaultValue the plugin's `leaseMs`
   */
  readonly leaseMs?: number;
  /**
   * Lock TTL of this activity: the TTL in `'fixed'` mode, and in `'lease'` mode the hold after a
   * successful external-artifact dispatch.
   * @defaultValue the plugin's `lockTtlMs`
   */
  readonly lockTtlMs?: number;
  /**
   * Artifact TTL of this activity (`'result'` mode).
   * @defaultValue the plugin's `artifactTtlMs`
   */
  readonly artifactTtlMs?: number;
  /**
   * `'result'` stores the activity's result and returns it on fast-forward; an
   * {@link ExternalArtifact} checks a key that the dispatched job writes itself.
   * @defaultValue `'result'`
   */
  readonly artifact?: 'result' | ExternalArtifact;
  /**
   * A later call with the same scope and step but other arguments: `'fail'` throws the
   * non-retryable `FireOnceKeyConflict`; `'ignore'` shares the first call's outcome.
   * @defaultValue `'fail'`
   */
  readonly onConflict?: ConflictPolicy;
  /**
   * The part of the arguments that must match, e.g. `([sessionId]) => sessionId`.
   * @defaultValue all the arguments
   */
  readonly conflictKey?: (args: A) => unknown;
  /**
   * Record every call in the dispatch log as `dispatched`, and metrics, but never guard: the
   * activity runs every time. For measuring duplicates before turning the guard on.
   * @defaultValue `false`
   */
  readonly observeOnly?: boolean;
}

/** Options for activities that return a value: they must wait or fail, never skip, and store results. */
export type ValueFireOnceOptions<A extends readonly unknown[]> = FireOnceOptions<A> & {
  readonly onInFlight?: 'wait' | 'fail';
  readonly artifact?: 'result';
};

/** Accepted in-flight policies, lock modes and conflict policies. */
export const POLICIES: readonly InFlightPolicy[] = ['wait', 'fail', 'skip'];
export const LOCK_MODES: readonly LockMode[] = ['lease', 'fixed'];
export const CONFLICT_POLICIES: readonly ConflictPolicy[] = ['fail', 'ignore'];
/** The longest lease: a lease is meant to be short; use `'fixed'` beyond this. */
export const MAX_LEASE_MS = 10 * 60 * 1000;
const KNOWN = [
  'step',
  'jobType',
  'scope',
  'onInFlight',
  'lockMode',
  'leaseMs',
  'lockTtlMs',
  'artifactTtlMs',
  'artifact',
  'onConflict',
  'conflictKey',
  'observeOnly',
] as const;

/** Check a value against a closed set; throws `FireOnceConfigError` naming the field. */
export function checkOneOf<T extends string>(field: string, value: unknown, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) {
    throw new FireOnceConfigError(`${field} must be one of ${allowed.join(', ')} (got ${describe(value)})`);
  }
  return value as T;
}

/** Check per-activity options; throws `FireOnceConfigError` naming the field. */
export function checkActivityOptions(options: FireOnceOptions<never>, where: string): void {
  if (options === null || typeof options !== 'object') {
    throw new FireOnceConfigError(`${where}: options must be an object (got ${describe(options)})`);
  }
  checkKnownKeys(where, options, KNOWN);
  const { step, jobType, scope, onInFlight, lockMode, leaseMs, lockTtlMs, artifactTtlMs, artifact, onConflict, conflictKey } = options;
  try {
    if (step !== undefined) encodeId('step', step);
    if (jobType !== undefined) encodeId('jobType', jobType);
  } catch (err) {
    throw new FireOnceConfigError(`${where}: ${(err as Error).message}`);
  }
  if (scope !== undefined && typeof scope !== 'function') {
    throw new FireOnceConfigError(`${where}: scope must be a function (args, info) => string (got ${describe(scope)})`);
  }
  if (onInFlight !== undefined) checkOneOf(`${where}: onInFlight`, onInFlight, POLICIES);
  if (lockMode !== undefined) checkOneOf(`${where}: lockMode`, lockMode, LOCK_MODES);
  if (onConflict !== undefined) checkOneOf(`${where}: onConflict`, onConflict, CONFLICT_POLICIES);
  if (conflictKey !== undefined && typeof conflictKey !== 'function') {
    throw new FireOnceConfigError(`${where}: conflictKey must be a function (args) => value (got ${describe(conflictKey)})`);
  }
  if (leaseMs !== undefined) checkDuration(`${where}: leaseMs`, leaseMs, MAX_LEASE_MS);
  if (options.observeOnly !== undefined) checkBoolean(`${where}: observeOnly`, options.observeOnly);
  if (lockTtlMs !== undefined) checkDuration(`${where}: lockTtlMs`, lockTtlMs);
  if (artifactTtlMs !== undefined) checkDuration(`${where}: artifactTtlMs`, artifactTtlMs);
  if (artifact !== undefined && artifact !== 'result' && typeof (artifact as ExternalArtifact)?.external !== 'function') {
    throw new FireOnceConfigError(`${where}: artifact must be 'result' or { external: (ids) => key } (got ${describe(artifact)})`);
  }
}
