"""A Python worker in a process of its own (``python -m tests.py_worker <temporal> <redis> <prefix>
<queue>``), for tests that need a second worker process: one with its own ``PYTHONHASHSEED``, say.
It serves ``GuardedCall`` and ``tagsJob``, prints READY once it polls, and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys

from redis.asyncio import Redis
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin, fire_once

from .pyactivities import counter_key
from .pyworkflows import GuardedCall


async def main(target: str, redis_url: str, prefix: str, queue: str) -> None:
    redis: Redis = Redis.from_url(redis_url)

    @fire_once()
    @activity.defn(name="tagsJob")
    async def tags_job(counter_id: str, tags: set[str]) -> list[str]:
        await redis.incr(counter_key(prefix, counter_id))  # a counter the guard does not own
        return sorted(tags)

    client = await Client.connect(target)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Worker(client, task_queue=queue, workflows=[GuardedCall], activities=[tags_job], plugins=[FireOncePlugin(redis, key_prefix=prefix)]):
        print("READY", flush=True)
        await stop.wait()
    await redis.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
