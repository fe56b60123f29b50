"""Async activity completion end to end, on a Python worker, as
``test/temporal-features/async-completion.test.ts`` runs it on the TypeScript side. A guarded job
that calls ``activity.raise_complete_async()`` has dispatched; the test completes it later with its
task token, through Temporal, never through the guard. Each job counts its dispatches in its body
and leaves its task token in Redis (``pyactivities.complete_later``)."""

from __future__ import annotations

import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio.client import WorkflowHandle

from temporal_fire_once.core import FireOnceKeys

from .conftest import until
from .pyactivities import counter_key
from .pyworkflows import GuardedCall
from .test_features import _subscribed, result
from .test_worker import run_worker


async def _token(client: Redis, prefix: str, counter: str) -> bytes:
    """The task token the job left, once it has."""
    await until(lambda: client.exists(f"{prefix}:task-token:{counter}"), f"the task token of {counter}")
    token = await client.getdel(f"{prefix}:task-token:{counter}")
    assert isinstance(token, bytes)
    return token


async def test_external_artifact_mode_the_completer_writes_the_key_the_waiting_run_and_a_later_one_fast_forward_one_dispatch(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    keys, counter, scope = FireOnceKeys(prefix), "async-external", "s-async-external"
    worker, queue = await run_worker(temporal_env, client, prefix)
    env = temporal_env.client

    def start(name: str) -> Any:
        return env.start_workflow(GuardedCall.run, args=[scope, "externalAsyncJob", [counter]], id=f"{queue}-{name}", task_queue=queue)

    async with worker:
        holder: WorkflowHandle[Any, Any] = await start("holder")
        token = await _token(client, prefix, counter)
        waiter = await start("waiter")
        await until(lambda: _subscribed(client, keys.wake_channel(scope)), "a run to wait in its slot")
        # The completer: writes the job's output where the external key says, then completes.
        await client.set(keys.external(scope, "externalAsyncJob"), "the job's output")
        await env.get_async_activity_handle(task_token=token).complete(None)
        assert [await result(holder), await result(waiter)] == [None, None]
        later = await env.execute_workflow(GuardedCall.run, args=[scope, "externalAsyncJob", [counter]], id=f"{queue}-later", task_queue=queue)
    assert later is None
    assert await client.get(counter_key(prefix, counter)) == b"1"


async def test_result_mode_the_result_completed_from_outside_is_never_stored_each_run_waits_out_the_lock_and_dispatches_again(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The documented limit (docs/temporal-features.md, "async activity completion"): nothing is
    stored, the lock stands for its TTL after each dispatch, and each run then dispatches again.
    The test brings each expiry forward with ``PEXPIRE`` rather than wait."""
    keys, counter, scope = FireOnceKeys(prefix), "async-result", "s-async-result"
    lock = keys.lock(scope, "asyncJob")
    worker, queue = await run_worker(temporal_env, client, prefix)
    env = temporal_env.client
    async with worker:
        runs = []
        for n in range(1, 4):
            runs.append(await env.start_workflow(GuardedCall.run, args=[scope, "asyncJob", [counter]], id=f"{queue}-{n}", task_queue=queue))
            if n > 1:
                await until(lambda: _subscribed(client, keys.wake_channel(scope)), "a run to wait in its slot")  # on the lock the run before kept
                await client.pexpire(lock, 1)
            token = await _token(client, prefix, counter)
            assert await client.get(counter_key(prefix, counter)) == str(n).encode()
            completed = f"completed from outside {uuid.uuid4().hex[:6]}"
            await env.get_async_activity_handle(task_token=token).complete(completed)
            assert await result(runs[-1]) == completed
            assert not await client.exists(keys.artifact(scope, "asyncJob"))
            assert await client.pttl(lock) > 60_000  # the lock stands for lock_ttl_ms after the dispatch
