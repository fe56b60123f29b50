"""The workflow interceptors that carry the dispatch scope (``src/workflow/interceptors.ts``):
into the header of every activity, local activity and child workflow scheduled, and across
continue-as-new; and from an incoming header into the workflow. Sandbox-safe.

The SDK makes one inbound interceptor per run: it opens the run's scope (``_runs``), which
``set_dispatch_scope()`` finds by run ID, and hands it to the run's outbound interceptor."""

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
from .scope import check_scope

with workflow.unsafe.imports_passed_through():  # the host's table, as in scope.py
    from ._runs import RunScope, open_run

_Input = TypeVar("_Input", StartActivityInput, StartLocalActivityInput, StartChildWorkflowInput, ContinueAsNewInput)


class _ScopeOutbound(WorkflowOutboundInterceptor):
    def __init__(self, next: WorkflowOutboundInterceptor, run: RunScope) -> None:
        super().__init__(next)
        self._run = run

    def _with_scope(self, input: _Input) -> _Input:
        scope = self._run.scope
        if scope is not None and SCOPE_HEADER not in input.headers:
            input.headers = {**input.headers, SCOPE_HEADER: scope_payload(scope)}
        return input

    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        return self.next.start_activity(self._with_scope(input))

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        return self.next.start_local_activity(self._with_scope(input))

    async def start_child_workflow(self, input: StartChildWorkflowInput) -> workflow.ChildWorkflowHandle[Any, Any]:
        return await self.next.start_child_workflow(self._with_scope(input))

    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        self.next.continue_as_new(self._with_scope(input))


class _ScopeInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        # Called once per run, before the workflow's __init__. workflow.info() does not answer yet
        # (the SDK sets its outbound chain after this), but the outbound interceptor's info() does.
        self._run = open_run(outbound.info().run_id)
        super().init(_ScopeOutbound(outbound, self._run))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        # The inherited scope, unless __init__ (which runs before this) set one of its own.
        scope = scope_from_headers(input.headers)
        if scope is not None and self._run.scope is None:
            check_scope(scope)
            self._run.scope = scope
        return await self.next.execute_workflow(input)


class FireOnceWorkflowInterceptor(Interceptor):
    """Carries the dispatch scope in workflows. ``FireOncePlugin`` and ``FireOnceInterceptor``
    include it; a workflow-only worker (no Redis) passes it in ``interceptors`` alone.
    """

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor] | None:
        return _ScopeInbound
