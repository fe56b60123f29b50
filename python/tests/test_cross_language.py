"""Python and TypeScript workers on one dev server and one Redis (issue 14): they share locks,
artifacts and the scope header, and read each other's codec-encoded artifacts. Dispatches are
counted by the jobs themselves (an INCR both languages' crossJob do), never by the guard."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from contextlib import asynccontextmanager, suppress
from typing import Any, AsyncIterator, Awaitable

import pytest
from redis.asyncio import Redis
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.converter import DataConverter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import FireOnceKeys, parse_artifact

from .codec import ENCODING, AesGcmCodec, RefusingCodec
from .conftest import REPO, collect_garbage, equals, until
from .pyactivities import counter_key, gate_key, make_activities
from .pyworkflows import GuardedCall
from .ts_cli import fire_once
from .ts_worker import TsWorker, start_ts_worker

CODEC_KEY = os.urandom(32)
PREFIX = f"pyx-{uuid.uuid4().hex[:8]}"
TS_QUEUE = f"ts-{uuid.uuid4().hex[:8]}"
TS_CODEC_QUEUE = f"{TS_QUEUE}-codec"


@pytest.fixture(scope="module")
async def ts_worker(temporal_env: Any, redis_url: str) -> AsyncIterator[TsWorker]:
    worker = await start_ts_worker(
        {
            "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
            "REDIS_URL": redis_url,
            "KEY_PREFIX": PREFIX,
            "TASK_QUEUE": TS_QUEUE,
            "CODEC_TASK_QUEUE": TS_CODEC_QUEUE,
            "CODEC_KEY": CODEC_KEY.hex(),
        }
    )
    yield worker
    await worker.stop()
    conn = Redis.from_url(redis_url)
    keys = [key async for key in conn.scan_iter(match=f"{PREFIX}:*")]
    if keys:
        await conn.delete(*keys)
    await conn.aclose()


class CountTasks(Interceptor):
    """Counts the activity tasks this worker took, guarded or not: which language served how many."""

    def __init__(self) -> None:
        self.tasks = 0

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        counter = self

        class Counting(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                counter.tasks += 1
                return await self.next.execute_activity(input)

        return Counting(next)


def python_worker(client: Client, redis: Redis, task_queue: str, workflows: bool = True, count: CountTasks | None = None) -> Worker:
    collect_garbage()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[GuardedCall] if workflows else [],
        activities=make_activities(redis, PREFIX),
        plugins=[FireOncePlugin(redis, key_prefix=PREFIX, poll_interval_ms=50)],
        interceptors=[count] if count is not None else [],
        max_concurrent_activities=200,
    )


def codec_client(env: Any) -> Client:
    return Client(env.client.service_client, namespace="default", data_converter=DataConverter(payload_codec=AesGcmCodec(CODEC_KEY)))


async def fire_once_report(redis_url: str) -> Any:
    """`fire-once report --json` of the TypeScript CLI over this module's prefix."""
    code, out, err = await fire_once("report", "--redis", redis_url, "--prefix", PREFIX, "--since", "all", "--json")
    assert code == 0, err
    return json.loads(out)


def wf_id() -> str:
    return f"x-{uuid.uuid4().hex[:12]}"


async def test_20_racing_typescript_runs_served_by_both_languages_dispatch_once(
    temporal_env: Any, ts_worker: TsWorker, client: Redis, redis_url: str
) -> None:
    # A Python worker polls the TypeScript worker's task queue for activities; half of the runs
    # call there, the other half on a queue only Python serves, so both languages surely race.
    count = CountTasks()
    py_only = f"py-{uuid.uuid4().hex[:8]}"
    shared = python_worker(temporal_env.client, client, TS_QUEUE, workflows=False, count=count)
    alone = python_worker(temporal_env.client, client, py_only, workflows=False, count=count)
    async with shared, alone:
        runs = [
            temporal_env.client.execute_workflow(
                "tsGuardedCall", args=["s-race", "crossJob", ["race", 1500], TS_QUEUE if i % 2 else py_only], id=wf_id(), task_queue=TS_QUEUE
            )
            for i in range(20)
        ]
        results = await asyncio.gather(*runs)
    assert await client.get(counter_key(PREFIX, "race")) == b"1"
    assert all(r == results[0] for r in results)
    assert count.tasks >= 10  # Python served at least the runs of its own queue
    print(f"activity tasks served: python {count.tasks}, typescript {20 - count.tasks}; dispatched by {results[0]['by']}")
    # Both languages logged their decisions to one stream, and the TypeScript CLI reads them all.
    await asyncio.sleep(0.2)  # Python appends its log entries in the background
    report = await fire_once_report(redis_url)
    (race,) = [row for row in report["byScope"] if row["scope"] == "s-race"]
    counts = race["counts"]
    assert (counts["dispatched"], counts["committed"]) == (1, 1)
    # Every other run fast-forwarded or, a TypeScript waiter ('park' by default), parked and was
    # completed with the result by its worker's reap (PROTOCOL.md section 7).
    assert counts.get("fast-forwarded", 0) + counts.get("in-flight-parked", 0) == 19
    assert report["duplicates"] == []


async def test_a_python_workflow_gets_a_typescript_dispatch_and_python_fast_forwards_to_it(
    temporal_env: Any, ts_worker: TsWorker, client: Redis
) -> None:
    queue = f"py-{uuid.uuid4().hex[:8]}"
    async with python_worker(temporal_env.client, client, queue):
        # The Python workflow's scope header reaches the TypeScript activity...
        first = await temporal_env.client.execute_workflow(
            GuardedCall.run, args=["s-py-ts", "crossJob", ["py-ts", 0], TS_QUEUE], id=wf_id(), task_queue=queue
        )
        # ...and a Python activity of the same scope and step fast-forwards to its artifact.
        again = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-py-ts", "crossJob", ["py-ts", 0]], id=wf_id(), task_queue=queue)
    assert first["by"] == "typescript" and again == first
    assert await client.get(counter_key(PREFIX, "py-ts")) == b"1"


async def test_a_typescript_workflow_gets_a_python_dispatch_and_typescript_fast_forwards_to_it(
    temporal_env: Any, ts_worker: TsWorker, client: Redis
) -> None:
    queue = f"py-{uuid.uuid4().hex[:8]}"
    async with python_worker(temporal_env.client, client, queue):
        first = await temporal_env.client.execute_workflow(
            "tsGuardedCall", args=["s-ts-py", "crossJob", ["ts-py", 0], queue], id=wf_id(), task_queue=TS_QUEUE
        )
    again = await temporal_env.client.execute_workflow("tsGuardedCall", args=["s-ts-py", "crossJob", ["ts-py", 0]], id=wf_id(), task_queue=TS_QUEUE)
    assert first["by"] == "python" and again == first
    assert await client.get(counter_key(PREFIX, "ts-py")) == b"1"


@pytest.mark.parametrize("writer", ["typescript", "python"])
async def test_codec_encoded_artifacts_written_by_one_language_are_read_by_the_other(
    writer: str, temporal_env: Any, ts_worker: TsWorker, client: Redis
) -> None:
    codec = codec_client(temporal_env)
    queue = f"pyc-{uuid.uuid4().hex[:8]}"
    scope = f"s-codec-{writer}"
    args = [scope, "crossJob", [scope, 0]]

    async def ts_call() -> Any:
        return await codec.execute_workflow("tsGuardedCall", args=args, id=wf_id(), task_queue=TS_CODEC_QUEUE)

    async def py_call() -> Any:
        return await codec.execute_workflow(GuardedCall.run, args=args, id=wf_id(), task_queue=queue)

    async with python_worker(codec, client, queue):
        first = await (ts_call() if writer == "typescript" else py_call())
        stored = await client.get(FireOnceKeys(PREFIX).artifact(scope, "crossJob"))
        again = await (py_call() if writer == "typescript" else ts_call())
    assert first["by"] == writer and again == first
    assert await client.get(counter_key(PREFIX, scope)) == b"1"
    # At rest the artifact is the codec's output: encrypted, the result nowhere in clear.
    assert isinstance(stored, bytes)
    record = parse_artifact(stored)
    assert record is not None
    payload = Payload()
    payload.ParseFromString(record.payload)
    assert payload.metadata["encoding"] == ENCODING and first["nonce"].encode() not in stored


@asynccontextmanager
async def held_with_typescript_waiters(
    env: Any, redis: Redis, scope: str, size: int, worker_client: Client | None = None, **plugin_options: Any
) -> AsyncIterator[list[WorkflowHandle[Any, Any]]]:
    """One run of ``heldJob`` dispatched by a Python worker (of ``worker_client``, by default the
    environment's) that cannot store results over 1000 bytes, and three more that a TypeScript
    worker parks on its lock (its default, 'park'); the job ends once all three are parked. The
    four runs, while the Python worker still runs."""
    queue = f"py-{uuid.uuid4().hex[:8]}"
    args = [scope, "heldJob", [scope, size]]
    waiters_key = FireOnceKeys(PREFIX).waiters(scope, "heldJob")
    collect_garbage()
    plugin = FireOncePlugin(redis, key_prefix=PREFIX, poll_interval_ms=50, max_artifact_bytes=1000, **plugin_options)
    async with Worker(worker_client or env.client, task_queue=queue, activities=make_activities(redis, PREFIX), plugins=[plugin]):
        holder = await env.client.start_workflow("tsGuardedCall", args=[*args, queue], id=wf_id(), task_queue=TS_QUEUE)
        await until(lambda: redis.exists(counter_key(PREFIX, scope)), "the Python holder to dispatch")
        waiters = [await env.client.start_workflow("tsGuardedCall", args=args, id=wf_id(), task_queue=TS_QUEUE) for _ in range(3)]
        await until(lambda: equals(redis.llen(waiters_key), 3), "three TypeScript waiters parked")
        await redis.set(gate_key(PREFIX, scope), 1)
        yield [holder, *waiters]


async def run_with_typescript_waiters(env: Any, redis: Redis, scope: str, size: int, **plugin_options: Any) -> list[Any]:
    """The four runs of ``held_with_typescript_waiters``: their results, or their errors."""
    async with held_with_typescript_waiters(env, redis, scope, size, **plugin_options) as runs:
        return await asyncio.gather(*(run.result() for run in runs), return_exceptions=True)


async def test_typescript_waiters_parked_on_a_python_holder_get_a_result_too_large_to_store(
    temporal_env: Any, ts_worker: TsWorker, client: Redis
) -> None:
    # 5000 bytes over max_artifact_bytes=1000: the holder keeps the lock (3 s) and stores nothing.
    results = await run_with_typescript_waiters(temporal_env, client, "s-hold-large", 5000, lock_ttl_ms=3000)
    assert await client.get(counter_key(PREFIX, "s-hold-large")) == b"1"
    assert results[0]["by"] == "python" and len(results[0]["pad"]) == 5000
    assert all(result == results[0] for result in results)


async def test_typescript_waiters_parked_on_a_python_holder_fail_for_good_on_a_result_its_converter_refuses(
    temporal_env: Any, ts_worker: TsWorker, client: Redis
) -> None:
    # 'fixed' mode: the lock keeps the TTL it was taken with (15 s); the job returns object().
    results = await run_with_typescript_waiters(temporal_env, client, "s-hold-refused", -1, lock_mode="fixed", lock_ttl_ms=15_000)
    assert await client.get(counter_key(PREFIX, "s-hold-refused")) == b"1"
    for result in results:
        assert isinstance(result, WorkflowFailureError), result
        assert isinstance(result.cause, ActivityError) and isinstance(result.cause.cause, ApplicationError)
        assert (result.cause.cause.type, result.cause.cause.non_retryable) == ("FireOnceUnstorableResult", True)


async def test_typescript_waiters_parked_on_a_python_holder_fail_at_once_on_a_result_its_codec_refuses(
    temporal_env: Any, ts_worker: TsWorker, client: Redis
) -> None:
    # The Python worker's codec refuses the result (size -2: it holds the codec's marker), so
    # Temporal fails the holder's attempt with the codec's error. The waiters the hold takes get
    # that failure now, retryably, not after the kept lock (60 s) and their timeouts.
    scope = "s-hold-codec-refused"
    refusing = Client(temporal_env.client.service_client, namespace="default", data_converter=DataConverter(payload_codec=RefusingCodec()))
    async with held_with_typescript_waiters(temporal_env, client, scope, -2, refusing, lock_ttl_ms=60_000) as runs:
        try:
            # A bound, not an assertion: waiters left parked never fail.
            await until(lambda: _all_retrying(runs), "every run retrying", seconds=60)
            assert [await _last_failure(run) for run in runs] == ["CodecRefusedError"] * 4
            assert await client.get(counter_key(PREFIX, scope)) == b"1"
            assert not await client.exists(FireOnceKeys(PREFIX).artifact(scope, "heldJob"))
        finally:
            # Their retries wait on the kept lock; end them rather than wait out its TTL.
            for run in runs:
                with suppress(Exception):
                    await run.terminate("test done")


async def _last_failure(run: WorkflowHandle[Any, Any]) -> str:
    """The failure type of the run's activity's last attempt; 'none' on its first attempt."""
    pending = (await run.describe()).raw_description.pending_activities
    if not pending or not pending[0].HasField("last_failure"):
        return "none"
    return str(pending[0].last_failure.application_failure_info.type or "other")


async def _all_retrying(runs: list[WorkflowHandle[Any, Any]]) -> bool:
    return all([await _last_failure(run) != "none" for run in runs])
