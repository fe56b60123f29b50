"""A result over Temporal's payload limit (2 MB on the dev server), on a Python worker, as
``test/temporal-features/oversized-result.test.ts`` runs it on the TypeScript side. The result is
over ``max_artifact_bytes`` (1 MiB) too, so the holder keeps its lock instead of storing it, and
Temporal refuses it: the attempt fails, and its retry meets the kept lock and waits there rather
than run the job again. A Python waiter waits in its slot on the same lock. The job counts its
dispatches in its body, outside the guard."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis
from temporalio.client import WorkflowExecutionStatus

from temporal_fire_once.core import FireOnceKeys

from .conftest import equals, until
from .pyactivities import counter_key, gate_key
from .pyworkflows import GuardedCall
from .test_features import _pending, _subscribed, _worker, count

SIZE = 3_000_000


async def test_a_result_over_temporals_payload_limit_fails_the_attempt_and_its_retry_waits_on_the_kept_lock_the_job_ran_once(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    env, counter = temporal_env.client, "oversized"
    scope, args = f"s-{counter}", [counter, SIZE]
    keys = FireOnceKeys(prefix)
    channel = keys.wake_channel(scope)
    async with worker:
        holder = await env.start_workflow(GuardedCall.run, args=[scope, "heldJob", args], id=f"{queue}-holder", task_queue=queue)
        await until(lambda: equals(client.get(counter_key(prefix, counter)), b"1"), "the holder's job to start")
        waiter = await env.start_workflow(GuardedCall.run, args=[scope, "heldJob", args], id=f"{queue}-waiter", task_queue=queue)
        await until(lambda: _subscribed(client, channel), "the waiter to wait in its slot")
        await client.set(gate_key(prefix, counter), "open")

        async def retried() -> bool:
            pending = await _pending(holder)
            return pending is not None and pending.attempt >= 2 and pending.HasField("last_failure")

        await until(retried, "the holder's first attempt to fail and a second to start")
        failure = (await _pending(holder)).last_failure.message
        assert "exceeded the error limit" in failure  # Temporal's refusal, [TMPRL1103]
        await asyncio.sleep(1)  # 20 of the waiters' 50 ms polls: time for a second dispatch, were there one
        assert await count(client, prefix, counter) == 1, failure
        assert await client.pttl(keys.lock(scope, "heldJob")) > 60_000  # kept for lock_ttl_ms (15 min)
        assert not await client.exists(keys.artifact(scope, "heldJob"))
        for run in (holder, waiter):
            assert (await run.describe()).status == WorkflowExecutionStatus.RUNNING
            await run.terminate("the retries would wait out lock_ttl_ms")
