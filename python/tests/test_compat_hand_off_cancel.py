"""A fleet mid-upgrade from 0.9.0 to 0.10.0 meets the patch ``temporal-fire-once-hand-off-cancel``
(docs/upgrading.md): a HEAD worker ends a local activity cancelled across the hand-off of its wait
under the patch, and a 0.9.0 worker then takes the workflow's next task. The rest of a mixed fleet
is ``test_compat_fleet.py``'s, with 0.8.0; this is the one case 0.9.0 adds. The 0.9.0 workers run
in a process of their own that imports the release's package, from its last commit
(``release_package.py``); dispatches are counted by the jobs themselves."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any, AsyncIterator

import pytest
from redis.asyncio import Redis
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker

from temporal_fire_once import FireOnceKeys, FireOncePlugin

from .compat_activities import compat_activities, counter_key, gate_key
from .compat_workflows import WORKFLOWS
from .conftest import collect_garbage, equals, until
from .hold_hand_off import HoldHandOff
from .release_package import RELEASE_0_9_0, release_unavailable
from .test_compat_fleet import old_workers

RELEASE = RELEASE_0_9_0
UNAVAILABLE = release_unavailable(RELEASE)
PREFIX = f"pycancel-{uuid.uuid4().hex[:8]}"
QUEUE = f"pycancel-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client: Redis = Redis.from_url(redis_url)
    try:
        yield client
    finally:
        keys = [key async for key in client.scan_iter(match=f"{PREFIX}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


def head_worker(env: Any, redis: Redis, queue: str, **options: Any) -> Worker:
    """A HEAD worker on ``queue``. A workflow task meant for its sticky queue once it has stopped
    goes to ``queue`` after 1 s, not 10."""
    collect_garbage()
    plugin = FireOncePlugin(redis, key_prefix=PREFIX, poll_interval_ms=50)
    return Worker(
        env.client,
        task_queue=queue,
        workflows=WORKFLOWS,
        activities=compat_activities(redis, PREFIX, "HEAD"),
        plugins=[plugin],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        **options,
    )


async def _events(handle: WorkflowHandle[Any, Any]) -> list[Any]:
    return list((await handle.fetch_history()).events)


async def test_a_local_activity_a_head_worker_ended_cancelled_under_the_patch_fails_the_next_task_on_a_0_9_0_worker_until_a_head_worker_takes_it(
    temporal_env: Any, redis: Redis, redis_url: str
) -> None:
    scope, held = "cancelled-across", f"{PREFIX}:held"
    client = temporal_env.client

    async def count() -> int:
        return int(await redis.get(counter_key(PREFIX, "gatedJob", scope)) or 0)

    async def subscribers() -> int:
        return int((await redis.pubsub_numsub(FireOnceKeys(PREFIX).wake_channel(scope)))[0][1])

    # The holder, on a HEAD worker of its own queue, runs until the gate opens.
    async with head_worker(temporal_env, redis, f"{QUEUE}-holder"):
        holder = await client.start_workflow("CompatQueuedRun", args=[scope, f"{QUEUE}-holder", False], id=f"holder-{QUEUE}", task_queue=f"{QUEUE}-holder")
        await until(lambda: equals(count(), 1), "the holder to dispatch")

        # A HEAD worker alone on the queue: its local activity waits in its slot, the worker begins
        # to stop, and the cancel reaches the activity after the shutdown ended its wait.
        stopping = head_worker(temporal_env, redis, QUEUE, graceful_shutdown_timeout=timedelta(seconds=30), interceptors=[HoldHandOff(redis, held)])
        async with stopping:
            waiter = await client.start_workflow(
                "CompatCancelledLocalRun", args=[scope], id=f"waiter-{QUEUE}", task_queue=QUEUE, task_timeout=timedelta(seconds=2)
            )
            await until(lambda: equals(subscribers(), 1), "the local activity to wait in its slot")
            shutdown = asyncio.create_task(stopping.shutdown())
            await until(lambda: equals(redis.exists(held), 1), "the guard's FireOnceWorkerShutdown, held")
            await waiter.signal("cancel")
            await shutdown
        patch_marker = any(
            e.marker_recorded_event_attributes.marker_name == "core_patch" for e in await _events(waiter) if e.HasField("marker_recorded_event_attributes")
        )

        # A 0.9.0 worker alone on the queue takes the workflow's next task, the ``finish`` signal's.
        old = await old_workers(temporal_env, redis_url, QUEUE, release=RELEASE, prefix=PREFIX)
        try:
            await waiter.signal("finish")

            async def task_failed_or_closed() -> bool:
                return any(e.HasField("workflow_task_failed_event_attributes") or e.HasField("workflow_execution_completed_event_attributes") for e in await _events(waiter))

            await until(task_failed_or_closed, f"the {RELEASE.version} worker to fail or complete the workflow task", seconds=60)  # a workflow task of a loaded dev server: a bound, not a timing claim
        finally:
            old.terminate()
            await old.wait()
        failed = [e.workflow_task_failed_event_attributes.failure.message for e in await _events(waiter) if e.HasField("workflow_task_failed_event_attributes")]

        # A HEAD worker takes the workflow on, and ends it with what the workflow saw under the patch.
        async with head_worker(temporal_env, redis, QUEUE):
            saw = await asyncio.wait_for(waiter.result(), 60)
        await redis.set(gate_key(PREFIX, scope), "open")
        await asyncio.wait_for(holder.result(), 60)

    assert {"patch_marker": patch_marker, "saw": saw, "dispatches": await count()} == {
        "patch_marker": True,
        "saw": {"error": "ActivityError", "message": "Local Activity cancelled", "cause": "CancelledError"},
        "dispatches": 1,
    }
    # The 0.9.0 worker calls no patched() where HEAD's recorded the patch marker.
    assert failed and "Nondeterminism" in failed[0] and "temporal-fire-once-hand-off-cancel" in failed[0], failed

pytestmark = [pytest.mark.asyncio, pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")]
