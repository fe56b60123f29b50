"""``WakeHub`` on a real Redis: its subscription connection outlives no need of it. A hub nobody
closed (a hand-wired worker that forgot ``close``) must not reconnect and resubscribe once its
waiters have left, whether its client was closed or Redis went away."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from redis.asyncio import Redis

from temporal_fire_once.core import WakeHub

from .conftest import redis_server
from .test_renewal import Swallowing

_READS = 3.0  # three of the reader's 1 s reads: a reader that reconnects has done so by then


async def _connections(probe: Redis, name: str) -> list[str]:
    """The commands of the server's connections named ``name`` (a subscriber's is ``subscribe``)."""
    return [str(c["cmd"]) for c in await probe.client_list() if c.get("name") == name]


async def test_a_hub_left_by_its_waiters_does_not_reconnect_once_its_client_is_closed(redis_url: str) -> None:
    name = f"wake-{uuid.uuid4().hex[:8]}"
    probe: Redis = Redis.from_url(redis_url)
    redis: Redis = Redis.from_url(redis_url, client_name=name)
    hub = WakeHub(redis)
    event = await hub.join("fire-once-test:wake")
    assert await _connections(probe, name) != []  # the subscription connection is up
    await hub.leave("fire-once-test:wake", event)
    await redis.aclose()
    await asyncio.sleep(_READS)
    # It reconnected at its next read and subscribed again, for a caller that had closed the client.
    assert await _connections(probe, name) == []
    await hub.close()
    await probe.aclose()


async def test_a_hub_left_by_its_waiters_stops_retrying_once_redis_is_gone(caplog: pytest.LogCaptureFixture) -> None:
    with redis_server() as url:
        redis: Redis = Redis.from_url(url)
        hub = WakeHub(redis)
        event = await hub.join("fire-once-test:wake")
        await hub.leave("fire-once-test:wake", event)
    caplog.set_level(logging.DEBUG, logger="temporal_fire_once")
    await asyncio.sleep(_READS)
    failures = [r for r in caplog.records if "wake subscription read failed" in r.getMessage()]
    assert failures == []  # it retried every 0.5 s, for ever, with no waiter left to wake
    await hub.close()
    await redis.aclose()


async def test_a_hub_closes_even_when_its_read_swallows_the_cancellation(redis_url: str) -> None:
    """A cancellation swallowed under the reader's read (as under a lease renewal, defect 175) kept
    the reader reading while a waiter was joined, and ``close`` waiting for it."""
    redis: Redis = Redis.from_url(redis_url)
    hub = WakeHub(redis)
    await hub.join("fire-once-test:wake-swallow")
    read = Swallowing(ConnectionError("the read failed"))
    hub._pubsub.get_message = read
    await read.begun()
    try:
        await asyncio.wait_for(hub.close(), 5)
    finally:
        await redis.aclose()
