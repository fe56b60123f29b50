"""Wait for the replicas to acknowledge the guard's writes (``src/core/replica-sync.ts``): the write
scripts run with ``WAIT <replicas> <timeout>`` pipelined behind them, so a write the replicas keep
up with costs no extra round trip. Without replicas to wait for, the script runs alone.

``WAIT`` counts only the writes of the connection that sends it. ioredis has one connection per
node, so the TypeScript guard can send a bare ``WAIT`` after its acquire; ``redis.asyncio`` hands
out pooled connections, and a ``WAIT`` on another one than the acquire's would count that
connection's old writes (none: every replica "acknowledges" at once). So here each ``WAIT`` goes in
one pipeline with a write of its own: the script's, or after an acquire that took the lock, a
compare-and-expire re-arming that lock (:meth:`ReplicaSync.confirm`).

On a Cluster the pair is sent to the master of the script's key, both pinned to that node, so they
share one connection, and redis-py is told not to follow redirects: it would re-send the script
alone to another node, and the ``WAIT`` answered where it was sent would count none of it. A
``MOVED`` or ``ASK`` reply means the script did not run; the pair is sent again, together, where
the reply points (``ASKING`` first for an ``ASK``), at most ``REDIRECTS`` times, and a write still
redirected then fails, retryably, as an unanswered one does. An ``ASK`` naming a node the client
has no connection to yet (a master new to the cluster) is taken as a ``TRYAGAIN``, below, with the
pair sent to the slot's master again. A ``TRYAGAIN`` (mid-migration, a script
whose keys are split between the two nodes, or missing where it was asked: a commit's artifact key,
say) comes back in place too, where redis-py would retry a lone command: the pair is sent again to
the same node after ``TRY_AGAIN_DELAY_S``, at most ``TRY_AGAIN_TRIES`` times and while the try can
end within ``store_timeout_ms``, so that a job that ran keeps its result once the slot has moved.
A limit left: redis-py retries a
Cluster pipeline it could not send (a connection error, a failover) and routes the retried commands
anew: the script by its key, and the ``WAIT``, which has none, to the default node; when that is
another master, its reply counts none of the script, and the write can pass as acknowledged.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterPipeline
from redis.exceptions import AskError, MovedError, NoScriptError, ResponseError, TryAgainError

from .cluster_redirect import TRY_AGAIN_DELAY_S, TRY_AGAIN_TRIES, through_migration
from .errors import FireOnceStoreUnavailable
from .eviction import primaries
from .options import ReplicaSyncSetting
from .scripts import EXTEND, LuaScript, RedisClient, ScriptArg
from .store_calls import replied

RECOUNT_EVERY_S = 60.0
"""How often ``'auto'`` counts the replicas again."""
REDIRECTS = 2
"""How many ``MOVED`` or ``ASK`` replies a write follows on a Cluster, its ``WAIT`` with it."""
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
    def __init__(self, redis: RedisClient, setting: ReplicaSyncSetting, store_timeout_ms: int) -> None:
        self.redis = redis
        self.setting = setting
        self._store_timeout_ms = store_timeout_ms
        self._store_timeout_s = store_timeout_ms / 1000  # bounds each write and its WAIT together
        self._known: ReplicaCounts | None = None  # the last count, once known
        self._counting: asyncio.Future[ReplicaCounts] | None = None
        self._counted_at = 0.0

    async def write(self, script: LuaScript, keys: Sequence[str], args: Sequence[ScriptArg]) -> Written:
        """Run ``script``, then ``WAIT`` on its connection. The script's reply stands whatever
        ``WAIT`` answers (a commit wrote, a release deleted, waiters were taken); a script error
        is raised."""
        wanted = await self._wanted(keys[0])
        if wanted == 0:
            return Written(await through_migration(self.redis, self._store_timeout_ms, lambda: script(self.redis, keys, args)), 0, 0)
        (reply, acked), wanted = await self._with_wait(script, keys, args, wanted)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(acked, Exception):
            return Written(reply, wanted, 0, acked)
        return Written(reply, wanted, int(acked))

    async def confirm(self, lock_key: str, waiters_key: str, token: str, lock_ttl_ms: int, waiters_ttl_ms: int) -> Written | None:
        """After an acquire took ``lock_key``: re-arm it with the same TTL (compare-and-expire, the
        renewal's script) and ``WAIT`` behind that, so the replicas that acknowledge have the lock.
        ``None`` without replicas to wait for; a ``WAIT`` error is raised, as the lock must then be
        undone. A lock found gone already comes back with reply 0, acknowledged by none."""
        wanted = await self._wanted(lock_key)
        if wanted == 0:
            return None
        (reply, acked), wanted = await self._with_wait(EXTEND, [lock_key, waiters_key], [token, lock_ttl_ms, waiters_ttl_ms], wanted)
        for err in (reply, acked):
            if isinstance(err, Exception):
                raise err
        return Written(reply, wanted, int(acked) if reply == 1 else 0)

    async def _with_wait(self, script: LuaScript, keys: Sequence[str], args: Sequence[ScriptArg], wanted: int) -> tuple[list[Any], int]:
        """``[script reply, WAIT reply]`` from one pipeline on one connection, errors in place, and
        the replicas that ``WAIT`` asked for. On a Cluster, a redirect sends the pair again where it
        points (with ``'auto'``, asking for that master's replicas), a ``TRYAGAIN`` to the same node
        after a delay; one still redirected, or answered ``TRYAGAIN``, is an error."""
        if not isinstance(self.redis, RedisCluster):
            return await self._pair(script, keys, args, wanted), wanted
        started = time.monotonic()
        node, asking, redirects, tries = self.redis.get_node_from_key(keys[0]), False, 0, 0
        detour: Exception = ResponseError(f"no node serves the slot of {keys[0]}")
        while node is not None:
            if self.setting.replicas == "auto" and self._known is not None:
                wanted = self._count_at(self._known, node.name)
            replies = await self._pair(script, keys, args, wanted, node, asking)
            detour = replies[0]
            known = self.redis.get_node(detour.host, detour.port) if isinstance(detour, AskError) else None  # MovedError is one too
            if isinstance(detour, MovedError) or known is not None:
                redirects += 1
                if redirects > REDIRECTS:
                    break
                if isinstance(detour, MovedError):
                    # A plain command follows the MOVED, and the client updates its slot map as it does.
                    await self.redis.pttl(keys[0])
                    node, asking = self.redis.get_node_from_key(keys[0]), False
                else:
                    node, asking = known, True
            elif isinstance(detour, (TryAgainError, AskError)):
                # TRYAGAIN, or an ASK naming a node the client has no connection to yet (a master new
                # to the cluster): sent again after a delay, to the slot's master by the client's map
                # after an ASK; once the slot has moved, the MOVED there teaches the client the node.
                tries += 1
                if tries > TRY_AGAIN_TRIES or time.monotonic() - started + TRY_AGAIN_DELAY_S + self.setting.timeout_ms / 1000 >= self._store_timeout_s:
                    break
                if isinstance(detour, AskError):
                    node, asking, redirects = self.redis.get_node_from_key(keys[0]), False, 0
                await asyncio.sleep(TRY_AGAIN_DELAY_S)
            else:
                return replies, wanted
        moving = ResponseError(f"the slot of {keys[0]} is moving ({replied(detour)}): the write did not run where its WAIT could count it")
        return [moving, moving], wanted

    async def _pair(
        self, script: LuaScript, keys: Sequence[str], args: Sequence[ScriptArg], wanted: int, node: Any = None, asking: bool = False
    ) -> list[Any]:
        """The script and its ``WAIT`` in one pipeline: on a Cluster, both pinned to ``node``
        (``ASKING`` first when asked), redirects not followed. A node without the script in its
        cache gets it by ``EVAL``, once: one more round trip, as ``LuaScript`` takes."""
        pinned = {} if node is None else {"target_nodes": node}
        for by_source in (False, True):
            async with self.redis.pipeline(transaction=False) as pipe:
                if asking:
                    pipe.execute_command("ASKING", **pinned)
                if by_source:
                    pipe.execute_command("EVAL", script.lua.decode("utf-8"), script.number_of_keys, *keys, *args, **pinned)
                else:
                    pipe.execute_command("EVALSHA", script.sha, script.number_of_keys, *keys, *args, **pinned)
                pipe.execute_command("WAIT", wanted, self.setting.timeout_ms, **pinned)
                if isinstance(pipe, ClusterPipeline):
                    replies: list[Any] = await pipe.execute(raise_on_error=False, allow_redirections=False)
                else:
                    replies = await pipe.execute(raise_on_error=False)
            replies = replies[1:] if asking else replies
            if not isinstance(replies[0], NoScriptError):
                break
        return replies

    async def _wanted(self, key: str) -> int:
        """How many replicas a write of ``key`` must reach now. ``'auto'`` counts them at the first
        write and each minute after, on a Cluster each master on its own, so one without a replica (a
        failover's new master, until the old one comes back) leaves the others waiting for theirs;
        a failed recount keeps the last count. A first count that fails (INFO
        denied, a node away) fails the write closed, and the next write counts again: writing with
        no ``WAIT`` could leave a lock or a result that replicas never got, for a failover to lose."""
        replicas = self.setting.replicas
        if replicas != "auto":
            return replicas
        # A count under way: a recount due meanwhile waits for it rather than ask every master again.
        if self._counting is None or (self._counting.done() and time.monotonic() - self._counted_at > RECOUNT_EVERY_S):
            self._counted_at = time.monotonic()
            self._counting = asyncio.ensure_future(self._count())
        # Shielded: a caller that times out must not cancel the count other callers wait for.
        return self._count_for(self._known if self._known is not None else await asyncio.shield(self._counting), key)

    def _count_for(self, counts: ReplicaCounts, key: str) -> int:
        """The replicas of the master that serves ``key``, by the client's slot map. A master
        counted under no name the map gives (the map changed since): the most any master has, so
        that a ``WAIT`` asks too much rather than too little (it then fails closed), and a recount
        at once."""
        if not isinstance(self.redis, RedisCluster):
            return counts.most
        node = self.redis.get_node_from_key(key)
        return self._count_at(counts, None if node is None else node.name)

    def _count_at(self, counts: ReplicaCounts, name: str | None) -> int:
        """The replicas of the master ``name`` (``host:port``); one not counted: the most any has,
        and a recount."""
        count = None if name is None else counts.by_master.get(name)
        if count is not None:
            return count
        self._counted_at = 0.0
        return counts.most

    async def _count(self) -> ReplicaCounts:
        tries = 0
        while True:
            try:
                self._known = await count_replicas(self.redis)
                return self._known
            except Exception as err:
                if self._known is not None:
                    return self._known
                tries += 1
                # A refusal (NOPERM) is for good; anything else may pass, as redis-py's per-node
                # connection limit (MaxConnectionsError) does once a burst of writes has its replies.
                if isinstance(err, ResponseError) or tries == COUNT_TRIES:
                    self._counting = None
                    raise FireOnceStoreUnavailable(
                        f"replica_sync 'auto' could not count the primary's replicas with INFO replication ({type(err).__name__}: {replied(err)}), "
                        "so nothing was written that it could not wait for: grant the Redis user +info, or set replica_sync to "
                        "{'replicas': n} or False"
                    ) from err
            await asyncio.sleep(COUNT_RETRY_DELAY_S)


COUNT_TRIES = 3
"""How many times a first replica count is tried before the write fails closed."""
COUNT_RETRY_DELAY_S = 0.05


@dataclass(frozen=True)
class ReplicaCounts:
    """The online replicas of each master, by its ``host:port`` as the client's slot map names it,
    and the most any has."""

    by_master: dict[str, int]
    most: int


async def count_replicas(redis: RedisClient) -> ReplicaCounts:
    """The replicas streaming from the primary, or from each Cluster master (``state=online`` in
    ``INFO replication``). A replica still in its first sync cannot acknowledge anything yet."""

    async def online(target: dict[str, Any]) -> int:
        info = await redis.info("replication", **target)
        return sum(1 for name, value in info.items() if _ONLINE_REPLICA.fullmatch(name) and isinstance(value, dict) and value.get("state") == "online")

    nodes = await primaries(redis)
    counts = await asyncio.gather(*(online(target) for _, target in nodes))
    return ReplicaCounts(dict(zip((address for address, _ in nodes), counts)), max(counts))
