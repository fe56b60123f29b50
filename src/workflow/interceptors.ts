import {
  defaultPayloadConverter,
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
import { SCOPE_HEADER, scopeFromHeader } from '../common/header';
import { getDispatchScope, setDispatchScope, whileReadOnly } from './scope';

function withScope<T extends { readonly headers: Headers }>(input: T): T {
  const scope = getDispatchScope();
  if (scope === undefined || input.headers[SCOPE_HEADER] !== undefined) return input;
  return { ...input, headers: { ...input.headers, [SCOPE_HEADER]: defaultPayloadConverter.toPayload(scope) } };
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

  scheduleLocalActivity(input: LocalActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleLocalActivity'>): Promise<unknown> {
    return next(withScope(input));
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
 * local activity and child workflow scheduled, and across continue-as-new. Loaded by the
 * bundler from `workflowInterceptorModules`; not for direct use.
 */
export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [new ScopeInbound()],
  outbound: [new ScopeOutbound()],
});
