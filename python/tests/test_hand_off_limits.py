"""What the hand-off of a waiting local activity's wait (``test_local_activity_shutdown.py``) keeps
of the limits the workflow set: its attempts and its schedule-to-close; and that it hands off only
its own failure. An interceptor outside the guard records each run of the local activity (its
attempt, and the maximum attempts and schedule-to-close it was given) in a Redis list the guard does
not own; the holder's job runs until the test opens its gate."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle, WorkflowHistory
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, Replayer, Worker

from temporal_fire_once import FireOncePlugin

from .conftest import collect_garbage, until
from .pyactivities import counter_key, gate_key, make_activities
from .pyworkflows import GuardedCall, LocalCall
from .test_features import result
from .test_local_activity_shutdown import _count, _is_one, _subscribers


class _Runs(Interceptor):
    """Records each run of a local activity in ``key``; with ``fail_first``, fails the first run
    retryably before the guard sees it, so that its second attempt is the one that waits."""

    def __init__(self, client: Redis, key: str, fail_first: bool) -> None:
        self.client, self.key, self.fail_first = client, key, fail_first

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        root = self

        class Inbound(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                info = activity.info()
                if info.is_local:
                    given = info.schedule_to_close_timeout
                    run = [info.attempt, info.retry_policy and info.retry_policy.maximum_attempts, given and given / timedelta(milliseconds=1)]
                    if await root.client.rpush(root.key, json.dumps(run)) == 1 and root.fail_first:
                        raise ApplicationError("the first run fails before the guard")
                return await super().execute_activity(input)

        return Inbound(next)


def _worker(env: Any, client: Redis, prefix: str, queue: str, runs: _Runs | None = None, **options: Any) -> Worker:
    collect_garbage()
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    activities = [*make_activities(client, prefix), own_shutdown_type]
    interceptors = [runs] if runs else []
    return Worker(env.client, task_queue=queue, workflows=[GuardedCall, LocalCall], activities=activities, plugins=[plugin], interceptors=interceptors, **options)


async def _runs(client: Redis, key: str) -> list[list[Any]]:
    return [json.loads(run) for run in await client.lrange(key, 0, -1)]


async def _handed_off(env: Any, client: Redis, prefix: str, scope: str, waiter_args: list[Any], runs: _Runs) -> WorkflowHandle[Any, Any]:
    """Start the waiter on a worker of its own, wait for its local activity to wait in its slot, and stop that worker."""
    queue = f"py-{uuid.uuid4().hex[:8]}"
    async with _worker(env, client, prefix, queue, runs, graceful_shutdown_timeout=timedelta(milliseconds=200)):
        waiter: WorkflowHandle[Any, Any] = await env.client.start_workflow(LocalCall.run, args=[scope, *waiter_args], id=f"{queue}-waiter", task_queue=queue)
        await until(lambda: _is_one(_subscribers(client, prefix, scope)), "the local activity to wait in its slot")
    return waiter


async def test_a_handed_off_local_activity_is_given_what_is_left_of_its_attempts_and_of_its_schedule_to_close(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """3 attempts and 30 s overall: the first run fails, the second waits and is handed off. The
    same local activity, scheduled again, runs as attempt 1 (the Python SDK passes no attempt on),
    given 2 attempts and less than 30 s: its second attempt counts as the one it continues. Before
    the fix it was given 3 attempts and 30 s again, at each hand-off."""
    scope, counter, key = f"s-lim-{uuid.uuid4().hex[:8]}", "lim", f"{prefix}:runs"
    runs, holder_queue = _Runs(client, key, fail_first=True), f"py-{uuid.uuid4().hex[:8]}"
    async with _worker(temporal_env, client, prefix, holder_queue):
        holder = await temporal_env.client.start_workflow(GuardedCall.run, args=[scope, "gatedJob", [counter]], id=f"{holder_queue}-h", task_queue=holder_queue)
        await until(lambda: _is_one(_count(client, prefix, counter)), "the holder's job to start")
        waiter = await _handed_off(temporal_env, client, prefix, scope, ["gatedJob", [counter], 8_000, 3, 30_000], runs)
        async with _worker(temporal_env, client, prefix, waiter.id.removesuffix("-waiter"), runs):
            await until(lambda: _is_one(_subscribers(client, prefix, scope)), "the local activity to wait again on the restarted worker")
            await client.set(gate_key(prefix, counter), "open")
            results = [await result(holder), await result(waiter)]
    assert results[0] == results[1] and await _count(client, prefix, counter) == 1
    first, second, again = await _runs(client, key)
    assert [first, second, again[:2]] == [[1, 3, 30_000], [2, 3, 30_000], [1, 2]] and again[2] < 30_000
    # What is left comes from the workflow's own clock: the history replays.
    history = WorkflowHistory(waiter.id, list((await waiter.fetch_history()).events))
    await Replayer(workflows=[LocalCall], plugins=[FireOncePlugin(client, key_prefix=prefix)]).replay_workflow(history)


async def test_a_local_activity_whose_schedule_to_close_ran_out_while_handed_off_times_out_without_running_again(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """6 s overall, handed off, and no worker until they have passed: the workflow's next worker
    fails it with the SCHEDULE_TO_CLOSE timeout the SDK would give it, and does not run it. Before
    the fix it ran again with 6 s of its own. The 6 s leave room for the hand-off itself on a busy
    machine, and they count from the local activity's schedule, which comes after the hand-off
    began and before it ended: the wait counts from its end."""
    scope, counter, key = f"s-lim-{uuid.uuid4().hex[:8]}", "lim-out", f"{prefix}:runs"
    runs, holder_queue = _Runs(client, key, fail_first=False), f"py-{uuid.uuid4().hex[:8]}"
    async with _worker(temporal_env, client, prefix, holder_queue):
        holder = await temporal_env.client.start_workflow(GuardedCall.run, args=[scope, "gatedJob", [counter]], id=f"{holder_queue}-h", task_queue=holder_queue)
        await until(lambda: _is_one(_count(client, prefix, counter)), "the holder's job to start")
        waiter = await _handed_off(temporal_env, client, prefix, scope, ["gatedJob", [counter], 12_000, 1, 6_000], runs)
        await asyncio.sleep(6.2)  # past the 6 s, with no worker on the waiter's queue
        async with _worker(temporal_env, client, prefix, waiter.id.removesuffix("-waiter"), runs):
            with pytest.raises(WorkflowFailureError) as failed:
                await result(waiter)
        await client.set(gate_key(prefix, counter), "open")
        await result(holder)
    assert isinstance(failed.value.cause, ActivityError)
    timeout = failed.value.cause.cause
    assert isinstance(timeout, TimeoutError) and timeout.type == TimeoutType.SCHEDULE_TO_CLOSE
    assert len(await _runs(client, key)) == 1 and await _count(client, prefix, counter) == 1


@activity.defn(name="ownShutdownType")
async def own_shutdown_type(counter_id: str) -> None:
    """An unguarded local activity whose own failure has the hand-off's type."""
    raise ApplicationError(f"run {counter_id}", type="FireOnceWorkerShutdown", non_retryable=True)


async def test_a_local_activitys_own_failure_of_the_hand_off_type_reaches_the_workflow_and_is_not_scheduled_again(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The workflow fails with it after 1 run, as without the plugin. Before the fix the
    interceptor took it for a hand-off and scheduled the activity again, for ever."""
    key, queue = f"{prefix}:runs", f"py-{uuid.uuid4().hex[:8]}"
    async with _worker(temporal_env, client, prefix, queue, _Runs(client, key, fail_first=False)):
        waiter = await temporal_env.client.start_workflow(LocalCall.run, args=["s-own", "ownShutdownType", ["c"], 5_000, 3], id=queue, task_queue=queue)

        async def closed_or_run_again() -> bool:
            return (await waiter.describe()).status != WorkflowExecutionStatus.RUNNING or len(await _runs(client, key)) > 1

        await until(closed_or_run_again, "the workflow to close, or the local activity to run again")
        if (await waiter.describe()).status == WorkflowExecutionStatus.RUNNING:
            await waiter.terminate()
    assert len(await _runs(client, key)) == 1 and (await waiter.describe()).status == WorkflowExecutionStatus.FAILED


pytestmark = pytest.mark.asyncio
