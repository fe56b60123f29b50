"""Python workflows of the tests. Imported in the workflow sandbox: nothing here touches Redis."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Callable

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError

from temporal_fire_once.workflow import get_dispatch_scope, set_dispatch_scope

async def _run(activity: str, args: list[Any], task_queue: str | None = None, attempts: int = 5, timeouts_ms: list[int] | None = None) -> Any:
    """``timeouts_ms``: start-to-close, then schedule-to-close (30 s and none by default)."""
    retry = RetryPolicy(maximum_attempts=attempts, initial_interval=timedelta(milliseconds=100))
    start_to_close = timeouts_ms[0] if timeouts_ms else 30_000
    overall = timedelta(milliseconds=timeouts_ms[1]) if timeouts_ms and len(timeouts_ms) > 1 else None
    return await workflow.execute_activity(
        activity,
        args=args,
        start_to_close_timeout=timedelta(milliseconds=start_to_close),
        schedule_to_close_timeout=overall,
        retry_policy=retry,
        task_queue=task_queue,
    )


async def _call_once(scope: str, ready: Callable[[], bool], activity: str, args: list[Any]) -> str | None:
    """Sets ``scope``, waits for ``ready()``, calls one activity by name once; the scope it ran under."""
    set_dispatch_scope(scope)
    await workflow.wait_condition(ready)
    await _run(activity, args, attempts=1)
    return get_dispatch_scope()


@workflow.defn
class GuardedCall:
    """Sets the scope (unless empty), then calls one activity by name, maybe on another task queue."""

    @workflow.run
    async def run(
        self, scope: str, activity: str, args: list[Any], task_queue: str | None = None, attempts: int = 5, timeouts_ms: list[int] | None = None
    ) -> Any:
        if scope != "":
            set_dispatch_scope(scope)
        return await _run(activity, args, task_queue, attempts, timeouts_ms)


@workflow.defn
class LocalCall:
    """Sets the scope and calls one activity as a local activity, with short attempts retried
    (``overall_ms``: a schedule-to-close, none by default)."""

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any], attempt_ms: int, attempts: int, overall_ms: int | None = None) -> Any:
        set_dispatch_scope(scope)
        retry = RetryPolicy(maximum_attempts=attempts, initial_interval=timedelta(milliseconds=50), backoff_coefficient=1.0)
        return await workflow.execute_local_activity(
            activity,
            args=args,
            start_to_close_timeout=timedelta(milliseconds=attempt_ms),
            schedule_to_close_timeout=None if overall_ms is None else timedelta(milliseconds=overall_ms),
            retry_policy=retry,
        )


@workflow.defn
class CancelledLocalCall:
    """Sets the scope and starts one local activity (1 attempt, ``cancellation_type`` by name),
    whose handle the ``cancel`` signal cancels; says what awaiting the handle then gave. The
    handler cancels it at once, before anything else of its workflow task runs."""

    def __init__(self) -> None:
        self._handle: workflow.ActivityHandle[Any] | None = None

    @workflow.signal
    def cancel(self) -> None:
        assert self._handle is not None
        self._handle.cancel()

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any], attempt_ms: int, cancellation_type: str) -> dict[str, Any]:
        set_dispatch_scope(scope)
        self._handle = workflow.start_local_activity(
            activity,
            args=args,
            start_to_close_timeout=timedelta(milliseconds=attempt_ms),
            retry_policy=RetryPolicy(maximum_attempts=1),
            cancellation_type=workflow.ActivityCancellationType[cancellation_type],
        )
        try:
            return {"result": await self._handle}
        except ActivityError as err:
            return {
                "error": "ActivityError",
                "message": err.message,
                "retryState": err.retry_state and err.retry_state.name,
                "activityType": err.activity_type,
                "activityId": err.activity_id,
                "cause": type(err.cause).__name__,
            }
        except asyncio.CancelledError:
            return {"error": "asyncio.CancelledError"}


@workflow.defn
class ParentCall:
    """Sets the scope and leaves the call to a child that sets none: the child inherits it."""

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any]) -> Any:
        set_dispatch_scope(scope)
        return await workflow.execute_child_workflow(GuardedCall.run, args=["", activity, args], id=f"{workflow.info().workflow_id}-child")


@workflow.defn
class ContinuedCall:
    """Sets the scope, continues as new, and calls in the new run, which sets none."""

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any], continued: bool = False) -> Any:
        if not continued:
            set_dispatch_scope(scope)
            workflow.continue_as_new(args=[scope, activity, args, True])
        assert get_dispatch_scope() == scope
        return await _run(activity, args)


@workflow.defn
class CancelledCall:
    """Starts a guarded activity, cancels it after a while, and waits for it to finish cancelling."""

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any]) -> str:
        set_dispatch_scope(scope)
        handle = workflow.start_activity(
            activity,
            args=args,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=2),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        await workflow.sleep(timedelta(seconds=1))
        handle.cancel()
        try:
            await handle
        except ActivityError as err:
            return "cancelled" if isinstance(err.cause, CancelledError) else f"failed: {err.cause}"
        return "completed"


@workflow.defn
class InitScopeCall:
    """Sets the scope in its ``@workflow.init`` ``__init__`` (before ``run`` and before the
    interceptor reads the incoming header), then calls one activity. With ``parent_scope``, sets
    that one and leaves the call to a child of this class, which sets ``scope`` in its own
    ``__init__`` while it inherits ``parent_scope`` in the header."""

    @workflow.init
    def __init__(self, scope: str, activity: str, args: list[Any], parent_scope: str | None = None) -> None:
        set_dispatch_scope(parent_scope or scope)

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any], parent_scope: str | None = None) -> Any:
        if parent_scope is not None:
            return await workflow.execute_child_workflow(InitScopeCall.run, args=[scope, activity, args], id=f"{workflow.info().workflow_id}-child")
        return {"scope": get_dispatch_scope(), "result": await _run(activity, args)}


@workflow.defn
class HeartbeatCall:
    """Sets the scope and calls one activity with a 2 s heartbeat timeout, retried after 0.5 s."""

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any]) -> Any:
        set_dispatch_scope(scope)
        return await workflow.execute_activity(
            activity,
            args=args,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=2),
            retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=500)),
        )


@workflow.defn
class TwoStepCall:
    """Sets the scope and calls ``crossJob``, waits for the ``go`` signal, then calls ``reportJob``:
    a run that may move to another build between its two jobs. Returns both results."""

    def __init__(self) -> None:
        self._go = False

    @workflow.signal
    def go(self) -> None:
        self._go = True

    @workflow.run
    async def run(self, scope: str, counter_id: str) -> list[Any]:
        set_dispatch_scope(scope)
        first = await _run("crossJob", [counter_id, 0])
        await workflow.wait_condition(lambda: self._go)
        return [first, await _run("reportJob", [f"{counter_id}-report", 0])]


@workflow.defn
class InheritedScope:
    """Returns the scope the run got from its start's header (``None``: none), before it sets any."""

    @workflow.run
    async def run(self) -> str | None:
        return get_dispatch_scope()



@workflow.defn
class SignalledCall:
    """Sets no scope: each ``call`` signal calls one activity by name under the scope the run has
    then; ends once ``calls`` signals have been answered. Returns the scope each handler saw, and
    each call's result or failure type."""

    def __init__(self) -> None:
        self._seen: list[dict[str, Any]] = []

    @workflow.signal
    async def call(self, activity: str, args: list[Any]) -> None:
        seen: dict[str, Any] = {"scope": get_dispatch_scope()}
        try:
            seen["result"] = await _run(activity, args, attempts=1)
        except ActivityError as err:
            seen["failure"] = getattr(err.cause, "type", None)
        self._seen.append(seen)

    @workflow.run
    async def run(self, calls: int) -> list[dict[str, Any]]:
        await workflow.wait_condition(lambda: len(self._seen) >= calls)
        return self._seen


@workflow.defn
class SignallingParent:
    """Sets the scope, starts a ``SignalledCall`` child on ``child_queue`` (whose worker may not
    run yet) and signals it at once, so that the child's first workflow task holds the signal;
    returns the child's workflow ID."""

    @workflow.run
    async def run(self, scope: str, child_queue: str, activity: str, args: list[Any]) -> str:
        set_dispatch_scope(scope)
        child_id = f"{workflow.info().workflow_id}-child"
        handle = await workflow.start_child_workflow(
            SignalledCall.run, 1, id=child_id, task_queue=child_queue, parent_close_policy=workflow.ParentClosePolicy.ABANDON
        )
        await handle.signal(SignalledCall.call, args=[activity, args])
        return child_id


@workflow.defn
class ReadOnlyScope:
    """Sets ``scope``, then lets a query handler and an update validator try to set another one
    (both must be refused: neither leaves a trace in the history); on ``finish``, calls one
    activity by name and returns the scope it ran under."""

    def __init__(self) -> None:
        self._finished = False

    @workflow.query
    def rescope(self, other: str) -> str | None:
        set_dispatch_scope(other)
        return get_dispatch_scope()

    @workflow.update
    def rescope_update(self, other: str) -> str | None:
        return get_dispatch_scope()

    @rescope_update.validator
    def _validate_rescope(self, other: str) -> None:
        set_dispatch_scope(other)

    @workflow.signal
    def finish(self) -> None:
        self._finished = True

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any]) -> str | None:
        return await _call_once(scope, lambda: self._finished, activity, args)


@workflow.defn
class RescopedCall:
    """Sets ``scope``, and waits for the ``rescope`` signal, whose handler sets another; then calls
    one activity by name and returns the scope it ran under. ``scope`` queries the run's scope."""

    def __init__(self) -> None:
        self._rescoped = False

    @workflow.query
    def scope(self) -> str | None:
        return get_dispatch_scope()

    @workflow.signal
    def rescope(self, other: str) -> None:
        set_dispatch_scope(other)
        self._rescoped = True

    @workflow.run
    async def run(self, scope: str, activity: str, args: list[Any]) -> str | None:
        return await _call_once(scope, lambda: self._rescoped, activity, args)



class _UpdateCalls:
    """Each ``dispatch`` update calls one activity by name; the run ends on ``finish``. The two
    classes below differ only in where they set the scope."""

    def __init__(self) -> None:
        self._finished = False

    @workflow.update
    async def dispatch(self, activity: str, args: list[Any]) -> Any:
        return await _run(activity, args, attempts=1)

    @workflow.signal
    def finish(self) -> None:
        self._finished = True


@workflow.defn
class UpdateScopeInInit(_UpdateCalls):
    """Sets the scope in its ``@workflow.init`` ``__init__``, which the SDK runs before the
    handlers of the first workflow task."""

    @workflow.init
    def __init__(self, scope: str) -> None:
        super().__init__()
        set_dispatch_scope(scope)

    @workflow.run
    async def run(self, scope: str) -> None:
        await workflow.wait_condition(lambda: self._finished)


@workflow.defn
class UpdateScopeInRun(_UpdateCalls):
    """Sets the scope in ``run``, which the SDK starts after the handlers of the first workflow task."""

    @workflow.run
    async def run(self, scope: str) -> None:
        set_dispatch_scope(scope)
        await workflow.wait_condition(lambda: self._finished)


@workflow.defn
class InheritedCall:
    """Sets no scope: returns the one the run inherited, and what one activity by name returned."""

    @workflow.run
    async def run(self, activity: str, args: list[Any]) -> dict[str, Any]:
        return {"inheritedScope": get_dispatch_scope(), "result": await _run(activity, args)}


@workflow.defn
class CronParent:
    """Sets the scope and starts an ``InheritedCall`` child on ``cron_schedule``, abandoned so that
    it runs on; returns the child's workflow ID."""

    @workflow.run
    async def run(self, scope: str, cron_schedule: str, activity: str, args: list[Any]) -> str:
        set_dispatch_scope(scope)
        child_id = f"{workflow.info().workflow_id}-cron"
        await workflow.start_child_workflow(
            InheritedCall.run, args=[activity, args], id=child_id, cron_schedule=cron_schedule, parent_close_policy=workflow.ParentClosePolicy.ABANDON
        )
        return child_id


FIRST_TASK_BUG = "a bug in the first workflow task"
"""What ``FirstTaskFails`` raises in the first attempt of its first workflow task."""


@workflow.defn
class FirstTaskFails:
    """Sets the scope and schedules the job, then raises a plain exception in the first attempt of
    its first workflow task: a workflow task failure, which Temporal retries, not a workflow
    failure. Only that attempt sees a history of 3 events (started, task scheduled, task started);
    a retry's also holds the failed task."""

    @workflow.run
    async def run(self, scope: str, ms: int) -> Any:
        set_dispatch_scope(scope)
        job = workflow.start_activity("crossJob", args=[scope, ms], start_to_close_timeout=timedelta(seconds=30))
        if workflow.info().get_current_history_length() == 3:
            raise RuntimeError(FIRST_TASK_BUG)
        return await job


@workflow.defn
class PriceCall:
    """Sets the scope, calls ``priceJob`` and returns what it got: only a value the workflow got as
    a ``Money`` goes back out as ``binary/money`` (a dict would go out as JSON)."""

    @workflow.run
    async def run(self, scope: str) -> Any:
        set_dispatch_scope(scope)
        return await workflow.execute_activity("priceJob", args=[scope], start_to_close_timeout=timedelta(seconds=30))
