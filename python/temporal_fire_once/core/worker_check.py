"""The plugin's start checks, for a worker wired by hand (``src/core/deployment/worker-check.ts``):
a bare :class:`FireOnceGuard`, or a hand-wired ``FireOnceInterceptor``, which nothing checks
otherwise. ``FireOncePlugin`` runs the same function before a worker takes a task."""

from __future__ import annotations

import asyncio

from redis.asyncio import RedisCluster
from redis.exceptions import RedisClusterException, RedisError, ResponseError

from .errors import FireOnceConfigError, FireOnceStoreUnavailable
from .eviction import EvictionPolicy, check_eviction_policy, check_start_arguments, not_answered, primaries
from .scripts import RedisClient
from .sentinel import refuse_sentinel_client
from .store_calls import replied


async def check_worker_redis(redis: RedisClient, *, allow_evicting_redis: bool = False, timeout_ms: int = 5_000) -> list[EvictionPolicy]:
    """Raise ``FireOnceConfigError`` when the client names a database Redis refuses, when it is a
    client of a Sentinel's own address (naming the masters; use ``Sentinel(...).master_for(name)``),
    or when Redis can evict the guard's keys (see :func:`check_eviction_policy`;
    ``allow_evicting_redis`` lets this one through, logged at WARNING). ``FireOnceStoreUnavailable``
    when Redis does not answer within ``timeout_ms``. Returns the eviction policies read. An
    argument it cannot use (not a ``redis.asyncio`` client, a flag that is no ``bool``, a timeout
    that is no whole number from 1 to 60 000 ms) is ``FireOnceConfigError`` naming it, before
    Redis is read, as the plugin checks the same options.

    Example::

        redis = Redis.from_url(url)
        await check_worker_redis(redis)  # before the worker takes a task
        guard = FireOnceGuard(redis)
    """
    check_start_arguments(redis, allow_evicting_redis, timeout_ms)
    try:
        # The database first: redis-py selects it on each new connection, and a refusal fails every
        # command after, which the other checks would blame on what they read.
        await check_selected_database(redis, timeout_ms)
        # Then a sentinel: it has no eviction policy to read, and that check would blame that instead.
        await refuse_sentinel_client(redis, timeout_ms)
        return await check_eviction_policy(redis, allow_evicting_redis=allow_evicting_redis, timeout_ms=timeout_ms)
    except RedisClusterException as err:
        # redis-py's own exception (no RedisError), raised as the client first reads the slots; it says
        # the same of any error CLUSTER SLOTS answers, a NOPERM included.
        if not isinstance(redis, RedisCluster) or _NOT_A_CLUSTER not in str(err):
            raise
        nodes = ", ".join(redis.nodes_manager.startup_nodes)
        raise FireOnceConfigError(
            f"the client is a RedisCluster, but Redis at {nodes} refuses CLUSTER SLOTS: it is not in cluster mode (give the plugin a "
            "redis.asyncio.Redis), or the user may not run it (grant +cluster|slots, as docs/reliability.md's Cluster line does)"
        ) from err


# What redis-py's RedisCluster says when the node it asks for the slots is no Cluster node.
_NOT_A_CLUSTER = "Cluster mode is not enabled"


async def check_selected_database(redis: RedisClient, timeout_ms: int) -> None:
    """Refuse a client that names a database (``redis://host:port/3``, ``db=3``) Redis refuses: one
    the server does not have, or an ACL user without ``+select``. Nothing is selected here: a
    ``TIME`` opens a connection, which sends the ``SELECT`` itself. ``TIME``, not ``PING``: the
    guard's scripts run it, so every worker user may (the documented one has no ``+ping``, and a
    refused ``PING`` would be blamed on the database). A Cluster has database 0 only."""
    if isinstance(redis, RedisCluster):
        return
    db = redis.connection_pool.connection_kwargs.get("db") or 0
    if not db:
        return
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            await redis.time()
    except TimeoutError as err:
        raise not_answered(redis, timeout_ms, f"database {db} was selected") from err
    except ResponseError as err:
        (address, _), *_ = await primaries(redis)
        raise FireOnceConfigError(
            f"the Redis client names database {db}, which Redis at {address} refused ({replied(err)}): every command would fail. "
            "Name a database the server has (0 to its `databases` setting less one), or grant the user +select"
        ) from err
    except (RedisError, OSError) as err:
        raise FireOnceStoreUnavailable(f"could not select database {db}: {replied(err)}") from err
