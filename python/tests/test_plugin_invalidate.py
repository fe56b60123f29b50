"""``FireOncePlugin.invalidate`` on a real Redis (and a dev server where a worker runs), as the
TypeScript plugin's (``src/worker/plugin.ts``, ``test/worker/plugin-invalidate.test.ts``): it
deletes a step's result and records ``invalidated`` in the dispatch log with Redis's clock, so
that ``fire-once report`` counts the next dispatch as a fresh start, not a duplicate;
``FireOnceGuard.invalidate`` records nothing. Dispatches are counted by the jobs' own INCR."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio.client import Client
from temporalio.worker import Worker, WorkerConfig

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import Acquired, DispatchTarget, FireOnceConfigError, FireOnceGuard, FireOnceInvalidId, FireOnceKeys, GuardOptions

from .conftest import REPO, collect_garbage
from .pyactivities import counter_key, make_activities
from .pyworkflows import GuardedCall
from .ts_cli import fire_once, run_ts

Entry = list[tuple[str, str]]


async def store(guard: FireOnceGuard, scope: str, *namespaces: str) -> None:
    """A result of ``(scope, summary)`` in each namespace, committed as a worker would."""
    for namespace in namespaces:
        outcome = await guard.acquire(DispatchTarget(scope=scope, step="summarise", job_type="summary", namespace=namespace))
        assert isinstance(outcome, Acquired)
        await guard.commit(outcome.lease, f"result of {namespace}".encode())


async def stored(client: Redis, prefix: str, scope: str, *namespaces: str) -> list[bool]:
    keys = FireOnceKeys(prefix)
    return [await client.exists(keys.for_namespace(ns).artifact(scope, "summary")) == 1 for ns in namespaces]


async def log_of(client: Redis, prefix: str, namespace: str = "default") -> list[Entry]:
    """The namespace's dispatch-log entries, each its fields in stream order."""
    raw: Any = await client.xrange(FireOnceKeys(prefix, namespace).log())
    return [[(name.decode(), value.decode()) for name, value in fields.items()] for _, fields in raw]


def in_namespace(temporal_env: Any, plugin: FireOncePlugin, namespace: str) -> None:
    """What ``Worker(client_of_namespace, plugins=[plugin])`` does to the plugin: configure a worker."""
    client = Client(temporal_env.client.service_client, namespace=namespace)
    plugin.configure_worker(WorkerConfig(client=client, task_queue=f"q-{uuid.uuid4().hex[:8]}"))


def guarded_worker(temporal_env: Any, client: Redis, prefix: str, plugin: FireOncePlugin) -> tuple[Worker, str]:
    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    worker = Worker(temporal_env.client, task_queue=queue, workflows=[GuardedCall], activities=make_activities(client, prefix), plugins=[plugin])
    return worker, queue


async def test_it_deletes_the_result_once_and_the_next_run_dispatches_again(temporal_env: Any, client: Redis, prefix: str) -> None:
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    worker, queue = guarded_worker(temporal_env, client, prefix, plugin)

    async def run(n: int) -> Any:
        return await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-inv", "crossJob", ["inv", 0]], id=f"{queue}-{n}", task_queue=queue)

    keys = FireOnceKeys(prefix)
    caches = client.pubsub()  # what a TypeScript worker's localCache listens on
    await caches.subscribe(keys.invalidations())
    await caches.get_message(timeout=5)  # the subscribe confirmation
    async with worker:
        first = await run(1)
        assert await run(2) == first  # fast-forwarded
        assert await plugin.invalidate("s-inv", "crossJob") is True  # the namespace of its one worker
        assert await client.exists(keys.artifact("s-inv", "crossJob")) == 0
        told = await caches.get_message(ignore_subscribe_messages=True, timeout=5)
        assert told is not None and told["data"] == keys.artifact("s-inv", "crossJob").encode()
        assert await plugin.invalidate("s-inv", "crossJob") is False
        second = await run(3)
    await caches.aclose()
    assert second["nonce"] != first["nonce"]
    assert await client.get(counter_key(prefix, "inv")) == b"2"


async def test_report_counts_the_next_dispatch_afresh_where_the_guards_invalidate_leaves_a_duplicate(
    temporal_env: Any, client: Redis, prefix: str, redis_url: str
) -> None:
    """The same run, invalidation, run for two scopes: through the plugin, and through
    ``FireOnceGuard.invalidate``, which logs nothing, so that the report sees two dispatches of
    one step with nothing between them: the reason the plugin has its own ``invalidate``."""
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    worker, queue = guarded_worker(temporal_env, client, prefix, plugin)

    async def run(scope: str, n: int) -> Any:
        return await temporal_env.client.execute_workflow(GuardedCall.run, args=[scope, "crossJob", [scope, 0]], id=f"{queue}-{scope}-{n}", task_queue=queue)

    async with worker:
        for scope, invalidate in (("s-plugin", plugin.invalidate), ("s-guard", plugin.guard.invalidate)):
            await run(scope, 1)
            assert await invalidate(scope, "crossJob", "default") is True
            await run(scope, 2)
    # The worker has stopped: its last log batch is in.
    assert [await client.get(counter_key(prefix, scope)) for scope in ("s-plugin", "s-guard")] == [b"2", b"2"]

    code, out, err = await fire_once("report", "--prefix", prefix, "--redis", redis_url, "--since", "all", "--json")
    assert (code, err) == (1, "")  # exit 1: a duplicate is listed (s-guard's)
    report = json.loads(out)
    counts = {row["scope"]: row["counts"] for row in report["byScope"]}
    assert counts["s-plugin"] == {"dispatched": 2, "committed": 2, "invalidated": 1}
    assert counts["s-guard"] == {"dispatched": 2, "committed": 2}
    assert [(d["scope"], d["step"], len(d["dispatches"])) for d in report["duplicates"]] == [("s-guard", "crossJob", 2)]


async def test_the_entry_has_the_fields_the_typescript_plugin_writes_in_its_order(client: Redis, prefix: str, redis_url: str) -> None:
    """One result invalidated by the Python plugin, then another by the TypeScript plugin
    (``tests/ts/invalidate.ts``): the two entries' field names, in stream order, are the same,
    ``redisTime`` among them, and so are their values but the clocks."""
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    await store(guard, "s-fields", "ns2")
    assert await FireOncePlugin(client, key_prefix=prefix).invalidate("s-fields", "summary", "ns2") is True
    await store(guard, "s-fields", "ns2")
    assert await run_ts(REPO / "python" / "tests" / "ts" / "invalidate.ts", redis_url, prefix, "s-fields", "summary", "ns2") == (0, "true\n", "")

    python, typescript = await log_of(client, prefix, "ns2")
    assert [name for name, _ in python] == [name for name, _ in typescript] == ["decision", "namespace", "scope", "jobType", "redisTime", "ts"]
    clocks = ("redisTime", "ts")
    assert [f for f in python if f[0] not in clocks] == [f for f in typescript if f[0] not in clocks]
    assert [f for f in python if f[0] not in clocks] == [("decision", "invalidated"), ("namespace", "ns2"), ("scope", "s-fields"), ("jobType", "summary")]
    # Redis's clock in microseconds, read before the entry's ts was taken (milliseconds, this host's clock).
    redis_time, ts = int(dict(python)["redisTime"]), int(dict(python)["ts"])
    assert redis_time < int(dict(typescript)["redisTime"]) and abs(redis_time // 1000 - ts) < 5_000


async def test_the_namespace_is_the_one_given_else_key_namespace_else_the_workers_one(temporal_env: Any, client: Redis, prefix: str) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    await store(guard, "s", "default", "ns2", "ns3", "shared")

    given = FireOncePlugin(client, key_prefix=prefix)  # no worker: the namespace given is enough
    assert await given.invalidate("s", "summary", "ns3") is True
    keyed = FireOncePlugin(client, key_prefix=prefix, key_namespace="shared")
    in_namespace(temporal_env, keyed, "ns2")
    assert await keyed.invalidate("s", "summary") is True
    workers = FireOncePlugin(client, key_prefix=prefix)
    in_namespace(temporal_env, workers, "ns2")
    in_namespace(temporal_env, workers, "ns2")  # two workers, one namespace
    assert await workers.invalidate("s", "summary") is True

    assert await stored(client, prefix, "s", "default", "ns2", "ns3", "shared") == [True, False, False, False]
    for namespace in ("ns2", "ns3", "shared"):  # each entry in its namespace's log
        assert [dict(entry)["namespace"] for entry in await log_of(client, prefix, namespace)] == [namespace]
    assert await log_of(client, prefix, "default") == []


@pytest.mark.parametrize("namespaces", [[], ["ns2", "ns3"]], ids=["no worker", "workers in two namespaces"])
async def test_without_a_namespace_it_cannot_tell_it_refuses_deleting_and_logging_nothing(
    temporal_env: Any, client: Redis, prefix: str, namespaces: list[str]
) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    await store(guard, "s", "default", "ns2", "ns3")
    plugin = FireOncePlugin(client, key_prefix=prefix)
    for namespace in namespaces:
        in_namespace(temporal_env, plugin, namespace)
    with pytest.raises(FireOnceConfigError, match=r"^invalidate: say whose result: .*pass the namespace, e\.g\. plugin\.invalidate\(scope, job_type, 'default'\)$"):
        await plugin.invalidate("s", "summary")
    assert await stored(client, prefix, "s", "default", "ns2", "ns3") == [True, True, True]
    assert [key async for key in client.scan_iter(match=f"{prefix}:*:log")] == []


@pytest.mark.parametrize(
    "scope, job_type, namespace",
    [("s\ud800", "summary", "default"), ("   ", "summary", "default"), ("s", "", "default"), ("s", "summary", "n" * 513)],
    ids=["lone surrogate in the scope", "whitespace-only scope", "empty job type", "namespace over 512 bytes"],
)
async def test_a_bad_id_raises_the_guards_typed_error_deleting_and_logging_nothing(
    client: Redis, prefix: str, scope: str, job_type: str, namespace: str
) -> None:
    plugin = FireOncePlugin(client, key_prefix=prefix)
    await store(plugin.guard, "s", "default")
    with pytest.raises(FireOnceInvalidId) as refused:
        await plugin.invalidate(scope, job_type, namespace)
    with pytest.raises(FireOnceInvalidId) as by_guard:
        await plugin.guard.invalidate(scope, job_type, namespace)
    assert str(refused.value) == str(by_guard.value)
    assert await stored(client, prefix, "s", "default") == [True]
    assert [key async for key in client.scan_iter(match=f"{prefix}:*:log")] == []


async def test_a_failure_to_log_is_a_warning_and_the_invalidation_still_returns(
    client: Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = FireOncePlugin(client, key_prefix=prefix)
    await store(plugin.guard, "s", "default")

    async def refused(namespace: str | None, max_len: int, entries: list[list[tuple[str, str]]]) -> int:
        raise RuntimeError("the stream's node is gone")

    plugin.guard.log_append = refused  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="temporal_fire_once"):
        assert await plugin.invalidate("s", "summary", "default") is True
    assert await stored(client, prefix, "s", "default") == [False]
    assert [r.getMessage() for r in caplog.records if r.name == "temporal_fire_once"] == [
        "fire-once: invalidated 'summary' of scope 's', but could not record it in the dispatch log: the stream's node is gone"
    ]


async def test_with_the_dispatch_log_off_it_logs_nothing(client: Redis, prefix: str) -> None:
    plugin = FireOncePlugin(client, key_prefix=prefix, dispatch_log=False)
    await store(plugin.guard, "s", "default")
    assert await plugin.invalidate("s", "summary", "default") is True
    assert await stored(client, prefix, "s", "default") == [False]
    assert await log_of(client, prefix) == []
