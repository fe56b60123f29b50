"""``FireOncePlugin`` at worker start, given a plain client of a Sentinel's own address instead of
the sentinels (``test/worker/redis-check.test.ts``): a real redis-sentinel, which answers ``PING``
and ``INFO`` but holds no keys and runs no scripts. The worker must refuse to start, saying so and
naming the masters it monitors, ``allow_evicting_redis`` or not."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlparse

import pytest
from redis.asyncio import Redis
from temporalio.worker import Worker

from temporal_fire_once import FireOnceConfigError, FireOncePlugin
from temporal_fire_once.core import Acquired, DispatchTarget, FireOnceGuard, GuardOptions

from .redis_sentinel import spawn_sentinel


@pytest.mark.parametrize("allow_evicting_redis", [False, True])
async def test_a_client_of_a_sentinels_address_is_refused_at_worker_start_naming_its_masters(redis_url: str, allow_evicting_redis: bool) -> None:
    master = urlparse(redis_url)
    assert master.hostname is not None and master.port is not None
    with spawn_sentinel(master.hostname, master.port) as url:
        redis: Redis = Redis.from_url(url)
        dispatches = 0

        async def run(_: Worker) -> None:  # what the worker would do once started: one guarded dispatch
            nonlocal dispatches
            if isinstance(await FireOnceGuard(redis, GuardOptions(key_prefix="sentinel-check")).acquire(DispatchTarget("s", "send", "send")), Acquired):
                dispatches += 1

        try:
            plugin = FireOncePlugin(redis, allow_evicting_redis=allow_evicting_redis)
            with pytest.raises(FireOnceConfigError) as caught:
                await plugin.run_worker(cast(Worker, None), run)
        finally:
            await redis.aclose()
    assert dispatches == 0
    port = urlparse(url).port
    assert caught.value.message == (
        f"Redis at 127.0.0.1:{port} is a Sentinel, which holds no keys and runs no scripts: give redis-py the sentinels and the "
        "master's name (Sentinel([(host, port)]).master_for('orders'), see docs/deployment.md), not a sentinel's address; "
        f"it monitors orders at {master.hostname}:{master.port}"
    )
