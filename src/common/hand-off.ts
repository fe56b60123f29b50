/**
 * The hand-off of a local activity's wait when its worker shuts down (docs/how-it-decides.md,
 * "Local activities and worker shutdown"). A local activity runs on the worker of its workflow
 * task, and the SDK never cancels one at shutdown: a guarded one waiting in its slot for another
 * worker's job would keep its worker from stopping until the job ended. So the plugin's workflow
 * interceptor marks every local activity it schedules with {@link HAND_OFF_HEADER}; a marked one
 * waiting in its slot when its worker begins to shut down ends with the non-retryable
 * {@link WORKER_SHUTDOWN_TYPE}, and the interceptor schedules the same attempt again behind a
 * timer of {@link HAND_OFF_DELAY_MS}, which lets the workflow task complete and the worker stop;
 * the workflow's next worker runs it. Pure constants: safe in the workflow sandbox and on the worker.
 */

/** The header that asks for the hand-off; its presence is what counts. */
export const HAND_OFF_HEADER = 'temporal-fire-once-hand-off';

/** The `ApplicationFailure` type that ends a marked local activity's wait as its worker shuts down. */
export const WORKER_SHUTDOWN_TYPE = 'FireOnceWorkerShutdown';

/** What {@link handOffOf} reads of a local activity's `ApplicationFailure`. */
export interface FailureFacts {
  readonly type?: string | null;
  readonly nonRetryable?: boolean | null;
  readonly details?: readonly unknown[] | null;
}

/** The guard's context, which the first detail of every hand-off failure holds (0.9.0 on). */
const CONTEXT_FIELDS = ['key', 'scope', 'step', 'jobType'] as const;

/**
 * Whether a local activity's failure is the hand-off's, and if so the attempt it ended. It is when
 * it has {@link WORKER_SHUTDOWN_TYPE}, is non-retryable, and its first detail holds the guard's
 * context: a failure of that type an activity raised itself (an unguarded one, or a guarded job)
 * reaches the workflow as it is, and is never scheduled again. `attempt` is the one its worker
 * records in that detail: core retries a local activity on its workflow task without telling the
 * workflow, so the attempt the workflow scheduled may be an earlier one. `undefined` for a failure
 * recorded before it did: the workflow then goes by the attempt it scheduled.
 */
export function handOffOf(failure: FailureFacts): { readonly attempt: number | undefined } | undefined {
  if (failure.type !== WORKER_SHUTDOWN_TYPE || failure.nonRetryable !== true) return undefined;
  const context = failure.details?.[0] as Readonly<Record<string, unknown>> | null | undefined;
  if (typeof context !== 'object' || context === null || CONTEXT_FIELDS.some((name) => typeof context[name] !== 'string')) return undefined;
  const { attempt } = context;
  return { attempt: typeof attempt === 'number' && Number.isSafeInteger(attempt) && attempt >= 1 ? attempt : undefined };
}

/** The timer between the ended attempt and the same attempt scheduled again: the history records it, so it is fixed. */
export const HAND_OFF_DELAY_MS = 100;

/**
 * The patch (`patched()`, recorded in the history as a marker) under which a local activity whose
 * handed-off failure came after its workflow cancelled it ends cancelled, instead of being scheduled
 * again: a history recorded before 0.10.0, without it, replays as it ran.
 */
export const HAND_OFF_CANCEL_PATCH = 'temporal-fire-once-hand-off-cancel';
