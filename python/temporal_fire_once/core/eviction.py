"""Refuse a Redis that can evict the guard's keys (``src/core/deployment/eviction.ts``). Every key
the guard writes has a TTL, so the ``volatile-*`` policies evict them as well as the ``allkeys-*``
ones; an evicted lock or artifact lets the next invocation dispatch the same job again."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.asyncio.sentinel import SentinelConnectionPool
from redis.exceptions import RedisError, ResponseError

from .errors import FireOnceConfigError, FireOnceStoreUnavailable
from .options import check_redis_client, positive_int
from .scripts import RedisClient
from .store_calls import replied

SAFE_EVICTION_POLICY = "noeviction"
"""The one ``maxmemory-policy`` under which Redis never evicts the guard's keys."""

_logger = logging.getLogger("temporal_fire_once")


@dataclass(frozen=True)
class EvictionPolicy:
    """The eviction policy of one primary, as read (or not) at start."""

    address: str
    """The node, ``host:port``."""
    policy: str | None
    """``maxmemory-policy``, or ``None`` when neither INFO nor CONFIG GET could read it."""
    source: str
    """Where it was read, or why it could not be."""

    @property
    def safe(self) -> bool:
        """True only for ``noeviction``: a policy that could not be read is not safe."""
        return self.policy == SAFE_EVICTION_POLICY


async def read_eviction_policies(redis: RedisClient, timeout_ms: int = 5_000) -> list[EvictionPolicy]:
    """``maxmemory-policy`` of the primary, or of every master of a Cluster: ``INFO memory`` first,
    then ``CONFIG GET``. INFO comes first because a least-privilege user may run it while CONFIG is
    admin-only, denied or renamed on most managed services. A reply error (NOPERM, an unknown or
    renamed command) moves on to the next source; ``FireOnceStoreUnavailable`` when a node cannot
    be reached within ``timeout_ms``."""
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            return list(await asyncio.gather(*(_read_policy(redis, address, target) for address, target in await primaries(redis))))
    except TimeoutError as err:
        raise not_answered(redis, timeout_ms, "its eviction policy was read") from err
    except (RedisError, OSError) as err:
        reply = replied(err)
        if reply.startswith(("WRONGPASS", "NOAUTH", "ERR invalid password")):  # the last: Redis 5
            # They refuse every command: name them, not the setting left unread.
            raise FireOnceStoreUnavailable(f"Redis refused this client's credentials ({reply}): check the password or ACL user the client connects with") from err
        raise FireOnceStoreUnavailable(f"could not read Redis's eviction policy: {reply}") from err


def check_start_arguments(redis: object, allow_evicting_redis: object, timeout_ms: object) -> None:
    """``FireOnceConfigError`` naming the first argument of a start check that it cannot use, before
    Redis is read, as the plugin checks the same options: a client that is no ``redis.asyncio``
    one, a flag that is no ``bool`` (``"false"`` would be truthy, and let an evicting Redis
    through), a timeout that is no whole number from 1 to 60 000 ms (0 would blame Redis for not
    answering)."""
    check_redis_client(redis)
    if not isinstance(allow_evicting_redis, bool):
        raise FireOnceConfigError(f"allow_evicting_redis must be a boolean (got {allow_evicting_redis!r})")
    positive_int("timeout_ms", timeout_ms, 60_000)  # the plugin's store_timeout_ms bounds


async def check_eviction_policy(redis: RedisClient, *, allow_evicting_redis: bool = False, timeout_ms: int = 5_000) -> list[EvictionPolicy]:
    """Raise ``FireOnceConfigError`` naming each primary whose ``maxmemory-policy`` is not
    ``noeviction``, or could not be read, and what to set. With ``allow_evicting_redis``, log the
    same once at WARNING instead. ``FireOncePlugin`` runs this when a worker starts; call it
    yourself before using :class:`FireOnceGuard` directly. An argument it cannot use is
    ``FireOnceConfigError`` naming it, before Redis is read (:func:`check_start_arguments`)."""
    check_start_arguments(redis, allow_evicting_redis, timeout_ms)
    policies = await read_eviction_policies(redis, timeout_ms)
    unsafe = [p for p in policies if not p.safe]
    if not unsafe:
        return policies
    problem = describe_eviction_risk(unsafe)
    if not allow_evicting_redis:
        raise FireOnceConfigError(f"{problem}. {eviction_fix('pass allow_evicting_redis=True')}")
    _logger.warning("fire-once: %s; starting anyway because allow_evicting_redis is True", problem)
    return policies


def eviction_fix(opt_out: str) -> str:
    """What to set, and how to opt out (``opt_out``, e.g. "pass allow_evicting_redis=True")."""
    return (
        f"Set `maxmemory-policy {SAFE_EVICTION_POLICY}` on every primary (redis.conf, or CONFIG SET maxmemory-policy "
        f"{SAFE_EVICTION_POLICY}; a managed service calls it its eviction policy), or {opt_out} to accept the risk"
    )


def describe_eviction_risk(unsafe: list[EvictionPolicy]) -> str:
    """One sentence naming every primary that can evict the guard's keys (or whose policy is unknown)."""
    parts = [
        f"the maxmemory-policy of Redis at {p.address} could not be read ({p.source}; "
        f"{'grant the user +info' if 'NOPERM' in p.source else 'check it by hand'})"
        if p.policy is None
        else f"Redis at {p.address} has maxmemory-policy {p.policy}"
        for p in unsafe
    ]
    evicts = any(p.policy is not None for p in unsafe)
    return (
        f"{', and '.join(parts)}: {'under memory pressure Redis evicts' if evicts else 'Redis may evict'} live locks and "
        "artifacts (every one has a TTL), and the next invocation then dispatches the same job again"
    )


def not_answered(redis: RedisClient, timeout_ms: int, while_: str) -> FireOnceStoreUnavailable:
    """``FireOnceStoreUnavailable`` "Redis at <address> did not answer within … ms while …", for a
    start check that timed out: it names the node from the client's own settings, asking nothing
    (``src/core/deployment/timeout.ts``)."""
    where = "The Redis Cluster" if isinstance(redis, RedisCluster) else f"Redis at {_node(redis)}"
    return FireOnceStoreUnavailable(f"{where} did not answer within {timeout_ms} ms while {while_}")


async def primaries(redis: RedisClient) -> list[tuple[str, dict[str, Any]]]:
    """Each node whose settings decide what happens to the guard's keys, with the arguments that
    send a command to it alone: the one node of a ``Redis``, or every master of a Cluster. The
    replica count of ``replica_sync`` reads the same nodes."""
    if isinstance(redis, RedisCluster):
        await redis.initialize()
        return [(node.name, {"target_nodes": node}) for node in redis.get_primaries()]
    return [(_node(redis), {})]


def _node(redis: Redis) -> str:
    """The one node of a client that is no Cluster's: its ``host:port`` (or socket path), or the
    Sentinel master it follows (``addressOf`` in ``src/core/deployment/nodes.ts``)."""
    pool = redis.connection_pool
    if isinstance(pool, SentinelConnectionPool):
        return f'the master "{pool.service_name}" of Sentinel'
    kwargs = pool.connection_kwargs
    return str(kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}")


async def _read_policy(redis: RedisClient, address: str, target: dict[str, Any]) -> EvictionPolicy:
    reasons: list[str] = []
    try:
        value = (await redis.info("memory", **target)).get("maxmemory_policy")
        if value is not None:
            return EvictionPolicy(address, str(value), "INFO")
        reasons.append("INFO memory has no maxmemory_policy field")
    except ResponseError as err:
        reasons.append(f"INFO memory: {replied(err)}")
    try:
        value = (await redis.config_get("maxmemory-policy", **target)).get("maxmemory-policy")
        if value is not None:
            return EvictionPolicy(address, str(value), "CONFIG GET")
        reasons.append("CONFIG GET maxmemory-policy returned nothing")
    except ResponseError as err:
        reasons.append(f"CONFIG GET maxmemory-policy: {replied(err)}")
    return EvictionPolicy(address, None, "; ".join(reasons))
