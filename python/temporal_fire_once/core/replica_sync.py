"""Wait for the replicas to acknowledge the guard's writes (``src/core/replica-sync.ts``): the write
scripts run with ``WAIT <replicas> <timeout>`` pipelined behind them, so a write the replicas keep
up with costs no extra round trip. Without replicas to wait for, the script runs alone.

``WAIT`` counts only the writes of the connection that sends it. ioredis has one connection per
node, so the TypeScript guard can send a bare ``WAIT`` after its acquire; ``redis.asyncio`` hands
out pooled connections, and a ``WAIT`` on another one than the acquire's would count that
connection's old writes (none: every replica "acknowledges" at once). So here each ``WAIT`` goes in
one pipeline with a write of its own: the script's, or after an acquire that took the lock, a
compare-and-expire re-arming that lock (:meth:`ReplicaSync.confirm`). A Cluster pipeline sends
the ``WAIT`` to the master of the script's key, on the connection that carries the script. A known
limit: if that node redirects the script (``MOVED`` or ``ASK``, a slot in migration), redis-py
re-sends the script alone to the other node, and the ``WAIT`` answered where it was sent counts
none of it, so such a write passes as acknowledged.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

from redis.asyncio import RedisCluster
from redis.exceptions import NoScriptError

from .eviction import primaries
from .options import ReplicaSyncSetting
from .scripts import EXTEND, LuaScript, RedisClient, ScriptArg

RECOUNT_EVERY_S = 60.0
"""How often ``'auto'`` counts the replicas again."""
_ONLINE_REPLICA = re.compile(r"slave\d+")


@dataclass(frozen=True)
class Written:
    """A script's reply, and how many replicas acknowledged it when the guard waited for them."""

    reply: Any
    wanted: int
    """Replicas the write had to reach; 0 when the guard did not wait."""
    acked: int
    """Replicas that acknowledged it within the timeout (``WAIT``'s reply)."""
    wait_error: Exception | None = None
    """Why ``WAIT`` failed after the script ran (none acknowledged then), e.g. an ACL without it."""


class ReplicaSync:
    def __init__(self, redis: RedisClient, setting: ReplicaSyncSetting) -> None:
        self.redis = redis
        self.setting = setting
        self._known: int | None = None  # the last count, once known
        self._counting: asyncio.Future[int] | None = None
        self._counted_at = 0.0

    async def write(self, script: LuaScript, keys: Sequence[str], args: Sequence[ScriptArg]) -> Written:
        """Run ``script``, then ``WAIT`` on its connection. The script's reply stands whatever
        ``WAIT`` answers (a commit wrote, a release deleted, waiters were taken); a script error
        is raised."""
        wanted = await self._wanted()
        if wanted == 0:
            return Written(await script(self.redis, keys, args), 0, 0)
        reply, acked = await self._with_wait(script, keys, args, wanted)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(acked, Exception):
            return Written(reply, wanted, 0, acked)
        return Written(reply, wanted, int(acked))

    async def confirm(self, lock_key: str, waiters_key: str, token: str, lock_ttl_ms: int, waiters_ttl_ms: int) -> Written | None:
        """After an acquire took ``lock_key``: re-arm it with the same TTL (compare-and-expire, the
        renewal's script) and ``WAIT`` behind that, so the replicas that acknowledge have the lock.
        ``None`` without replicas to wait for; a ``WAIT`` error is raised, as the lock must then be
        undone. A lock found gone already counts as acknowledged by none."""
        wanted = await self._wanted()
        if wanted == 0:
            return None
        reply, acked = await self._with_wait(EXTEND, [lock_key, waiters_key], [token, lock_ttl_ms, waiters_ttl_ms], wanted)
        for err in (reply, acked):
            if isinstance(err, Exception):
                raise err
        return Written(reply, wanted, int(acked) if reply == 1 else 0)

    async def _with_wait(self, script: LuaScript, keys: Sequence[str], args: Sequence[ScriptArg], wanted: int) -> list[Any]:
        """``[script reply, WAIT reply]`` from one pipeline, errors in place. A node without the
        script in its cache gets it by ``EVAL``, once: one more round trip, as ``LuaScript`` takes."""
        for by_source in (False, True):
            async with self.redis.pipeline(transaction=False) as pipe:
                if by_source:
                    pipe.eval(script.lua.decode("utf-8"), script.number_of_keys, *keys, *args)
                else:
                    pipe.evalsha(script.sha, script.number_of_keys, *keys, *args)
                if isinstance(self.redis, RedisCluster):
                    pipe.execute_command("WAIT", wanted, self.setting.timeout_ms, target_nodes=self.redis.get_node_from_key(keys[0]))
                else:
                    pipe.execute_command("WAIT", wanted, self.setting.timeout_ms)
                replies: list[Any] = await pipe.execute(raise_on_error=False)
            if not isinstance(replies[0], NoScriptError):
                break
        return replies

    async def _wanted(self) -> int:
        """How many replicas a write must reach now. ``'auto'`` counts them at the first write and
        each minute after; a failed count (INFO denied, a node away) keeps the last one, none at first."""
        replicas = self.setting.replicas
        if replicas != "auto":
            return replicas
        if self._counting is None or time.monotonic() - self._counted_at > RECOUNT_EVERY_S:
            self._counted_at = time.monotonic()
            self._counting = asyncio.ensure_future(self._count())
        if self._known is not None:
            return self._known
        # Shielded: a caller that times out must not cancel the count other callers wait for.
        return await asyncio.shield(self._counting)

    async def _count(self) -> int:
        try:
            self._known = await count_replicas(self.redis)
        except Exception:
            pass
        return self._known or 0


async def count_replicas(redis: RedisClient) -> int:
    """The replicas streaming from the primary (``state=online`` in ``INFO replication``), or the
    fewest any Cluster master has. A replica still in its first sync cannot acknowledge anything yet."""

    async def online(target: dict[str, Any]) -> int:
        info = await redis.info("replication", **target)
        return sum(1 for name, value in info.items() if _ONLINE_REPLICA.fullmatch(name) and isinstance(value, dict) and value.get("state") == "online")

    return min(await asyncio.gather(*(online(target) for _, target in await primaries(redis))))
