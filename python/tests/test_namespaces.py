"""Temporal namespaces are isolation boundaries (``test/integration/namespace-guarantees.ts`` in
TypeScript): one Redis, one key prefix, a Python worker in each of two namespaces. The same scope
string in both is two scopes: one dispatch in each, each run gets its own namespace's result,
and the keys are filed under each namespace. Dispatches are counted by the job, per namespace."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin, fire_once
from temporal_fire_once.core import FireOnceKeys

from .conftest import SECOND_NAMESPACE, collect_garbage
from .pyworkflows import GuardedCall


async def test_racing_runs_of_one_scope_string_in_two_namespaces_dispatch_once_in_each_and_get_their_own_result(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    def counter(namespace: str) -> str:
        return f"{prefix}:test:{namespace}:dispatches"

    @fire_once()
    @activity.defn(name="namespacedJob")
    async def namespaced_job(ms: int) -> dict[str, str]:
        namespace = activity.info().namespace
        await client.incr(counter(namespace))
        await asyncio.sleep(ms / 1000)
        return {"namespace": namespace, "nonce": uuid.uuid4().hex}

    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    other = await Client.connect(temporal_env.client.service_client.config.target_host, namespace=SECOND_NAMESPACE)
    clients = {"default": temporal_env.client, SECOND_NAMESPACE: other}
    workers = [
        Worker(c, task_queue=queue, workflows=[GuardedCall], activities=[namespaced_job], plugins=[FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)])
        for c in clients.values()
    ]

    async def race(namespace: str, runs: int) -> list[Any]:
        return list(
            await asyncio.gather(
                *(
                    clients[namespace].execute_workflow(
                        GuardedCall.run, args=["s-shared-string", "namespacedJob", [800]], id=f"{queue}-{namespace}-{uuid.uuid4().hex[:6]}", task_queue=queue
                    )
                    for _ in range(runs)
                )
            )
        )

    async with workers[0], workers[1]:
        in_default, in_b = await asyncio.gather(race("default", 10), race(SECOND_NAMESPACE, 10))
        later_default, later_b = await asyncio.gather(race("default", 1), race(SECOND_NAMESPACE, 1))
    assert [await client.get(counter("default")), await client.get(counter(SECOND_NAMESPACE))] == [b"1", b"1"]
    assert {r["namespace"] for r in in_default + later_default} == {"default"}
    assert {r["namespace"] for r in in_b + later_b} == {SECOND_NAMESPACE}
    assert len({r["nonce"] for r in in_default + later_default}) == 1 and len({r["nonce"] for r in in_b + later_b}) == 1
    assert in_default[0]["nonce"] != in_b[0]["nonce"]
    for namespace in ("default", SECOND_NAMESPACE):
        assert await client.exists(FireOnceKeys(prefix, namespace).artifact("s-shared-string", "namespacedJob")) == 1
