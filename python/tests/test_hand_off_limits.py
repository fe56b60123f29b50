"""What the hand-off of a waiting local activity's wait (``test_local_activity_shutdown.py``)
takes for its own: only the guard's failure. An interceptor outside the guard records each run of
the local activity in a Redis list the guard does not own."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, Worker

from temporal_fire_once import FireOncePlugin

from .conftest import collect_garbage
from .pyactivities import make_activities
from .pyworkflows import GuardedCall, LocalCall
from .test_features import until


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
