"""``dispatch()`` on a real dev server and a real Redis: a call whose cancellation landed while its
lock was being taken runs nothing, gives the lock back and hands back the waiters parked on it; one
cancelled while it commits the result its job returned still stores it."""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable

import pytest
from redis.asyncio import Redis
from temporalio import activity
from temporalio.worker import Worker

from temporal_fire_once import FireOnceKeys, FireOncePlugin, fire_once

from .conftest import collect_garbage, redis_server, until
from .pyworkflows import GuardedCall


async def _paused_script_calls(redis: Redis) -> bool:
    """Whether Redis holds back a script under ``CLIENT PAUSE WRITE`` (flag ``b``, blocked)."""
    clients: Any = await redis.client_list()
    return any("b" in c["flags"] and c["cmd"] in ("evalsha", "eval") for c in clients)


async def _exists(redis: Redis, key: str) -> bool:
    return bool(await redis.exists(key))


async def _gone(redis: Redis, key: str) -> bool:
    return not await redis.exists(key)


async def _settled_in(redis: Redis, log: str) -> bool:
    entries: Any = await redis.xrange(log)
    return any(fields[b"decision"] in (b"released-on-failure", b"committed") for _, fields in entries)


async def test_a_call_cancelled_while_its_lock_is_taken_runs_nothing_and_gives_the_lock_back(
    temporal_env: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK only flags a sync (thread-pool) activity as cancelled, and cancels no task of it: an
    acquire that wins after the flag is set returns the lock to ``dispatch()``, which must look at
    the flag, release by compare-and-delete (handing back the waiters parked on the lock) and
    raise, never run the job. Redis holds the acquire (``CLIENT PAUSE WRITE``) while worker
    shutdown cancels the activity, then lets it win."""
    runs: list[str] = []

    @fire_once()
    @activity.defn(name="syncJob")
    def sync_job(text: str) -> str:
        runs.append(text)  # a counter the guard does not own
        return text.upper()

    keys = FireOnceKeys(prefix)
    lock, waiters = keys.lock("s-taking", "syncJob"), keys.waiters("s-taking", "syncJob")
    with redis_server() as url, ThreadPoolExecutor(2) as executor:  # its own server: it pauses writes
        redis: Redis = Redis.from_url(url)
        # A waiter parked (by a TypeScript worker) on an earlier lock of the step: the waiter list
        # outlives a lock by a grace period. Whoever takes and settles the lock hands it back.
        parked = b"w:" + b"0" * 64 + b":token-of-a-parked-waiter"
        await redis.rpush(waiters, parked)
        await redis.pexpire(waiters, 600_000)
        collect_garbage()
        queue = f"py-{uuid.uuid4().hex[:8]}"
        worker = Worker(
            temporal_env.client,
            task_queue=queue,
            workflows=[GuardedCall],
            activities=[sync_job],
            activity_executor=executor,
            plugins=[FireOncePlugin(redis, key_prefix=prefix, store_timeout_ms=60_000)],
        )
        running = asyncio.ensure_future(worker.run())
        # The worker has started: claiming the prefix is its last write before it polls.
        await until(lambda: _exists(redis, keys.protocol_marker()), "the worker claimed the prefix")
        await redis.client_pause(120_000, all=False)  # CLIENT PAUSE 120000 WRITE
        handle = await temporal_env.client.start_workflow(GuardedCall.run, args=["s-taking", "syncJob", ["x"], None, 1], id=queue, task_queue=queue)
        await until(lambda: _paused_script_calls(redis), "the acquire reached Redis, which holds it")
        with caplog.at_level(logging.DEBUG, logger="temporalio.worker._activity"):
            stopping = asyncio.ensure_future(worker.shutdown())  # graceful_shutdown_timeout 0: cancels at once
            await until(lambda: "Cancelling activity" in caplog.text, "the SDK flagged the activity cancelled")
        await redis.client_unpause()  # the acquire runs: this call takes the lock
        await stopping
        await running
        await handle.terminate()
        log = keys.for_namespace("default").log()
        await until(lambda: _settled_in(redis, log), "the lock settled in the dispatch log (written in the background)")
        entries: Any = await redis.xrange(log)
        decisions = [fields[b"decision"] for _, fields in entries]
        state = (await redis.exists(lock), await redis.exists(keys.artifact("s-taking", "syncJob")), await redis.lrange(waiters, 0, -1))
        handed_back_ttl = await redis.pttl(waiters)
        await redis.aclose()
    assert runs == []
    assert decisions == [b"released-on-failure"]
    assert state == (0, 0, [parked])  # the lock given back, nothing stored, the waiter put back ...
    assert 0 < handed_back_ttl <= 60_000  # ... by the release's hand-back, with the waiters' grace


async def test_a_call_cancelled_while_it_commits_still_stores_its_result_so_the_job_never_runs_again(
    temporal_env: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The job has run and returned: its result must be stored even if the attempt is cancelled
    while the commit is on the wire (worker shutdown, a cancellation or a pause delivered by the
    job's last heartbeat), as a release or a hold is. Otherwise the lock is left to its lease, and
    the next run dispatches the job again. Redis holds the commit (``CLIENT PAUSE WRITE``, sent by
    the job itself as it returns) while worker shutdown cancels the activity, then lets it run."""
    runs: list[str] = []
    keys = FireOnceKeys(prefix)
    with redis_server() as url:  # its own server: it pauses writes
        redis: Redis = Redis.from_url(url)

        @fire_once(lease_ms=1_000)
        @activity.defn(name="pausingJob")
        async def pausing_job(text: str) -> str:
            runs.append(text)  # a counter the guard does not own
            if len(runs) == 1:
                await redis.client_pause(120_000, all=False)  # CLIENT PAUSE 120000 WRITE: the commit waits
            return text.upper()

        def make_worker(queue: str) -> Worker:
            collect_garbage()
            return Worker(
                temporal_env.client,
                task_queue=queue,
                workflows=[GuardedCall],
                activities=[pausing_job],
                plugins=[FireOncePlugin(redis, key_prefix=prefix, store_timeout_ms=60_000)],
            )

        queue = f"py-{uuid.uuid4().hex[:8]}"
        worker = make_worker(queue)
        running = asyncio.ensure_future(worker.run())
        handle = await temporal_env.client.start_workflow(GuardedCall.run, args=["s-committing", "pausingJob", ["x"], None, 1], id=queue, task_queue=queue)
        await until(lambda: _paused_script_calls(redis), "the commit reached Redis, which holds it")
        with caplog.at_level(logging.DEBUG, logger="temporalio.worker._activity"):
            stopping = asyncio.ensure_future(worker.shutdown())  # graceful_shutdown_timeout 0: cancels at once
            await until(lambda: "Cancelling activity" in caplog.text, "the SDK cancelled the activity")
        await redis.client_unpause()  # the commit runs, if it is still there to run
        await stopping
        await running
        await handle.terminate()
        lock = keys.lock("s-committing", "pausingJob")
        # Gone either way: deleted by the commit, or expired with its lease (1 s), renewed no more.
        await until(lambda: _gone(redis, lock), "the lock is gone")
        stored = await redis.exists(keys.artifact("s-committing", "pausingJob"))
        # A later run of the scope fast-forwards to the stored result.
        queue = f"py-{uuid.uuid4().hex[:8]}"
        async with make_worker(queue):
            later = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-committing", "pausingJob", ["x"]], id=queue, task_queue=queue)
        await redis.aclose()
    assert later == "X" and runs == ["x"]  # one dispatch: the later run fast-forwarded
    assert stored == 1
