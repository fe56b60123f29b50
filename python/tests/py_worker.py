"""A Python worker in a process of its own (``python -m tests.py_worker <temporal> <redis> <prefix>
<queue> [lease_ms]``), for tests that need a second worker process: one with its own
``PYTHONHASHSEED``, or one to SIGKILL mid-job, say. It serves ``GuardedCall``, ``tagsJob``,
``stormJob`` (which counts its dispatch, takes ``ms``, and returns a nonce of its own) and
``crashableJob`` (which counts its dispatch and never returns) and ``fencedJob``
(:func:`tests.pyactivities.make_fenced_job`), prints READY once it polls, and
stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin, fire_once

from .conftest import REPO
from .pyactivities import counter_key, make_fenced_job
from .pyworkflows import GuardedCall


async def start_py_worker(
    env: Any, redis_url: str, prefix: str, queue: str, seed: str | None = None, lease_ms: int | None = None
) -> asyncio.subprocess.Process:
    """This module's worker in a process of its own (with ``PYTHONHASHSEED=seed``), once it polls."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.py_worker",
        env.client.service_client.config.target_host,
        redis_url,
        prefix,
        queue,
        *([str(lease_ms)] if lease_ms is not None else []),
        cwd=str(REPO / "python"),
        env={**os.environ, "PYTHONPATH": str(REPO / "python"), **({"PYTHONHASHSEED": seed} if seed is not None else {})},
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    async with asyncio.timeout(60):
        while (line := await process.stdout.readline()) != b"READY\n":
            assert line != b"", "the worker process exited before READY"
    return process


async def main(target: str, redis_url: str, prefix: str, queue: str, lease_ms: str | None = None) -> None:
    redis: Redis = Redis.from_url(redis_url)

    @fire_once()
    @activity.defn(name="tagsJob")
    async def tags_job(counter_id: str, tags: set[str]) -> list[str]:
        await redis.incr(counter_key(prefix, counter_id))  # a counter the guard does not own
        return sorted(tags)

    @fire_once()
    @activity.defn(name="stormJob")
    async def storm_job(counter_id: str, ms: int) -> dict[str, str]:
        await redis.incr(counter_key(prefix, counter_id))
        await asyncio.sleep(ms / 1000)
        return {"counterId": counter_id, "nonce": uuid.uuid4().hex}

    @fire_once()
    @activity.defn(name="crashableJob")
    async def crashable_job(counter_id: str) -> dict[str, str]:
        await redis.incr(counter_key(prefix, counter_id))
        await asyncio.sleep(600)  # until the test kills this process
        return {"by": "the killed worker"}

    client = await Client.connect(target)
    lease = int(lease_ms) if lease_ms else None
    plugin = FireOncePlugin(redis, key_prefix=prefix, lease_ms=lease, store_timeout_ms=2_000 if lease else None)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Worker(client, task_queue=queue, workflows=[GuardedCall], activities=[tags_job, storm_job, crashable_job, make_fenced_job(redis, prefix, os.getpid())], plugins=[plugin]):
        print("READY", flush=True)
        await stop.wait()
    await redis.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
