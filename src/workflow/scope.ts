import { ApplicationFailure, inWorkflowContext } from '@temporalio/workflow';
import { idProblem } from '../common/ids';

// Kept on the workflow's own globalThis: the SDK gives every workflow execution its own global
// bag, also when V8 contexts are reused, so scopes never leak between workflows.
const SLOT = '__temporalFireOnceDispatchScope';

interface ScopeHolder {
  [SLOT]?: string;
}

/**
 * Set the dispatch scope of this workflow: every activity scheduled from now on carries it, and
 * fire-once activities lock and store artifacts under it. Use the session or job ID that many
 * runs share, never the workflow or run ID. Child workflows and continue-as-new inherit it.
 *
 * Called outside a workflow, it throws a non-retryable `ApplicationFailure` of type
 * `FireOnceConfigError`. Throws a non-retryable `ApplicationFailure` of type `FireOnceInvalidId` for a scope the worker
 * would refuse (not a string, empty or whitespace only, a lone surrogate, over `MAX_ID_BYTES`
 * bytes of UTF-8), with the worker's message, failing the workflow before it schedules anything
 * under a bad scope.
 *
 * @example
 * ```ts
 * import { proxyActivities } from '@temporalio/workflow';
 * import { setDispatchScope } from 'temporal-fire-once/workflow';
 *
 * const { dispatchSummary } = proxyActivities<{ dispatchSummary(text: string): Promise<string> }>({
 *   startToCloseTimeout: '1 minute',
 * });
 *
 * export async function chatTurn(sessionId: string, text: string): Promise<string> {
 *   setDispatchScope(sessionId);
 *   return await dispatchSummary(text);
 * }
 * ```
 */
export function setDispatchScope(scope: string): void {
  if (!inWorkflowContext()) {
    // Anywhere else it would set a global of the process that no activity reads.
    const message =
      'setDispatchScope() must be called in a workflow: activities get the scope from the workflow that schedules them, or from their scope option';
    throw ApplicationFailure.create({ type: 'FireOnceConfigError', message, nonRetryable: true });
  }
  const problem = idProblem('scope', scope); // the same check as the worker's encodeId
  if (problem !== undefined) throw ApplicationFailure.create({ type: 'FireOnceInvalidId', message: problem, nonRetryable: true });
  (globalThis as ScopeHolder)[SLOT] = scope;
}

/**
 * The dispatch scope set in this workflow, or `undefined`.
 *
 * @example
 * ```ts
 * import { getDispatchScope, setDispatchScope } from 'temporal-fire-once/workflow';
 * export async function example(): Promise<string | undefined> {
 *   setDispatchScope('session-1');
 *   return getDispatchScope(); // 'session-1'
 * }
 * ```
 */
export function getDispatchScope(): string | undefined {
  return (globalThis as ScopeHolder)[SLOT];
}
