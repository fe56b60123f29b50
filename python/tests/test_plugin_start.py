"""``FireOncePlugin`` at worker start, on a real dev server and a real redis-server: workers that
share one plugin and start together read the eviction policy once, and share its refusal."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
from redis.asyncio import Redis
from temporalio.worker import Worker

from temporal_fire_once import FireOnceConfigError, FireOnceKeys, FireOncePlugin

from .conftest import collect_garbage, redis_server, until
from .pyactivities import make_activities
from .pyworkflows import GuardedCall


@asynccontextmanager
async def _servers() -> AsyncIterator[tuple[Redis, Redis]]:
    """A redis-server of its own: an admin client, and the guard's, of a user denied INFO, so that
    the eviction check reads the policy with CONFIG GET (its fallback), counted per command."""
    with redis_server() as url:
        admin: Redis = Redis.from_url(url)
        await admin.acl_setuser("guard", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"], commands=["+@all", "-info"])
        guard: Redis = Redis.from_url(url, username="guard", password="pw")
        try:
            yield admin, guard
        finally:
            await guard.aclose()
            await admin.aclose()


async def _policy_reads(admin: Redis) -> tuple[int, int]:
    """``CONFIG GET`` calls (INFO commandstats), and the guard's ``INFO`` calls refused (ACL LOG), so far."""
    stats: Any = await admin.info("commandstats")
    refusals: Any = await admin.acl_log()
    denied = sum(int(e["count"]) for e in refusals if e["username"] == "guard" and e["object"] == "info")
    return int(stats.get("cmdstat_config|get", {}).get("calls", 0)), denied


def _workers(env: Any, plugin: FireOncePlugin, guard: Redis, prefix: str) -> list[Worker]:
    collect_garbage()
    return [
        Worker(env.client, task_queue=f"py-{uuid.uuid4().hex[:8]}", workflows=[GuardedCall], activities=make_activities(guard, prefix), plugins=[plugin])
        for _ in range(2)
    ]


async def _start_together(admin: Redis, plugin: FireOncePlugin, workers: list[Worker]) -> list[asyncio.Task[None]]:
    """Start ``workers`` while Redis is frozen (SIGSTOP), so that the first one's check is still in
    flight when the second one starts; thaw it once both have started."""
    pid = int((await admin.info("server"))["process_id"])
    os.kill(pid, signal.SIGSTOP)
    try:
        runs = [asyncio.ensure_future(worker.run()) for worker in workers]
        while plugin._running < len(workers):
            await asyncio.sleep(0.01)  # each run is in the plugin's run_worker, past the point it decides to check
    finally:
        os.kill(pid, signal.SIGCONT)
    return runs


async def test_workers_sharing_a_plugin_and_starting_together_read_the_eviction_policy_once(temporal_env: Any, prefix: str) -> None:
    async with _servers() as (admin, guard):
        plugin = FireOncePlugin(guard, key_prefix=prefix, store_timeout_ms=60_000)
        workers = _workers(temporal_env, plugin, guard, prefix)
        before = await _policy_reads(admin)
        runs = await _start_together(admin, plugin, workers)
        for _ in range(600):  # the check passed: the prefix is claimed next
            if await admin.exists(FireOnceKeys(prefix).protocol_marker()):
                break
            await asyncio.sleep(0.05)
        for worker in workers:
            await worker.shutdown()
        await asyncio.gather(*runs)
        after = await _policy_reads(admin)
    # One check for both: its INFO server (is it a sentinel?) and INFO memory refused, one CONFIG GET.
    assert (after[0] - before[0], after[1] - before[1]) == (1, 2)


async def test_workers_starting_together_share_a_refusal_and_the_next_start_checks_again(temporal_env: Any, prefix: str) -> None:
    async with _servers() as (admin, guard):
        await admin.config_set("maxmemory-policy", "allkeys-lru")
        plugin = FireOncePlugin(guard, key_prefix=prefix, store_timeout_ms=60_000)
        workers = _workers(temporal_env, plugin, guard, prefix)
        before = await _policy_reads(admin)
        runs = await _start_together(admin, plugin, workers)
        for run in runs:
            with pytest.raises(FireOnceConfigError, match="has maxmemory-policy allkeys-lru"):
                await run
        refused = await _policy_reads(admin)
        await admin.config_set("maxmemory-policy", "noeviction")
        worker = _workers(temporal_env, plugin, guard, prefix)[0]
        async with worker:  # a refusal is not remembered: this start reads the policy again
            pass
        again = await _policy_reads(admin)
    assert refused[0] - before[0] == 1 and again[0] - refused[0] == 1


async def test_a_worker_refused_at_start_inside_async_with_raises_the_refusal_and_does_not_hang(temporal_env: Any, prefix: str) -> None:
    """``async with Worker(...)`` waits in its exit for the worker's shutdown, which the SDK marks
    complete only once the worker ran: a start the plugin refuses must mark it too, or the exit
    waits for ever (as a refused ``run()`` never did)."""
    async with _servers() as (admin, guard):
        await admin.config_set("maxmemory-policy", "allkeys-lru")
        plugin = FireOncePlugin(guard, key_prefix=prefix)
        worker = _workers(temporal_env, plugin, guard, prefix)[0]

        async def enter_and_wait() -> None:
            async with worker:
                await asyncio.sleep(30)  # cancelled by the refusal, as the SDK cancels the body on a fatal start error

        with pytest.raises(FireOnceConfigError, match="has maxmemory-policy allkeys-lru"):
            await asyncio.wait_for(enter_and_wait(), timeout=20)


async def test_a_worker_refused_at_start_and_run_again_once_redis_is_fixed_runs_and_its_shutdown_waits_for_it(temporal_env: Any, prefix: str) -> None:
    """The mark a refused start leaves (so that ``async with`` can end) is taken back when the same
    worker is run again: otherwise it runs while ``is_shutdown`` says it stopped, and ``shutdown()``
    returns at once, before its activities end."""
    async with _servers() as (admin, guard):
        await admin.config_set("maxmemory-policy", "allkeys-lru")
        plugin = FireOncePlugin(guard, key_prefix=prefix)
        worker = _workers(temporal_env, plugin, guard, prefix)[0]
        with pytest.raises(FireOnceConfigError, match="has maxmemory-policy allkeys-lru"):
            await worker.run()
        await admin.config_set("maxmemory-policy", "noeviction")
        run = asyncio.ensure_future(worker.run())
        await until(lambda: worker.is_running, "the worker runs")
        assert not worker.is_shutdown
        await asyncio.wait_for(worker.shutdown(), timeout=20)
        assert run.done()
        await run
