"""The workflow interceptors that carry the dispatch scope (``src/workflow/interceptors.ts``):
into the header of every activity, local activity and child workflow scheduled, and across
continue-as-new; and from an incoming header into the workflow. They also take a local activity's
wait back when its worker shuts down (``_hand_off.py``). Sandbox-safe.

The SDK makes one inbound interceptor per workflow instance: it opens the instance's scope
(``_runs``), which ``set_dispatch_scope()`` finds by the instance's ``workflow.info()``, and hands
it to the instance's outbound interceptor."""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

from temporalio import workflow
from temporalio.api.common.v1 import Payload
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

from .._hand_off import HAND_OFF_HEADER
from .._header import SCOPE_HEADER, scope_from_headers, scope_payload
from .._ids import id_problem
from .hand_off import HandOffHandle
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
        input = self._with_scope(input)
        if HAND_OFF_HEADER not in input.headers:
            input.headers = {**input.headers, HAND_OFF_HEADER: _HAND_OFF}
        return HandOffHandle(self.next.start_local_activity, input)

    async def start_child_workflow(self, input: StartChildWorkflowInput) -> workflow.ChildWorkflowHandle[Any, Any]:
        return await self.next.start_child_workflow(self._with_scope(input))

    def continue_as_new(self, input: ContinueAsNewInput) -> NoReturn:
        self.next.continue_as_new(self._with_scope(input))


_HAND_OFF = Payload(metadata={"encoding": b"json/plain"}, data=b"true")


class _ScopeInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        # Called once per workflow instance, before the workflow's __init__. workflow.info() does
        # not answer yet (the SDK sets its outbound chain after this), but the outbound
        # interceptor's info() does, with the object workflow.info() will give this instance.
        info = outbound.info()
        self._run = open_run(info)
        # The inherited scope, from the start's header, here and not in execute_workflow: the SDK
        # runs the signal and update handlers of the run's first workflow task before that, and
        # they must see it (a child signalled before its first task, as in TypeScript). __init__
        # and any handler may set their own over it. One that is no valid scope fails the workflow
        # in execute_workflow: raised here, it would fail every workflow task.
        inherited = scope_from_headers(info.headers)
        self._invalid = inherited if inherited is not None and id_problem("scope", inherited) is not None else None
        if inherited is not None and self._invalid is None:
            self._run.scope = inherited
        super().init(_ScopeOutbound(outbound, self._run))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        if self._invalid is not None:
            check_scope(self._invalid)
        return await self.next.execute_workflow(input)


class FireOnceWorkflowInterceptor(Interceptor):
    """Carries the dispatch scope in workflows. ``FireOncePlugin`` and ``FireOnceInterceptor``
    include it; a workflow-only worker (no Redis) passes it in ``interceptors`` alone.
    """

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor] | None:
        return _ScopeInbound
