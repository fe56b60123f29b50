"""The workflow interceptors that carry the dispatch scope (``src/workflow/interceptors.ts``):
into the header of every activity, local activity and child workflow scheduled, and across
continue-as-new; and from an incoming header into the workflow. Sandbox-safe."""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

from temporalio import workflow
from temporalio.worker import (
    ContinueAsNewInput,
    ExecuteWorkflowInput,
    Interceptor,
    StartActivityInput,
    StartChildWorkflowInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from .._header import SCOPE_HEADER, scope_from_headers, scope_payload
from .scope import get_dispatch_scope, set_dispatch_scope

_Input = TypeVar("_Input", StartActivityInput, StartLocalActivityInput, StartChildWorkflowInput, ContinueAsNewInput)


def _with_scope(input: _Input) -> _Input:
    scope = get_dispatch_scope()
    if scope is not None and SCOPE_HEADER not in input.headers:
        input.headers = {**input.headers, SCOPE_HEADER: scope_payload(scope)}
    return input


class _ScopeOutbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        return self.next.start_activity(_with_scope(input))

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        return self.next.start_local_activity(_with_scope(input))

    async def start_child_workflow(self, input: StartChildWorkflowInput) -> workflow.ChildWorkflowHandle[Any, Any]:
        return await self.next.start_child_workflow(_with_scope(input))

    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        self.next.continue_as_new(_with_scope(input))


class _ScopeInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_ScopeOutbound(outbound))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        # The inherited scope, unless __init__ (which runs before this) set one of its own.
        scope = scope_from_headers(input.headers)
        if scope is not None and get_dispatch_scope() is None:
            set_dispatch_scope(scope)
        return await self.next.execute_workflow(input)


class FireOnceWorkflowInterceptor(Interceptor):
    """Carries the dispatch scope in workflows. ``FireOncePlugin`` and ``FireOnceInterceptor``
    include it; a workflow-only worker (no Redis) passes it in ``interceptors`` alone.
    """

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor] | None:
        return _ScopeInbound
