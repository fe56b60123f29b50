import { ApplicationFailure, inWorkflowContext } from '@temporalio/workflow';
import { idProblem } from '../common/ids';

// Kept on the workflow's own globalThis: the SDK gives every workflow execution its own global
// bag, also when V8 contexts are reused, so scopes never leak between workflows.
const SLOT = '__temporalFireOnceDispatchScope';
// Set while a query handler or an update validator runs (by the plugin's inbound interceptor).
const READ_ONLY = '__temporalFireOnceReadOnly';

interface ScopeHolder {
  [SLOT]?: string;
  [READ_ONLY]?: string;
}

/**
 * Runs `handler`, a query handler or update validator (`what`), refusing `setDispatchScope` in
 * it. Synchronous, as both are: a scope set there would leave no trace in the history, so it
 * would hold on this worker and be gone after a replay.
 */
export function whileReadOnly<T>(what: string, handler: () => T): T {
  const holder = globalThis as ScopeHolder;
  const outer = holder[READ_ONLY];
  holder[READ_ONLY] = what;
  try {
    return handler();
  } finally {
    holder[READ_ONLY] = outer;
  }
}

/**
 * Set the dispatch scope of this workflow: every activity scheduled from now on carries it, and
 * fire-once activities lock and store artifacts under it. Use the session or job ID that many
 * runs share, never the workflow or run ID. Child workflows and continue-as-new inherit it.
 *
 * Called outside a workflow, or in a query handler or an update validator (which leave no trace
 * in the history, so the scope would differ after a replay), it throws a non-retryable
 * `ApplicationFailure` of type `FireOnceConfigError`. Throws a non-retryable `ApplicationFailure` of type `FireOnceInvalidId` for a scope the worker
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
  const readOnly = (globalThis as ScopeHolder)[READ_ONLY];
  if (readOnly !== undefined) {
    const message = `setDispatchScope() cannot be called in ${readOnly}: it leaves no trace in the history, so a replay would schedule under another scope; set it in the workflow function or in a signal or update handler`;
    throw ApplicationFailure.create({ type: 'FireOnceConfigError', message, nonRetryable: true });
  }
  const problem = idProblem('scope', scope); // the same check as the worker's encodeId
  if (problem !== undefined) throw ApplicationFailure.create({ type: 'FireOnceInvalidId', message: problem, nonRetryable: true });
  (globalThis as ScopeHolder)[SLOT] = scope;
}

/**
 * The dispatch scope set in (or inherited by) this workflow, or `undefined`. Outside a workflow it
 * throws the non-retryable `FireOnceConfigError`, as `setDispatchScope` does: a guarded activity
 * reads its scope from `fireOnceContext().scope`.
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
  if (!inWorkflowContext()) {
    // The process's own global holds no workflow's scope: `undefined` here would read as "none set".
    const message = "getDispatchScope() must be called in a workflow: a guarded activity's dispatch reads its scope from fireOnceContext().scope";
    throw ApplicationFailure.create({ type: 'FireOnceConfigError', message, nonRetryable: true });
  }
  return (globalThis as ScopeHolder)[SLOT];
}
