"""The Python worker side on a real dev server and a real Redis: racing runs dispatch once,
failure releases, scopes reach activities through children and continue-as-new, and guard
errors reach the workflow with their type."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import Acquired, DispatchTarget, FireOnceGuard, GuardOptions

from .pyactivities import counter_key, make_activities
from .pyworkflows import ContinuedCall, GuardedCall, ParentCall


async def run_worker(env: Any, client: Redis, prefix: str) -> tuple[Worker, str]:
    queue = f"py-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        env.client,
        task_queue=queue,
        workflows=[GuardedCall, ParentCall, ContinuedCall],
        activities=make_activities(client, prefix),
        plugins=[FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)],
    )
    return worker, queue


async def test_ten_racing_runs_of_one_scope_dispatch_once(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        runs = [
            temporal_env.client.execute_workflow(GuardedCall.run, args=["s-race", "crossJob", ["race", 300]], id=f"{queue}-{i}", task_queue=queue)
            for i in range(10)
        ]
        results = await asyncio.gather(*runs)
        later = await temporal_env.client.execute_workflow(
            GuardedCall.run, args=["s-race", "crossJob", ["race", 300]], id=f"{queue}-later", task_queue=queue
        )
    assert await client.get(counter_key(prefix, "race")) == b"1"
    assert all(r == results[0] for r in results) and later == results[0]
    await asyncio.sleep(0.1)  # the log is written in the background
    entries: Any = await client.xrange(f"{prefix}:v3:default:log")
    decisions = [fields[b"decision"] for _, fields in entries]
    assert decisions.count(b"dispatched") == 1 and decisions.count(b"committed") == 1
    assert decisions.count(b"fast-forwarded") == 10  # 9 after waiting (in-flight-waited), 1 later


async def test_a_failed_dispatch_releases_and_the_retry_dispatches_again(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        result = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-flaky", "flakyJob", ["flaky"]], id=queue, task_queue=queue)
    assert result == {"counterId": "flaky", "count": 2}


async def test_the_scope_reaches_a_child_and_a_continued_run(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        first = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-carry", "crossJob", ["carry", 0]], id=queue, task_queue=queue)
        child = await temporal_env.client.execute_workflow(ParentCall.run, args=["s-carry", "crossJob", ["carry", 0]], id=f"{queue}-p", task_queue=queue)
        continued = await temporal_env.client.execute_workflow(
            ContinuedCall.run, args=["s-carry", "crossJob", ["carry", 0]], id=f"{queue}-c", task_queue=queue
        )
    assert child == first and continued == first
    assert await client.get(counter_key(prefix, "carry")) == b"1"


async def test_a_guarded_activity_without_a_scope_fails_with_its_type_and_dispatches_nothing(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        with pytest.raises(WorkflowFailureError) as caught:
            await temporal_env.client.execute_workflow(GuardedCall.run, args=["", "crossJob", ["none", 0]], id=queue, task_queue=queue)
    cause = caught.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert (cause.cause.type, cause.cause.non_retryable) == ("FireOnceMissingScope", True)
    assert await client.get(counter_key(prefix, "none")) is None


async def test_while_another_holds_the_lock_fail_raises_retryable_in_flight_and_skip_returns_none(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    held = await guard.acquire(DispatchTarget("s-busy", "busy", "busy", "default", holder="another run"), lock_ttl_ms=60_000)
    assert isinstance(held, Acquired)
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        skipped = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-busy", "skipWhileBusy", ["busy"]], id=f"{queue}-s", task_queue=queue)
        with pytest.raises(WorkflowFailureError) as caught:
            await temporal_env.client.execute_workflow(
                GuardedCall.run, args=["s-busy", "failWhileBusy", ["busy"], None, 1], id=f"{queue}-f", task_queue=queue
            )
    assert skipped is None
    cause = caught.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert (cause.cause.type, cause.cause.non_retryable) == ("FireOnceInFlight", False)
    assert await client.get(counter_key(prefix, "busy")) is None
