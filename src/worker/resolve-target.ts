import type { Headers } from '@temporalio/common';
import { SCOPE_HEADER, scopeFromHeader } from '../common/header';
import { FireOnceConfigError, FireOnceMissingScope } from '../core/errors';
import type { DispatchTarget } from '../core/target';
import { encodeId } from '../core/keys';
import { externalKey } from '../core/step-keys';
import { argsHash, notAPromise } from './args-hash';
import type { GuardedCall } from './guarded-call';

/**
 * Where one call's dispatch goes: its scope (from the `scope` option, or the header the workflow
 * set), step, job type, key namespace, holder and args hash, and for an external artifact its
 * checked key. Throws, before anything is locked: `FireOnceMissingScope` without a scope,
 * `FireOnceConfigError` for an option's function that fails (`userOption`) or an external key the
 * guard must not take, or none (`externalKey`), `FireOnceInvalidId` for an external artifact's bad scope.
 */
export function resolveTarget({ setup, options, ctx, input }: GuardedCall): DispatchTarget {
  const { activityType, workflowExecution, activityId, namespace } = ctx.info;
  const scope = options.scope !== undefined ? userOption('scope', activityType, () => options.scope!(input.args, ctx.info)) : scopeFromHeaders(input.headers);
  if (scope === undefined) {
    const fix =
      options.scope !== undefined
        ? "its scope option returned undefined: make it return the scope, a string such as the session's ID"
        : "call setDispatchScope() in the workflow, or give fireOnce a scope option; a workflow bundle built without the plugin's workflow interceptors (workflowInterceptorModules) carries no scope";
    throw new FireOnceMissingScope(`activity ${JSON.stringify(activityType)} has no dispatch scope: ${fix}`, { activityType });
  }
  const step = options.step ?? activityType;
  const jobType = options.jobType ?? step;
  const holder = `${workflowExecution?.workflowId ?? ''} ${workflowExecution?.runId ?? ''} ${activityId}`;
  const hash = userOption('conflictKey', activityType, () => argsHash(options, input.args, setup.payloadConverter));
  const base = { scope, step, jobType, namespace: setup.defaults.keyNamespace ?? namespace, holder, argsHash: hash };
  const artifact = options.artifact;
  if (artifact === undefined || artifact === 'result') return base;
  // The key is built from the scope: a bad one is refused as the guard would refuse it
  // (FireOnceInvalidId), before the user's function sees it.
  encodeId('scope', scope);
  const key = userOption('artifact.external', activityType, () => artifact.external({ scope, jobType, namespace: base.namespace }));
  const target = { ...base, externalArtifactKey: key as string };
  // Refuses a key the guard must not take, or none at all, before anything is locked: an external
  // option that returned undefined would otherwise run the call in result mode.
  externalKey(setup.guard.keys, target);
  return target;
}

/**
 * Run one of the option functions the user wrote. If it throws, the worker's configuration is at
 * fault, not the call: a non-retryable `FireOnceConfigError` naming the option, before anything
 * is locked, instead of an untyped error that Temporal would retry for ever.
 */
function userOption<T>(name: 'scope' | 'conflictKey' | 'artifact.external', activityType: string, fn: () => T): T {
  try {
    return notAPromise(fn());
  } catch (err) {
    const why = err instanceof FireOnceConfigError ? err.message : `threw: ${String(err)}`;
    throw new FireOnceConfigError(`the ${name} option of activity ${JSON.stringify(activityType)} ${why}`, { activityType }, { cause: err });
  }
}

function scopeFromHeaders(headers: Headers): string | undefined {
  return scopeFromHeader(headers[SCOPE_HEADER]);
}
