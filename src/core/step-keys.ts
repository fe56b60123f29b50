/**
 * The keys one call writes, built from its target, and the checks that keep a call inside its own
 * scope, namespace and prefix: an external artifact key that is another step's key, or a lease
 * whose keys are not the ones its target names, is refused before Redis is asked anything.
 */
import { FireOnceConfigError } from './errors';
import { encodeId, type FireOnceKeys } from './keys';
import type { Lease } from './outcomes';
import { contextOf, type DispatchTarget } from './target';

/** The keys of a step, as acquire writes them into its lease: lock, waiter list, artifact. */
export type StepKeys = Pick<Lease, 'lockKey' | 'waitersKey' | 'artifactKey'>;

/** The keys of `namespace` beside the guard's `keys` (those themselves when absent). */
export function keysOf(keys: FireOnceKeys, namespace: string | undefined): FireOnceKeys {
  return namespace === undefined ? keys : keys.forNamespace(namespace);
}

/** The keys of the target's step under the guard's `keys`. */
export function stepKeys(keys: FireOnceKeys, target: DispatchTarget): StepKeys {
  const base = keysOf(keys, target.namespace).scopeBase(target.scope);
  const step = encodeId('step', target.step);
  const artifactKey = target.externalArtifactKey === undefined ? `${base}:a:${encodeId('jobType', target.jobType)}` : externalKey(keys, target);
  return { lockKey: `${base}:l:${step}`, waitersKey: `${base}:w:${step}`, artifactKey };
}

/** The artifact key the target is checked against: the external one, or the guard's own. */
export function artifactKeyOf(keys: FireOnceKeys, target: DispatchTarget): string {
  if (target.externalArtifactKey === undefined) return keysOf(keys, target.namespace).artifact(target.scope, target.jobType);
  return externalKey(keys, target);
}

/**
 * The target's external artifact key, unless the guard must not take it: another scope's or
 * namespace's key, or one it writes itself, would read or replace a result that is not this
 * call's ({@link FireOnceKeys.externalKeyProblem}); nor a key that is no string, `undefined`
 * included (an `external` option that returned nothing).
 */
export function externalKey(keys: FireOnceKeys, target: DispatchTarget): string {
  encodeId('jobType', target.jobType); // validated even when unused in the key
  const key = target.externalArtifactKey;
  const problem = keysOf(keys, target.namespace).externalKeyProblem(key, target.scope, target.jobType);
  if (problem !== undefined) {
    throw new FireOnceConfigError(
      `the external artifact key of ${JSON.stringify(target.jobType)} in scope ${JSON.stringify(target.scope)} ${problem}`,
      contextOf(target, String(key)),
    );
  }
  return key as string;
}

/**
 * A lease names the keys that commit, release and extend write: refuse one whose keys are not
 * those the guard's `keys` build for its target (a lease of a guard with another `keyPrefix`, or
 * one edited or made by hand), so that no lease writes into another scope's or prefix's keys.
 */
export function checkLease(keys: FireOnceKeys, what: string, lease: Lease): void {
  const target = lease?.target;
  const step = target === undefined ? undefined : stepKeys(keys, target);
  if (step === undefined || lease.lockKey !== step.lockKey || lease.waitersKey !== step.waitersKey || lease.artifactKey !== step.artifactKey) {
    throw new FireOnceConfigError(
      `${what}: the lease's keys are not this guard's for its target (keyPrefix ${JSON.stringify(keys.prefix)}): pass the lease acquire() returned, unchanged, to a guard with the keyPrefix that acquired it`,
      target === undefined ? {} : contextOf(target, String(lease.lockKey)),
    );
  }
}
