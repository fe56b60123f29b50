/**
 * The target of one guarded dispatch, and the checks of a call against it: its fields, and the
 * args hash of a stored artifact or a held lock against the call's.
 */
import { FireOnceConfigError, FireOnceCorruptArtifact, FireOnceKeyConflict, FireOnceProtocolError, describe, type FireOnceErrorContext } from './errors';
import { holderId } from './outcomes';
import { parseArtifact, parseLock, type LockRecord } from './records';

/** What one dispatch is guarded on. */
export interface DispatchTarget {
  /** The session or job the dispatch belongs to; shared by every invocation that must not repeat it. */
  readonly scope: string;
  /** The step whose dispatch fires once; names the lock. */
  readonly step: string;
  /** The job type whose result artifact ends the step; names the artifact. */
  readonly jobType: string;
  /**
   * The namespace the keys are filed under; the guard's `namespace` option when absent. The
   * Temporal adapter passes the activity's namespace, so namespaces never share a lock or result.
   */
  readonly namespace?: string;
  /**
   * A key written by someone else (the job) once the job's artifact is durable. When set, the
   * guard only tests that key exists and never writes an artifact itself.
   */
  readonly externalArtifactKey?: string;
  /**
   * Who asks: a later attempt of the same call has the same holder, so it is never mistaken for a
   * conflicting stranger. The Temporal adapter uses workflow ID, run ID and activity ID.
   */
  readonly holder?: string;
  /**
   * A hash of the call's arguments (base64url, no spaces or colons). A later call with the same
   * scope and step but another hash gets `FireOnceKeyConflict`. Omit it to skip the check.
   */
  readonly argsHash?: string;
}

// Every field of each type, so that one added to the type and not here fails to compile instead
// of being refused at run time.
const TARGET_FIELDS: readonly string[] = Object.keys({
  scope: true,
  step: true,
  jobType: true,
  namespace: true,
  externalArtifactKey: true,
  holder: true,
  argsHash: true,
} satisfies Record<keyof DispatchTarget, true>);
/**
 * Throws {@link FireOnceConfigError} for a target that is not an object or has a field of another
 * name: a misspelt `namespace` would file the call under the guard's own namespace, sharing its
 * locks and results, and a misspelt `argsHash` would skip the conflict check.
 */
export function checkTarget(where: string, target: unknown): void {
  if (target === null || typeof target !== 'object') throw new FireOnceConfigError(`${where}: target must be an object (got ${describe(target)})`);
  for (const field of Object.keys(target)) {
    if (!TARGET_FIELDS.includes(field)) throw new FireOnceConfigError(`${where}: unknown target field ${JSON.stringify(field)}`);
  }
}

/** The payload of a stored artifact record, once its args hash is checked against the call's. */
export function storedPayload(record: Buffer, target: DispatchTarget, artifactKey: string): Buffer {
  const artifact = parseArtifact(record);
  if (artifact === undefined) {
    throw new FireOnceCorruptArtifact('stored artifact is not one this library wrote: not an artifact record', contextOf(target, artifactKey));
  }
  if (differs(target.argsHash ?? '', artifact.argsHash)) throw conflict(target, artifactKey, 'the stored artifact was produced');
  return artifact.payload;
}

/**
 * The lock record of another holder, as acquire.lua and park.lua reply with it, once checked against
 * the call: a record this protocol never writes is {@link FireOnceProtocolError}, and a lock taken
 * with other arguments {@link FireOnceKeyConflict}, unless its holder is an earlier attempt of this
 * very call (`sameHolder`).
 */
export function heldLock(record: Buffer, target: DispatchTarget, argsHash: string, lockKey: string): LockRecord & { readonly sameHolder: boolean } {
  const lock = parseLock(record.toString());
  if (lock === undefined) throw new FireOnceProtocolError('the lock holds a value this protocol never writes', contextOf(target, lockKey));
  const sameHolder = lock.holder !== '' && lock.holder === target.holder;
  if (!sameHolder && differs(argsHash, lock.argsHash)) throw conflict(target, lockKey, 'the dispatch in flight was started');
  return { ...lock, sameHolder };
}

/** A script found at the artifact key what no commit writes; `detail` is its reply saying what. */
export function corruptArtifact(detail: Buffer, target: DispatchTarget, artifactKey: string): FireOnceCorruptArtifact {
  return new FireOnceCorruptArtifact(`stored artifact is not one this library wrote: ${detail.toString()}`, contextOf(target, artifactKey));
}

/** Two args hashes disagree only when both calls recorded one. */
export function differs(mine: string, stored: string): boolean {
  return mine !== '' && stored !== '' && mine !== stored;
}

function conflict(target: DispatchTarget, key: string, what: string): FireOnceKeyConflict {
  return new FireOnceKeyConflict(
    `step ${JSON.stringify(target.step)} in scope ${JSON.stringify(target.scope)} was called with other arguments than ${what} with`,
    contextOf(target, key),
  );
}

export function contextOf(target: DispatchTarget, key: string, token?: string): FireOnceErrorContext {
  return {
    key,
    scope: target.scope,
    step: target.step,
    jobType: target.jobType,
    ...(token === undefined ? {} : { holder: holderId(token) }),
  };
}
