"""A guarded local activity cancelled across the hand-off of its wait (``test_local_activity_shutdown.py``),
with each cancellation type: the workflow sees what it sees when the activity is cancelled while it
waits in its slot, on a worker that does not stop. The workflow's ``cancel`` signal cancels the
handle; a workflow task timeout of 2 s lets the signal in while the local activity runs (core
heartbeats the workflow task). Runs of the local activity are counted in a Redis list the guard
does not own, the holder's dispatches in its job body; the holder's job runs until the test opens
its gate, so nothing here depends on how long anything takes."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
from redis.asyncio import Redis
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowHistory
from temporalio.worker import Interceptor, Replayer, Worker

from temporal_fire_once import FireOncePlugin

from .conftest import collect_garbage, until
from .hold_hand_off import HoldHandOff
from .pyactivities import gate_key, make_activities
from .pyworkflows import CancelledLocalCall, GuardedCall
from .test_features import result
from .test_hand_off_limits import _Runs, _runs
from .test_local_activity_shutdown import _count, _is_one, _subscribers

KINDS = ["TRY_CANCEL", "WAIT_CANCELLATION_COMPLETED", "ABANDON"]

# What the workflow sees of its local activity cancelled while it waits in its slot, whatever the
# cancellation type: the SDK's failure of a cancelled local activity (the first activity of the run).
CANCELLED = {
    "error": "ActivityError",
    "message": "Local Activity cancelled",
    "retryState": "CANCEL_REQUESTED",
    "activityType": "gatedJob",
    "activityId": "1",
    "cause": "CancelledError",
}


CANCELLED_ONCE = {"saw": CANCELLED, "runs": 1, "dispatches": 1}


@dataclass
class _Case:
    """A test's scope (its gated job's counter too), the waiter's task queue, and what the test
    does with them."""

    env: Any
    client: Redis
    prefix: str
    scope: str = field(default_factory=lambda: f"s-lac-{uuid.uuid4().hex[:8]}")
    queue: str = field(default_factory=lambda: f"py-{uuid.uuid4().hex[:8]}")

    @property
    def runs_key(self) -> str:
        return f"{self.prefix}:runs"

    def worker(self, *interceptors: Interceptor, queue: str | None = None, **options: Any) -> Worker:
        """A worker on the waiter's task queue (or ``queue``), each run of a local activity counted
        before ``interceptors`` and the guard see it."""
        collect_garbage()
        client, prefix = self.client, self.prefix
        return Worker(
            self.env.client,
            task_queue=queue or self.queue,
            workflows=[GuardedCall, CancelledLocalCall],
            activities=make_activities(client, prefix),
            plugins=[FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)],
            interceptors=[_Runs(client, self.runs_key, fail_first=False), *interceptors],
            **options,
        )

    async def start_waiter(self, kind: str) -> WorkflowHandle[Any, Any]:
        """Starts the waiter, and waits for its local activity to wait in its slot."""
        args = [self.scope, "gatedJob", [self.scope], 30_000, kind]
        waiter: WorkflowHandle[Any, Any] = await self.env.client.start_workflow(
            CancelledLocalCall.run, args=args, id=f"{self.queue}-waiter", task_queue=self.queue, task_timeout=timedelta(seconds=2)
        )
        await until(lambda: _is_one(_subscribers(self.client, self.prefix, self.scope)), "the local activity to wait in its slot")
        return waiter

    async def outcome(self, waiter: WorkflowHandle[Any, Any]) -> dict[str, Any]:
        """Once the waiter has closed, or its local activity runs again: opens the gate, replays the
        waiter's history, and returns what the workflow saw, the local activity's runs and the
        holder's dispatches."""
        client, prefix = self.client, self.prefix

        async def closed_or_run_again() -> bool:
            return (await waiter.describe()).status != WorkflowExecutionStatus.RUNNING or len(await _runs(client, self.runs_key)) > 1

        await until(closed_or_run_again, "the workflow to close, or its local activity to run again")
        await client.set(gate_key(prefix, self.scope), "open")
        saw = await result(waiter)
        # It replays with the plugin's workflow interceptor.
        history = WorkflowHistory(waiter.id, list((await waiter.fetch_history()).events))
        await Replayer(workflows=[CancelledLocalCall], plugins=[FireOncePlugin(client, key_prefix=prefix)]).replay_workflow(history)
        return {"saw": saw, "runs": len(await _runs(client, self.runs_key)), "dispatches": await _count(client, prefix, self.scope)}

    async def with_holder(self, scenario: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Runs ``scenario`` while another worker's workflow holds the scope's gated job."""
        queue = f"py-{uuid.uuid4().hex[:8]}"
        async with self.worker(queue=queue):
            args = [self.scope, "gatedJob", [self.scope]]
            holder = await self.env.client.start_workflow(GuardedCall.run, args=args, id=f"{queue}-holder", task_queue=queue)
            await until(lambda: _is_one(_count(self.client, self.prefix, self.scope)), "the holder's job to start")
            outcome = await scenario()
            await self.client.set(gate_key(self.prefix, self.scope), "open")
            await result(holder)
        return outcome


@pytest.mark.parametrize("kind", KINDS)
async def test_a_local_activity_cancelled_while_it_waits_in_its_slot_sees_the_sdks_cancellation(
    temporal_env: Any, client: Redis, prefix: str, kind: str
) -> None:
    """The reference for the tests below: no hand-off, the worker keeps running. The stack-trace
    query names the plugin's handle as the SDK names its own (the SDK does not list its stack)."""
    case = _Case(temporal_env, client, prefix)

    async def scenario() -> dict[str, Any]:
        async with case.worker():
            waiter = await case.start_waiter(kind)
            stack = await asyncio.wait_for(waiter.query("__stack_trace"), 30)
            assert "name='activity: gatedJob, fire-once hand-off (workflow: CancelledLocalCall, id: " in stack
            await waiter.signal(CancelledLocalCall.cancel)
            return await case.outcome(waiter)

    assert await case.with_holder(scenario) == CANCELLED_ONCE


@pytest.mark.parametrize("kind", KINDS)
async def test_a_local_activity_cancelled_while_handed_off_ends_cancelled_and_is_not_scheduled_again(
    temporal_env: Any, client: Redis, prefix: str, kind: str
) -> None:
    """The worker stops while the local activity waits; the signal comes while no worker runs, so
    its handler cancels the handle while the hand-off's timer is pending (if the timer has fired
    too, the handler runs first). Before the fix the handle ended with ``asyncio.CancelledError``
    (raised by the timer), not the SDK's failure of a cancelled local activity."""
    case = _Case(temporal_env, client, prefix)

    async def scenario() -> dict[str, Any]:
        async with case.worker(graceful_shutdown_timeout=timedelta(milliseconds=200)):
            waiter = await case.start_waiter(kind)
        await waiter.signal(CancelledLocalCall.cancel)
        async with case.worker():
            return await case.outcome(waiter)

    assert await case.with_holder(scenario) == CANCELLED_ONCE


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancel_that_reaches_a_local_activity_its_worker_shutdown_just_ended_is_not_lost(
    temporal_env: Any, client: Redis, prefix: str, kind: str
) -> None:
    """The worker begins to shut down while the local activity waits; its wait ends with the
    guard's FireOnceWorkerShutdown, which the test holds until the workflow's cancel reaches the
    activity. With WAIT_CANCELLATION_COMPLETED the workflow then awaits the activity's own end,
    that failure: before the fix the handle scheduled it again and the cancel was lost (2 runs, and
    the workflow got the holder's result once the gate opened). TRY_CANCEL and ABANDON end at the
    cancel, before the failure."""
    case, held = _Case(temporal_env, client, prefix), f"{prefix}:held"

    async def held_failure() -> bool:
        return bool(await client.exists(held))

    async def scenario() -> dict[str, Any]:
        # A long grace time: the SDK cancels no activity of its own before the test's cancel.
        stopping = case.worker(HoldHandOff(client, held), graceful_shutdown_timeout=timedelta(seconds=30))
        async with stopping:
            waiter = await case.start_waiter(kind)
            shutdown = asyncio.create_task(stopping.shutdown())
            await until(held_failure, "the guard's FireOnceWorkerShutdown, held")
            await waiter.signal(CancelledLocalCall.cancel)
            await shutdown
        async with case.worker():
            return await case.outcome(waiter)

    assert await case.with_holder(scenario) == CANCELLED_ONCE


async def test_a_history_in_which_0_9_0_lost_the_cancel_replays_as_it_ran(client: Redis) -> None:
    """Recorded by the last test's WAIT_CANCELLATION_COMPLETED case on 0.9.0: the local activity's
    failure came after the cancel, and the workflow scheduled it again behind the hand-off's timer.
    The fix ends such an activity cancelled only under a patch, which this history lacks, so it
    replays as it ran; without the patch its replay failed, the fix starting no timer where the
    history holds one (a nondeterminism error at the TimerStarted event)."""
    recorded = (Path(__file__).parent / "histories" / "hand_off_cancel_lost_0.9.0.json").read_text()
    history = WorkflowHistory.from_json("hand-off-cancel-lost", recorded)
    await Replayer(workflows=[CancelledLocalCall], plugins=[FireOncePlugin(client, key_prefix="unused")]).replay_workflow(history)


pytestmark = pytest.mark.asyncio
