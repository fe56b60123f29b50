"""The dispatch log's last batch when a worker stops (``FireOnceInterceptor.flush``): behind a slow
link, a worker's Redis client closed as soon as the worker has stopped, hand-wired as
python/README.md says or with the plugin, leaves every decision in the stream and no warning; on
a Redis that never answers, a flush gives up at its bound. Entries are counted in the stream
(XRANGE), dispatches on a counter the guard does not own."""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncContextManager, AsyncIterator

import pytest
from redis.asyncio import Redis
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import FireOnceGuard, GuardOptions
from temporal_fire_once.worker.log import DispatchLog

from .conftest import collect_garbage
from .pyactivities import counter_key, make_activities
from .pyworkflows import GuardedCall
from .slow_link import slow_link
from .test_hand_wired import WORKFLOWS, _url, wire_by_hand

IDS = {"scope": "s", "step": "summarise", "jobType": "summary"}


@pytest.mark.parametrize("wiring", ["by hand", "plugin"])
async def test_a_worker_stopped_right_after_its_last_activity_behind_a_slow_link_leaves_every_decision_logged(
    temporal_env: Any, client: Redis, prefix: str, caplog: Any, wiring: str
) -> None:
    """Each reply 300 ms late, and the client closed once the worker has stopped: the last batch
    (``committed``) was still unanswered, and closing the client cut it off with "could not append
    1 dispatch-log entries", though Redis had it. Nothing waited for it, and nothing could."""
    queue = f"py-slow-{uuid.uuid4().hex[:8]}"
    env = temporal_env.client
    activities = make_activities(client, prefix)  # the job counts on a direct client, not through the link
    caplog.set_level(logging.WARNING, logger="temporal_fire_once")
    async with slow_link(_url(client), reply_delay_s=0.3) as url:
        slow: Redis = Redis.from_url(url)
        async with _worker(wiring, env, slow, prefix, queue, activities):
            await env.execute_workflow(GuardedCall.run, args=["s-slow", "crossJob", ["slow", 0]], id=f"{queue}-1", task_queue=queue)
        await slow.aclose()
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrange(f"{prefix}:v3:default:log")  # type: ignore[assignment]
    assert [fields[b"decision"] for _, fields in entries] == [b"dispatched", b"committed"]
    assert await client.get(counter_key(prefix, "slow")) == b"1"
    assert [r.getMessage() for r in caplog.records if "dispatch-log" in r.getMessage()] == []


async def test_a_flush_on_a_redis_that_never_answers_gives_up_at_its_bound_and_counts_what_it_gave_up(caplog: Any) -> None:
    """Every append is bounded by ``store_timeout_ms`` (here a minute); ``flush(timeout_ms)``
    returns at its own bound, with the entries it gave up, and leaves no append running."""
    async with _silent_redis() as silent:
        log = DispatchLog(FireOnceGuard(silent, GuardOptions(store_timeout_ms=60_000)), 1_000)

        async def decide() -> None:
            log.decision("dispatched", "default", IDS)
            log.decision("committed", "default", IDS)

        await ActivityEnvironment().run(decide)
        assert await log.flush(timeout_ms=200) == 2
        assert await log.flush(timeout_ms=200) == 0  # nothing left to wait for
    assert [r.getMessage() for r in caplog.records if "dispatch-log" in r.getMessage()] == [
        "fire-once: 2 dispatch-log entries had no answer from Redis within 200 ms; given up, they may be lost"
    ]


async def test_after_a_flush_gave_up_a_batch_not_yet_sent_the_next_decisions_are_logged(client: Redis, prefix: str) -> None:
    """A batch given up while it waited for the one ahead of it must take no more entries: left
    open, every later decision of its namespace joined it, and none was ever sent."""
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    real = guard.log_append
    stalled = asyncio.Event()

    async def first_stalls(namespace: str | None, max_len: int, entries: list[list[tuple[str, str]]]) -> int:
        if not stalled.is_set():
            stalled.set()
            await asyncio.Event().wait()  # a Redis that never answers this one
        return await real(namespace, max_len, entries)

    guard.log_append = first_stalls  # type: ignore[method-assign]
    log = DispatchLog(guard, 1_000)

    async def decide() -> int:
        log.decision("dispatched", "default", IDS)
        await stalled.wait()
        log.decision("committed", "default", IDS)  # waits for the stalled batch
        gave_up = await log.flush(timeout_ms=100)
        log.decision("fast-forwarded", "default", IDS)
        return gave_up + await log.flush()

    assert await ActivityEnvironment().run(decide) == 2
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrange(f"{prefix}:v3:default:log")  # type: ignore[assignment]
    assert [fields[b"decision"] for _, fields in entries] == [b"fast-forwarded"]


def _worker(wiring: str, client: Client, redis: Redis, prefix: str, queue: str, activities: list[Any]) -> AsyncContextManager[Any]:
    """A worker as python/README.md wires it by hand, or with the plugin."""
    if wiring == "by hand":
        return wire_by_hand(client, redis, prefix, queue, activities)
    collect_garbage()
    return Worker(client, task_queue=queue, workflows=WORKFLOWS, activities=activities, plugins=[FireOncePlugin(redis, key_prefix=prefix)])


@asynccontextmanager
async def _silent_redis() -> AsyncIterator[Redis]:
    """A client of a server that accepts connections and never answers."""

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client goes; writes nothing
        writer.close()

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    redis: Redis = Redis(port=server.sockets[0].getsockname()[1])
    try:
        yield redis
    finally:
        await redis.aclose()
        server.close()

