"""A guarded local activity that waits in its slot for another worker's job, on a worker that
begins to shut down (``test/temporal-features/local-activity-shutdown.test.ts`` on the TypeScript
side). The SDK never cancels a local activity at shutdown, and the worker cannot stop before the
workflow task that waits on it completes. The holder's job runs until the test opens its gate, so
nothing here depends on how long anything takes; dispatches are counted in the job body."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio.api.history.v1 import History
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import FireOnceKeys

from .conftest import collect_garbage, until
from .pyactivities import counter_key, gate_key, make_activities
from .pyworkflows import GuardedCall, LocalCall
from .test_features import result

WORKFLOWS = [GuardedCall, LocalCall]


def _worker(env: Any, client: Redis, prefix: str, queue: str, **options: Any) -> Worker:
    collect_garbage()
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    return Worker(env.client, task_queue=queue, workflows=WORKFLOWS, activities=make_activities(client, prefix), plugins=[plugin], **options)


async def _count(client: Redis, prefix: str, counter: str) -> int:
    return int(await client.get(counter_key(prefix, counter)) or 0)


async def _subscribers(client: Redis, prefix: str, scope: str) -> int:
    (_, subscribers), *_ = await client.pubsub_numsub(FireOnceKeys(prefix).wake_channel(scope))
    return int(subscribers)


def _local_activity_steps(history: History) -> list[str]:
    """What the history says of each local activity attempt and timer, in order."""
    steps = []
    for event in history.events:
        if event.HasField("workflow_task_failed_event_attributes"):
            steps.append("workflow task failed")
        elif event.HasField("timer_started_event_attributes"):
            steps.append("timer")
        elif event.marker_recorded_event_attributes.marker_name == "core_local_activity":
            marker = event.marker_recorded_event_attributes
            attempt = json.loads(marker.details["data"].payloads[0].data)["attempt"]
            failed = marker.failure.application_failure_info.type if marker.HasField("failure") else None
            steps.append(f"failed {failed}, attempt {attempt}" if failed else f"completed, attempt {attempt}")
    return steps


async def test_a_waiting_local_activity_hands_its_wait_over_so_its_worker_stops_without_waiting_for_the_holder_and_nothing_dispatches_twice(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The waiter's worker shuts down with a 200 ms graceful_shutdown_timeout while its local
    activity waits for the holder's gated job on another worker. Its worker stops with the job
    still gated; the workflow schedules the local activity again behind a short timer, and the
    restarted worker runs it: it gets the holder's result, 1 dispatch. Before the fix the worker
    stopped only once the wait gave up, 1 s before its 8 s start-to-close, and the workflow failed."""
    env, scope, counter = temporal_env.client, f"s-la-{uuid.uuid4().hex[:8]}", "la-shutdown"
    holder_queue, local_queue = f"py-{uuid.uuid4().hex[:8]}", f"py-{uuid.uuid4().hex[:8]}"
    async with _worker(temporal_env, client, prefix, holder_queue):
        holder = await env.start_workflow(GuardedCall.run, args=[scope, "gatedJob", [counter]], id=f"{holder_queue}-holder", task_queue=holder_queue)
        await until(lambda: _is_one(_count(client, prefix, counter)), "the holder's job to start")
        waiter_args = [scope, "gatedJob", [counter], 8_000, 1]
        async with _worker(temporal_env, client, prefix, local_queue, graceful_shutdown_timeout=timedelta(milliseconds=200)):
            waiter = await env.start_workflow(LocalCall.run, args=waiter_args, id=f"{local_queue}-waiter", task_queue=local_queue)
            # The local activity waits in its slot on the wake channel (the holder's worker never subscribes).
            await until(lambda: _is_one(_subscribers(client, prefix, scope)), "the local activity to wait in its slot")
        # The worker has stopped with the holder's job still gated: it did not wait for it.
        assert [await _count(client, prefix, f"{counter}-finished"), await _subscribers(client, prefix, scope)] == [0, 0]
        async with _worker(temporal_env, client, prefix, local_queue):
            await until(lambda: _is_one(_subscribers(client, prefix, scope)), "the local activity to wait again on the restarted worker")
            await client.set(gate_key(prefix, counter), "open")
            results = [await result(holder), await result(waiter)]
    assert results[0] == results[1] and await _count(client, prefix, counter) == 1

    # In the history: the ended attempt's marker, the hand-off's timer, the new schedule's marker
    # (attempt 1 again: the Python SDK passes no attempt on); no workflow task failed.
    history = await waiter.fetch_history()
    assert _local_activity_steps(history) == ["failed FireOnceWorkerShutdown, attempt 1", "timer", "completed, attempt 1"]
    # It replays with the plugin's workflow interceptor, and not without it (docs/temporal-features.md, "Removing it").
    replay = WorkflowHistory(waiter.id, list(history.events))
    await Replayer(workflows=WORKFLOWS, plugins=[FireOncePlugin(client, key_prefix=prefix)]).replay_workflow(replay)
    bare = await Replayer(workflows=WORKFLOWS).replay_workflow(replay, raise_on_replay_failure=False)
    assert bare.replay_failure is not None


async def _is_one(value: Any) -> bool:
    return bool(await value == 1)


pytestmark = pytest.mark.asyncio
