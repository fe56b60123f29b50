import { RetryState } from '@temporalio/common';
import { msToTs } from '@temporalio/common/lib/time';
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  LocalActivityDoBackoff,
  defaultPayloadConverter,
  patched,
  type ActivityInput,
  type ContinueAsNewInput,
  type Headers,
  type LocalActivityInput,
  type Next,
  type QueryInput,
  type UpdateInput,
  type StartChildWorkflowExecutionInput,
  type WorkflowExecuteInput,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptorsFactory,
  type WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';
import { HAND_OFF_CANCEL_PATCH, HAND_OFF_DELAY_MS, HAND_OFF_HEADER, handOffOf } from '../common/hand-off';
import { SCOPE_HEADER, scopeFromHeader } from '../common/header';
import { getDispatchScope, setDispatchScope, whileReadOnly } from './scope';

function withScope<T extends { readonly headers: Headers }>(input: T): T {
  const scope = getDispatchScope();
  if (scope === undefined || input.headers[SCOPE_HEADER] !== undefined) return input;
  return { ...input, headers: { ...input.headers, [SCOPE_HEADER]: defaultPayloadConverter.toPayload(scope) } };
}

const HAND_OFF = defaultPayloadConverter.toPayload(true);

/** The hand-off of a local activity's failure, if it is one: core passes it on as the activity raised it, not wrapped as a remote activity's is. */
function endedByWorkerShutdown(err: unknown): ReturnType<typeof handOffOf> {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  return failure instanceof ApplicationFailure ? handOffOf(failure) : undefined;
}

/** The failure of a local activity cancelled, as the SDK makes it (its ID is its sequence number). */
function cancelled(input: LocalActivityInput): ActivityFailure {
  return new ActivityFailure(
    'Local Activity cancelled',
    input.activityType,
    `${input.seq}`,
    RetryState.CANCEL_REQUESTED,
    '',
    new CancelledFailure('Activity cancelled'),
  );
}

function withHandOff(input: LocalActivityInput): LocalActivityInput {
  return input.headers[HAND_OFF_HEADER] !== undefined ? input : { ...input, headers: { ...input.headers, [HAND_OFF_HEADER]: HAND_OFF } };
}

class ScopeInbound implements WorkflowInboundCallsInterceptor {
  // Async, so that the FireOnceInvalidId of an inherited string that is no valid scope fails the
  // workflow, as in setDispatchScope: thrown from here synchronously, it failed every workflow task.
  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const scope = scopeFromHeader(input.headers[SCOPE_HEADER]);
    if (scope !== undefined) setDispatchScope(scope);
    return next(input);
  }

  handleQuery(input: QueryInput, next: Next<WorkflowInboundCallsInterceptor, 'handleQuery'>): Promise<unknown> {
    return whileReadOnly('a query handler', () => next(input));
  }

  validateUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'validateUpdate'>): void {
    whileReadOnly('an update validator', () => next(input));
  }
}

class ScopeOutbound implements WorkflowOutboundCallsInterceptor {
  scheduleActivity(input: ActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>): Promise<unknown> {
    return next(withScope(input));
  }

  /**
   * Marks the local activity for the hand-off of its wait (`common/hand-off.ts`). When its worker's
   * shutdown ends the wait, the same attempt is scheduled again after a timer, as the SDK schedules a
   * local activity's retry whose backoff exceeds its `localRetryThreshold`: the number of the attempt
   * that ended (which core may have retried locally past `input.attempt`), and the first attempt's
   * schedule time, so that neither `maximumAttempts` nor schedule-to-close starts over. A failure
   * that comes once the workflow has cancelled the activity (`WAIT_CANCELLATION_COMPLETED` awaits
   * its own end, and the cancel reached it after its worker's shutdown had ended its wait) ends it
   * cancelled instead, as the wait would have ended.
   */
  async scheduleLocalActivity(input: LocalActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleLocalActivity'>): Promise<unknown> {
    const scheduled = Date.now(); // the workflow task's time: the same on replay
    try {
      return await next(withHandOff(withScope(input)));
    } catch (err) {
      const handOff = endedByWorkerShutdown(err);
      if (handOff === undefined) throw err;
      if (CancellationScope.current().consideredCancelled && patched(HAND_OFF_CANCEL_PATCH)) throw cancelled(input);
      throw new LocalActivityDoBackoff({
        attempt: handOff.attempt ?? input.attempt,
        backoffDuration: msToTs(HAND_OFF_DELAY_MS),
        originalScheduleTime: input.originalScheduleTime ?? msToTs(scheduled),
      });
    }
  }

  startChildWorkflowExecution(
    input: StartChildWorkflowExecutionInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'startChildWorkflowExecution'>,
  ): Promise<[Promise<string>, Promise<unknown>]> {
    return next(withScope(input));
  }

  continueAsNew(input: ContinueAsNewInput, next: Next<WorkflowOutboundCallsInterceptor, 'continueAsNew'>): Promise<never> {
    return next(withScope(input));
  }
}

/**
 * The workflow interceptors that carry the dispatch scope: into the header of every activity,
 * local activity and child workflow scheduled, and across continue-as-new; and that take a local
 * activity's wait back when its worker shuts down (`common/hand-off.ts`). Loaded by the
 * bundler from `workflowInterceptorModules`; not for direct use.
 */
export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [new ScopeInbound()],
  outbound: [new ScopeOutbound()],
});
