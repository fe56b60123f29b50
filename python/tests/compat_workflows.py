"""The workflows of the compatibility tests (``test_compat_replay.py``, ``test_compat_fleet.py``):
the plugin's main shapes, as ``test/compat/fixtures/workflows.ts``. An earlier release recorded
their histories (``test/fixtures/histories-<version>/python``, by ``tests/compat_record.py``), which
HEAD replays: never change what they schedule. Imported in the workflow sandbox, and by a process
that runs the earlier release's package: activities are called by name, and nothing here imports
from ``tests``."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from temporal_fire_once.workflow import get_dispatch_scope, set_dispatch_scope

RETRIED = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=100), backoff_coefficient=1.0)
START_TO_CLOSE = timedelta(seconds=30)


async def _job(activity: str, args: list[Any], task_queue: str | None = None) -> Any:
    """A guarded activity, retried, with a heartbeat timeout."""
    return await workflow.execute_activity(
        activity, args=args, start_to_close_timeout=START_TO_CLOSE, heartbeat_timeout=timedelta(seconds=10), retry_policy=RETRIED, task_queue=task_queue
    )


async def _local_job(activity: str, args: list[Any], local_retry_threshold: timedelta | None = None) -> Any:
    return await workflow.execute_local_activity(
        activity, args=args, start_to_close_timeout=START_TO_CLOSE, retry_policy=RETRIED, local_retry_threshold=local_retry_threshold
    )


@workflow.defn(name="CompatGuardedRun")
class GuardedRun:
    """One guarded activity: it dispatches, fast-forwards, or waits for another run's dispatch."""

    @workflow.run
    async def run(self, scope: str, ms: int) -> Any:
        set_dispatch_scope(scope)
        return await _job("dispatchJob", [scope, ms])


@workflow.defn(name="CompatLocalRun")
class LocalRun:
    """The same as a local activity (a waiter waits in its slot)."""

    @workflow.run
    async def run(self, scope: str, ms: int) -> Any:
        set_dispatch_scope(scope)
        return await _local_job("dispatchJob", [scope, ms])


@workflow.defn(name="CompatRetriedRun")
class RetriedRun:
    """A guarded activity whose first dispatch fails: the retry dispatches again, and succeeds."""

    @workflow.run
    async def run(self, scope: str) -> Any:
        set_dispatch_scope(scope)
        return await _job("flakyJob", [scope])


@workflow.defn(name="CompatLocalRetriedRun")
class LocalRetriedRun:
    """The same as a local activity whose backoff exceeds its ``local_retry_threshold``: the SDK
    retries it behind a workflow timer."""

    @workflow.run
    async def run(self, scope: str) -> Any:
        set_dispatch_scope(scope)
        return await _local_job("flakyJob", [scope], local_retry_threshold=timedelta(milliseconds=10))


@workflow.defn(name="CompatContinueAsNewRun")
class ContinueAsNewRun:
    """Dispatches in each of ``runs`` runs chained by continue-as-new; only the first sets the scope.
    Returns each run's result and the scope it had without setting one."""

    @workflow.run
    async def run(self, scope: str, runs: int, seen: list[Any]) -> list[Any]:
        inherited = get_dispatch_scope()
        if not seen:
            set_dispatch_scope(scope)
        everything = [*seen, {"result": await _job("dispatchJob", [scope, 0]), "inheritedScope": inherited}]
        if len(everything) < runs:
            workflow.continue_as_new(args=[scope, runs, everything])
        return everything


@workflow.defn(name="CompatParentRun")
class ParentRun:
    """Sets the scope and runs one child workflow, which inherits it."""

    @workflow.run
    async def run(self, scope: str) -> Any:
        set_dispatch_scope(scope)
        return await workflow.execute_child_workflow(ChildRun.run, args=[scope], id=f"{workflow.info().workflow_id}-child")


@workflow.defn(name="CompatChildRun")
class ChildRun:
    @workflow.run
    async def run(self, scope: str) -> Any:
        inherited = get_dispatch_scope()
        return {"result": await _job("dispatchJob", [scope, 0]), "inheritedScope": inherited}


@workflow.defn(name="CompatLocalBesideRemoteRun")
class LocalBesideRemoteRun:
    """A local activity and an activity at once, each followed by a timer. Started with a short
    workflow task timeout, the local activity outlives its workflow task, which core completes as a
    heartbeat (scheduling the activity) while the local activity runs on."""

    @workflow.run
    async def run(self, scope: str, local_ms: int) -> list[str]:
        order: list[str] = []
        # Each is scheduled under a scope of its own, set just before.
        set_dispatch_scope(f"{scope}-local")
        local = workflow.start_local_activity(
            "dispatchJob", args=[f"{scope}-local", local_ms], start_to_close_timeout=START_TO_CLOSE, retry_policy=RETRIED
        )
        set_dispatch_scope(f"{scope}-remote")
        remote = workflow.start_activity(
            "dispatchJob", args=[f"{scope}-remote", 0], start_to_close_timeout=START_TO_CLOSE, heartbeat_timeout=timedelta(seconds=10), retry_policy=RETRIED
        )

        async def then_sleep(name: str, handle: workflow.ActivityHandle[Any], seconds: float) -> None:
            await handle
            order.append(name)
            await workflow.sleep(seconds)

        await asyncio.gather(then_sleep("local", local, 0.01), then_sleep("remote", remote, 0.02))
        return order


@workflow.defn(name="CompatQueuedRun")
class QueuedRun:
    """The gated job on ``task_queue`` (the test picks the release of the worker that runs it), or
    as a local activity on the workflow's own worker."""

    @workflow.run
    async def run(self, scope: str, task_queue: str, local: bool) -> Any:
        set_dispatch_scope(scope)
        if local:
            return await _local_job("gatedJob", [scope])
        return await _job("gatedJob", [scope], task_queue=task_queue)


@workflow.defn(name="CompatCancelledLocalRun")
class CancelledLocalRun:
    """The gated job as a local activity of 1 attempt that ``WAIT_CANCELLATION_COMPLETED`` cancels,
    whose handle the ``cancel`` signal cancels; returns what awaiting it gave once ``finish`` has
    come too, so that a task after the activity's end can go to another worker. Added with the
    0.9.0 histories: the hand-off of its wait and a cancel across it (the patch
    ``temporal-fire-once-hand-off-cancel``)."""

    def __init__(self) -> None:
        self._handle: workflow.ActivityHandle[Any] | None = None
        self._finished = False

    @workflow.signal
    def cancel(self) -> None:
        assert self._handle is not None
        self._handle.cancel()

    @workflow.signal
    def finish(self) -> None:
        self._finished = True

    @workflow.run
    async def run(self, scope: str) -> dict[str, Any]:
        set_dispatch_scope(scope)
        self._handle = workflow.start_local_activity(
            "gatedJob",
            args=[scope],
            start_to_close_timeout=START_TO_CLOSE,
            retry_policy=RetryPolicy(maximum_attempts=1),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        outcome: dict[str, Any]
        try:
            outcome = {"result": await self._handle}
        except ActivityError as err:
            outcome = {"error": "ActivityError", "message": err.message, "cause": type(err.cause).__name__}
        except asyncio.CancelledError:
            outcome = {"error": "asyncio.CancelledError"}
        await workflow.wait_condition(lambda: self._finished)
        return outcome


WORKFLOWS = [GuardedRun, LocalRun, RetriedRun, LocalRetriedRun, ContinueAsNewRun, ParentRun, ChildRun, LocalBesideRemoteRun, QueuedRun, CancelledLocalRun]
