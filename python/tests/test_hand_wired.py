"""A worker wired by hand, without ``FireOncePlugin``, exactly as python/README.md's "Wiring by
hand" shows it (``wire_by_hand`` is that snippet): ``check_worker_redis``, a bare guard that
claims its prefix, a ``WakeHub`` closed after the worker, and the ``FireOnceInterceptor`` given
the worker's client, whose dispatch log is flushed once the worker has stopped. On the dev
server and a real Redis; each job counts its dispatches on a counter the guard does not own."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any, AsyncIterator, Sequence

from redis.asyncio import Redis
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.worker import Interceptor, Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import FireOnceGuard, GuardOptions, WakeHub, check_worker_redis, parse_artifact
from temporal_fire_once.worker import FireOnceInterceptor, WorkerDefaults

from .codec import ENCODING, AesGcmCodec
from .conftest import collect_garbage
from .pyactivities import counter_key, make_activities
from .pyworkflows import ContinuedCall, GuardedCall, ParentCall

WORKFLOWS = [GuardedCall, ParentCall, ContinuedCall]
_RUN_TIMEOUT = timedelta(seconds=30)  # ends a run whose workflow task cannot decode the result, which else retries for ever


@asynccontextmanager
async def wire_by_hand(
    client: Client, redis: Redis, prefix: str, task_queue: str, activities: list[Any], after: Sequence[Interceptor] = ()
) -> AsyncIterator[Worker]:
    """The README's hand-wired worker, run for the body of the ``async with`` (with the
    interceptors ``after`` listed after the guard's)."""
    await check_worker_redis(redis)  # the plugin's start checks, which nothing runs for you here
    guard = FireOnceGuard(redis, GuardOptions(key_prefix=prefix))
    await guard.claim_protocol()  # and its claim of the key prefix for protocol v3
    wake = WakeHub(redis)
    interceptor = FireOnceInterceptor(guard, WorkerDefaults(poll_interval_ms=50), wake=wake, client=client)
    collect_garbage()
    worker = Worker(client, task_queue=task_queue, workflows=WORKFLOWS, activities=activities, interceptors=[interceptor, *after])
    try:
        async with worker:
            yield worker
    finally:
        await interceptor.flush()  # the dispatch log's last entries, before the client is closed
        await wake.close()  # after the worker: it opened a subscription connection of its own


async def test_two_hand_wired_workers_dispatch_once_for_racing_runs_a_retry_a_child_and_a_continued_run(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    queue, second = f"py-hand-{uuid.uuid4().hex[:8]}", f"py-hand2-{uuid.uuid4().hex[:8]}"  # one worker per task queue in a process
    env = temporal_env.client
    activities = make_activities(client, prefix)
    other: Redis = Redis.from_url(_url(client))  # the second worker's own client, as in another process
    async with wire_by_hand(env, client, prefix, queue, activities), wire_by_hand(env, other, prefix, second, activities):
        args = ["s-hand", "crossJob", ["hand", 200]]
        racing = [env.execute_workflow(GuardedCall.run, args=args, id=f"{queue}-{i}", task_queue=(queue, second)[i % 2]) for i in range(6)]
        results = await asyncio.gather(*racing)
        child = await env.execute_workflow(ParentCall.run, args=args, id=f"{queue}-p", task_queue=second)
        continued = await env.execute_workflow(ContinuedCall.run, args=args, id=f"{queue}-c", task_queue=queue)
        flaky = await env.execute_workflow(GuardedCall.run, args=["s-hand-flaky", "flakyJob", ["hand-flaky"]], id=f"{queue}-f", task_queue=queue)
    await other.aclose()
    assert all(r == results[0] for r in results) and child == results[0] and continued == results[0]
    assert await client.get(counter_key(prefix, "hand")) == b"1"
    assert flaky == {"counterId": "hand-flaky", "count": 2}  # failed once, released, dispatched again


async def test_the_worker_clients_payload_codec_seals_and_opens_artifacts_as_the_plugins_does(temporal_env: Any, client: Redis, prefix: str) -> None:
    # Given client= but no payload_codec=, the interceptor stored its results in plain text and
    # handed back the sealed artifacts a plugin worker stored, sealed once more.
    codec_client = Client(temporal_env.client.service_client, namespace="default", data_converter=DataConverter(payload_codec=AesGcmCodec(b"k" * 32)))
    hand, plugin = f"py-hand-{uuid.uuid4().hex[:8]}", f"py-plugin-{uuid.uuid4().hex[:8]}"
    activities = make_activities(client, prefix)
    collect_garbage()
    plugin_worker = Worker(
        codec_client, task_queue=plugin, workflows=WORKFLOWS, activities=activities, plugins=[FireOncePlugin(client, key_prefix=prefix)]
    )
    async with wire_by_hand(codec_client, client, prefix, hand, activities), plugin_worker:
        for scope, writer, reader in [("s-by-hand", hand, plugin), ("s-by-plugin", plugin, hand)]:
            args = [scope, "crossJob", [scope, 0]]
            first = await codec_client.execute_workflow(GuardedCall.run, args=args, id=f"{writer}-{scope}", task_queue=writer)
            stored_bytes = await client.get(f"{prefix}:v3:{{default/{scope}}}:a:crossJob")
            assert isinstance(stored_bytes, bytes)
            record = parse_artifact(stored_bytes)
            assert record is not None
            stored = Payload()
            stored.ParseFromString(record.payload)
            assert stored.metadata["encoding"] == ENCODING, f"{writer} stored its artifact unsealed"
            again = await codec_client.execute_workflow(GuardedCall.run, args=args, id=f"{reader}-{scope}", task_queue=reader, run_timeout=_RUN_TIMEOUT)
            assert again == first and await client.get(counter_key(prefix, scope)) == b"1"


def _url(redis: Redis) -> str:
    kwargs = redis.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}"
