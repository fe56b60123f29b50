"""Refuse a client of a Redis Sentinel's own address (``src/core/deployment/sentinel.ts``). A
sentinel answers ``PING`` and ``INFO`` like a data node, but holds no keys and runs no scripts: a
worker given its address would find no eviction policy to read, and every guard call would fail.
Connect through the sentinels instead (``Sentinel(...).master_for(name)``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.sentinel import SentinelConnectionPool
from redis.exceptions import RedisError

from .errors import FireOnceConfigError, FireOnceStoreUnavailable
from .eviction import not_answered, primaries
from .scripts import RedisClient
from .store_calls import replied


@dataclass(frozen=True)
class MonitoredMaster:
    """A master group a sentinel monitors."""

    name: str
    address: str
    """``ip:port``, as the sentinel has it now."""


async def sentinel_masters(redis: Redis) -> list[MonitoredMaster] | None:
    """The masters the client's node monitors when that node is a sentinel (``redis_mode:sentinel``);
    ``None`` when it is a data node, or when ``INFO`` is refused (a sentinel has no ACL users that
    would refuse it)."""
    try:
        mode = (await redis.info("server")).get("redis_mode")
    except RedisError:
        return None
    if mode != "sentinel":
        return None
    try:
        reply: Any = await redis.sentinel_masters()
    except RedisError:
        return []
    # redis-py maps the reply by name (RESP2), or leaves a list of maps (RESP3).
    states = list(reply.values()) if isinstance(reply, dict) else list(reply)
    return [MonitoredMaster(_text(s.get("name")), f"{_text(s.get('ip'))}:{_text(s.get('port'))}") for s in states]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def describe_masters(masters: list[MonitoredMaster]) -> str:
    """``it monitors <name> at <ip>:<port>, …``, or that it monitors none."""
    return "it monitors no master" if not masters else "it monitors " + ", ".join(f"{m.name} at {m.address}" for m in masters)


async def refuse_sentinel_client(redis: RedisClient, timeout_ms: int) -> None:
    """Raise ``FireOnceConfigError`` when ``redis`` is a plain client of a sentinel's address,
    naming the masters it monitors; a Cluster or a client made by ``Sentinel.master_for`` is let
    through unasked. ``FireOnceStoreUnavailable`` when the node does not answer within ``timeout_ms``."""
    if isinstance(redis, RedisCluster) or isinstance(redis.connection_pool, SentinelConnectionPool):
        return
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            masters = await sentinel_masters(redis)
    except TimeoutError as err:
        raise not_answered(redis, timeout_ms, "the start checks asked whether it is a Sentinel") from err
    except OSError as err:
        raise FireOnceStoreUnavailable(f"could not read Redis's role: {replied(err)}") from err
    if masters is None:
        return
    (address, _), *_ = await primaries(redis)
    name = masters[0].name if masters else "mymaster"
    raise FireOnceConfigError(
        f"Redis at {address} is a Sentinel, which holds no keys and runs no scripts: give redis-py the sentinels and the master's "
        f"name (Sentinel([(host, port)]).master_for('{name}'), see docs/deployment.md), not a sentinel's address; {describe_masters(masters)}"
    )
