"""Python workflows of ``test_features_handlers.py``: a guarded activity cancelled by its run with
each cancellation type, a run that continues as new while its activity waits, a signal
delivered with the start, and signal and update handlers that each schedule the job. Imported in the workflow sandbox: nothing here touches Redis."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError

from temporal_fire_once.workflow import get_dispatch_scope, set_dispatch_scope

_HEARTBEAT = timedelta(seconds=2)


def _start(
    activity: str, args: list[Any], cancellation: workflow.ActivityCancellationType | None = None, heartbeat: bool = True
) -> workflow.ActivityHandle[Any]:
    return workflow.start_activity(
        activity,
        args=args,
        start_to_close_timeout=timedelta(seconds=30),
        heartbeat_timeout=_HEARTBEAT if heartbeat else None,
        cancellation_type=cancellation or workflow.ActivityCancellationType.TRY_CANCEL,
        retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=200)),
    )


@workflow.defn
class CancelOnSignal:
    """Sets the scope, starts one activity by name with ``cancellation`` (a name of
    ``ActivityCancellationType``) and a 2 s heartbeat timeout (none if ``heartbeat`` is false),
    cancels it on the ``cancel`` signal and returns ``'cancelled'``, or what it returned if it
    ended first."""

    def __init__(self) -> None:
        self._cancel = False

    @workflow.signal
    def cancel(self) -> None:
        self._cancel = True

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any], cancellation: str, heartbeat: bool = True) -> Any:
        set_dispatch_scope(scope)
        handle = _start(activity, args, workflow.ActivityCancellationType[cancellation], heartbeat)
        await workflow.wait_condition(lambda: self._cancel or handle.done())
        if not handle.done():
            handle.cancel()
        try:
            return await handle
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                return "cancelled"
            raise


@workflow.defn
class ContinueWhileWaiting:
    """Sets the scope and starts one activity by name; on the ``move`` signal, continues as new
    while it runs (the new run sets no scope and awaits the activity afresh)."""

    def __init__(self) -> None:
        self._move = False

    @workflow.signal
    def move(self) -> None:
        self._move = True

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any], continued: bool = False) -> Any:
        if continued:
            return {"scope": get_dispatch_scope(), "result": await _start(activity, args)}
        set_dispatch_scope(scope)
        handle = _start(activity, args)
        await workflow.wait_condition(lambda: self._move or handle.done())
        if not handle.done():
            workflow.continue_as_new(args=[scope, activity, args, True])
        return {"scope": get_dispatch_scope(), "result": await handle}


@workflow.defn
class SignalScopeInInit:
    """Sets the scope in ``__init__``; each ``call`` signal calls one activity by name. Ends once
    ``calls`` signals have been answered, returning each call's scope and result."""

    @workflow.init
    def __init__(self, scope: str, calls: int) -> None:
        set_dispatch_scope(scope)
        self._seen: list[dict[str, Any]] = []

    @workflow.signal
    async def call(self, activity: str, args: list[Any]) -> None:
        self._seen.append({"scope": get_dispatch_scope(), "result": await _start(activity, args)})

    @workflow.run
    async def run(self, scope: str, calls: int) -> list[dict[str, Any]]:
        await workflow.wait_condition(lambda: len(self._seen) >= calls)
        return self._seen


@workflow.defn
class HandlersCall:
    """Sets the scope in ``__init__`` (a signal delivered with the first task runs before ``run``
    does); each ``dispatch`` signal and each ``dispatch_now`` update schedules ``crossJob`` under
    it. Returns what the signals' jobs returned, once ``finish`` came and every handler has
    finished."""

    @workflow.init
    def __init__(self, scope: str) -> None:
        set_dispatch_scope(scope)
        self._results: list[Any] = []
        self._finished = False

    @workflow.signal
    async def dispatch(self, ms: int) -> None:
        self._results.append(await _start("crossJob", [get_dispatch_scope(), ms]))

    @workflow.update
    async def dispatch_now(self, ms: int) -> Any:
        return await _start("crossJob", [get_dispatch_scope(), ms])

    @workflow.signal
    def finish(self) -> None:
        self._finished = True

    @workflow.run
    async def run(self, scope: str) -> list[Any]:
        await workflow.wait_condition(lambda: self._finished and workflow.all_handlers_finished())
        return self._results


WORKFLOWS = [CancelOnSignal, ContinueWhileWaiting, SignalScopeInInit, HandlersCall]
