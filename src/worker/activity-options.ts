import type { Info } from '@temporalio/activity';
import { FireOnceConfigError } from '../core/errors';
import { encodeId } from '../core/keys';
import { checkDuration, checkKnownKeys, describe } from '../core/options';

/**
 * What a guarded activity does when another invocation holds the lock:
 * - `'wait'`: wait for the artifact and return it; compete again if the holder fails.
 * - `'fail'`: throw the retryable `FireOnceInFlight`, with `nextRetryDelay` from the lock's TTL.
 * - `'skip'`: resolve `undefined` at once. Only for activities typed `Promise<void>`.
 */
export type InFlightPolicy = 'wait' | 'fail' | 'skip';

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
   * Lock TTL of this activity.
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
}

/** Options for activities that return a value: they must wait or fail, never skip, and store results. */
export type ValueFireOnceOptions<A extends readonly unknown[]> = FireOnceOptions<A> & {
  readonly onInFlight?: 'wait' | 'fail';
  readonly artifact?: 'result';
};

const POLICIES: readonly InFlightPolicy[] = ['wait', 'fail', 'skip'];
const KNOWN = ['step', 'jobType', 'scope', 'onInFlight', 'lockTtlMs', 'artifactTtlMs', 'artifact'] as const;

/** Check per-activity options; throws `FireOnceConfigError` naming the field. */
export function checkActivityOptions(options: FireOnceOptions<never>, where: string): void {
  if (options === null || typeof options !== 'object') {
    throw new FireOnceConfigError(`${where}: options must be an object (got ${describe(options)})`);
  }
  checkKnownKeys(where, options, KNOWN);
  const { step, jobType, scope, onInFlight, lockTtlMs, artifactTtlMs, artifact } = options;
  try {
    if (step !== undefined) encodeId('step', step);
    if (jobType !== undefined) encodeId('jobType', jobType);
  } catch (err) {
    throw new FireOnceConfigError(`${where}: ${(err as Error).message}`);
  }
  if (scope !== undefined && typeof scope !== 'function') {
    throw new FireOnceConfigError(`${where}: scope must be a function (args, info) => string (got ${describe(scope)})`);
  }
  if (onInFlight !== undefined && !POLICIES.includes(onInFlight)) {
    throw new FireOnceConfigError(`${where}: onInFlight must be one of ${POLICIES.join(', ')} (got ${describe(onInFlight)})`);
  }
  if (lockTtlMs !== undefined) checkDuration(`${where}: lockTtlMs`, lockTtlMs);
  if (artifactTtlMs !== undefined) checkDuration(`${where}: artifactTtlMs`, artifactTtlMs);
  if (artifact !== undefined && artifact !== 'result' && typeof (artifact as ExternalArtifact)?.external !== 'function') {
    throw new FireOnceConfigError(`${where}: artifact must be 'result' or { external: (ids) => key } (got ${describe(artifact)})`);
  }
}
