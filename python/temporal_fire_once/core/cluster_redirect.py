"""Sending a call again while its slot migrates (``src/core/cluster-redirect.ts``).

Mid-migration a Cluster master answers a script whose keys are split between it and the master
they move to, or missing where it was asked, ``TRYAGAIN``, and one whose keys have all left
``ASK``; redis-py sends one command at most 16 times through such replies, then raises
``ClusterError("TTL exhausted.")``. A slot whose keys take longer to move would fail a commit whose
job has run, and the job would dispatch again once its lock is gone. So the guard's writes are sent
again, after ``TRY_AGAIN_DELAY_S``, while the call can still end within ``store_timeout_ms``.

redis-py also fails to follow an ``ASK`` that names a node it has no connection to (a master just
added to the cluster, its first slot migrating to it): it raises a bare ``AttributeError`` from its
routing. :func:`unfollowed` names that failure, and it is sent again the same way: once the slot has
moved, the ``MOVED`` there teaches the client the new master.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, TypeVar

from redis.asyncio import RedisCluster
from redis.exceptions import ClusterError, RedisClusterException

T = TypeVar("T")

TRY_AGAIN_DELAY_S = 0.1
"""How long a write answered ``TRYAGAIN`` waits before it is sent again (ioredis's ``retryDelayOnTryAgain``)."""
TRY_AGAIN_TRIES = 16
"""How many ``TRYAGAIN`` replies a write is sent again after (redis-py's and ioredis's bound on a lone command)."""


class UnfollowedRedirect(RedisClusterException):
    """The Cluster client failed inside its own routing, as redis-py does on an ``ASK`` that names a
    node it has no connection to: the command was not sent there, and did not run."""


def unfollowed(err: AttributeError) -> UnfollowedRedirect:
    return UnfollowedRedirect(
        f"the Redis Cluster client could not route the call ({err}), as on an ASK naming a node it has no connection to yet (a slot migrating to a new master)"
    )


def gave_up_on_migration(err: BaseException) -> bool:
    """The client gave a call up mid-migration: it did not run, and sending it again is safe."""
    return isinstance(err, UnfollowedRedirect) or (isinstance(err, ClusterError) and str(err) == "TTL exhausted.")


async def through_migration(redis: Any, bound_ms: int, send: Callable[[], Awaitable[T]]) -> T:
    """Await ``send()`` and, on a Cluster, send it again after :data:`TRY_AGAIN_DELAY_S` while the
    client gives it up mid-migration and another try can start within ``bound_ms`` of the first."""
    if not isinstance(redis, RedisCluster):
        return await send()
    started = time.monotonic()
    while True:
        try:
            return await send()
        except (ClusterError, UnfollowedRedirect) as err:
            if not gave_up_on_migration(err) or time.monotonic() - started + TRY_AGAIN_DELAY_S >= bound_ms / 1000:
                raise
        await asyncio.sleep(TRY_AGAIN_DELAY_S)
