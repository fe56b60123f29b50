import type { Info } from '@temporalio/activity';
import { FireOnceConfigError, describe } from '../core/errors';
import { encodeId } from '../core/keys';
import { GUARD_OPTIONS, checkKnownKeys, flag, oneOf } from '../core/options';
import { ACTIVITY_DEFAULT_OPTIONS, POLICIES, type InFlightPolicy, type LockMode } from './options';

/** What a call whose arguments differ from the first call's does: fail, or share its outcome. */
export type ConflictPolicy = 'fail' | 'ignore';

/** The IDs an external artifact key is built from. */
export interface ArtifactIds {
  readonly scope: string;
  readonly jobType: string;
  /** The namespace this call's keys are filed under: the worker's `keyNamespace`, else the Temporal namespace. */
  readonly namespace: string;
}

/**
 * External-artifact mode: the activity only dispatches a job, and the job itself writes its
 * artifact later under `key(ids)`. The guard tests that key exists and never writes it; a
 * fast-forward resolves `undefined`. Build the key with
 * `guard.keysFor(namespace).external(scope, jobType)`: it is in the scope's Redis Cluster slot and
 * in the call's namespace. A key under the guard's prefix that is not that scope's and that
 * namespace's external key is refused with `FireOnceConfigError`.
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
   * @defaultValue the plugin's `onInFlight` (`'park'`)
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

/** Options for activities that return a value: they must park, wait or fail, never skip, and store results. */
export type ValueFireOnceOptions<A extends readonly unknown[]> = FireOnceOptions<A> & {
  readonly onInFlight?: 'park' | 'wait' | 'fail';
  readonly artifact?: 'result';
};

const CONFLICT_POLICY = oneOf<ConflictPolicy>(['fail', 'ignore'], 'fail');
/** Per activity, `'skip'` too: the types allow it only on activities returning `Promise<void>`. */
const ACTIVITY_POLICY = oneOf<InFlightPolicy>(POLICIES, 'park');
const OBSERVE_ONLY = flag(false);
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
  const label = (name: string) => `${where}: ${name}`;
  if (onInFlight !== undefined) ACTIVITY_POLICY.check(label('onInFlight'), onInFlight);
  if (lockMode !== undefined) ACTIVITY_DEFAULT_OPTIONS.lockMode.check(label('lockMode'), lockMode);
  if (onConflict !== undefined) CONFLICT_POLICY.check(label('onConflict'), onConflict);
  if (conflictKey !== undefined && typeof conflictKey !== 'function') {
    throw new FireOnceConfigError(`${where}: conflictKey must be a function (args) => value (got ${describe(conflictKey)})`);
  }
  if (leaseMs !== undefined) ACTIVITY_DEFAULT_OPTIONS.leaseMs.check(label('leaseMs'), leaseMs);
  if (options.observeOnly !== undefined) OBSERVE_ONLY.check(label('observeOnly'), options.observeOnly);
  if (lockTtlMs !== undefined) GUARD_OPTIONS.lockTtlMs.check(label('lockTtlMs'), lockTtlMs);
  if (artifactTtlMs !== undefined) GUARD_OPTIONS.artifactTtlMs.check(label('artifactTtlMs'), artifactTtlMs);
  if (artifact !== undefined && artifact !== 'result' && typeof (artifact as ExternalArtifact)?.external !== 'function') {
    throw new FireOnceConfigError(`${where}: artifact must be 'result' or { external: (ids) => key } (got ${describe(artifact)})`);
  }
}
