"""The fire-once guard on Redis alone, with no Temporal in it (``src/core/guard.ts``): the
artifact check, the lock, the commit on success and the compare-and-delete on failure, each one
round trip through the protocol's Lua scripts."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Awaitable, Callable, TypeVar

from cachetools import LRUCache
from redis.exceptions import ResponseError

from .acquire_reply import found_by_acquire, stored_result
from .cluster_redirect import through_migration
from .errors import FireOnceConfigError, FireOnceStoreUnavailable
from .keys import FireOnceKeys, encode_id
from .options import MAX_LOG_LEN, GuardOptions, check_redis_client, positive_int
from .outcomes import Acquired, AcquireOutcome, Committed, DispatchTarget, FastForward, Lease, Settled
from .protocol import claim_protocol
from .records import check_args_hash, format_artifact, lock_tail
from .replica_sync import ReplicaSync
from .scripts import ACQUIRE, COMMIT, COMMIT_REFUSED, EXTEND, INVALIDATE, LOG_APPEND, RELEASE, RedisClient
from .store_calls import background, error_context, store_call

WAITERS_GRACE_MS = 60_000
"""How long a parked waiter's registration outlives the lock (PROTOCOL.md section 7)."""

T = TypeVar("T")


class FireOnceGuard:
    """The guard. The caller owns the ``redis.asyncio`` client (``Redis`` or ``RedisCluster``,
    created with ``decode_responses=False``: any other is refused with ``FireOnceConfigError``);
    the guard never closes it.

    >>> import asyncio, redis.asyncio
    >>> guard = FireOnceGuard(redis.asyncio.Redis(), GuardOptions(key_prefix="doc"))
    >>> guard.keys.lock("session-42", "summarise")
    'doc:v3:{default/session-42}:l:summarise'
    """

    def __init__(self, redis: RedisClient, options: GuardOptions | None = None) -> None:
        check_redis_client(redis)
        if options is not None and not isinstance(options, GuardOptions):
            # A dict would be ignored when empty and fail untyped otherwise: name the mistake.
            raise FireOnceConfigError(f"options must be a GuardOptions, e.g. GuardOptions(lock_ttl_ms=60_000) (got {type(options).__name__})")
        self.redis = redis
        self.options = options or GuardOptions()
        self.keys = FireOnceKeys(self.options.key_prefix, self.options.namespace)
        self._replicas = ReplicaSync(redis, self.options.replica_sync_setting, self.options.store_timeout_ms)
        # Artifact keys seen to exist, most recent first (known_artifacts); keys only, never results.
        self._known: LRUCache[str, bool] | None = LRUCache(self.options.known_artifacts) if self.options.known_artifacts > 0 else None

    def keys_for(self, namespace: str | None) -> FireOnceKeys:
        return self.keys if namespace is None else self.keys.for_namespace(namespace)

    async def claim_protocol(self) -> None:
        """Claim the prefix for protocol v3 or refuse (PROTOCOL.md section 1)."""
        await self._run({"key": self.keys.protocol_marker()}, lambda: claim_protocol(self.redis, self.keys))

    async def acquire(self, target: DispatchTarget, lock_ttl_ms: int | None = None, read_ttl: bool = False) -> AcquireOutcome:
        """One round trip: fast-forward, acquire with a fresh token, or report the holder."""
        ttl = self.options.lock_ttl_ms if lock_ttl_ms is None else positive_int("lock_ttl_ms", lock_ttl_ms)
        check_args_hash(target.args_hash)
        lock_key, waiters_key, artifact_key = self._step_keys(target)
        mode = "x" if target.external_artifact_key is not None else ("t" if read_ttl else "r")
        if mode == "r" and self._known is not None and self._known.get(artifact_key, False):
            record = await self._read_known(target, artifact_key)
            if record is not None:
                return FastForward(stored_result(record, target, artifact_key), artifact_key)
        token = str(uuid.uuid4())
        context = error_context(target, lock_key)
        sent = asyncio.ensure_future(ACQUIRE(self.redis, [artifact_key, lock_key], [token, ttl, mode, lock_tail(target.args_hash, target.holder)]))
        try:
            reply = await self._run(context, lambda: asyncio.shield(sent))
        except BaseException:
            # Timed out, failed or cancelled: Redis may run the acquire all the same, once its bytes
            # land. Undo a lock it takes, once it has answered (never ahead of it), with the
            # waiters that parked on that lock meanwhile; an unknown outcome is undone blindly.
            undo = Lease(target, lock_key, artifact_key, waiters_key, token, 0)
            sent.add_done_callback(lambda done: background(self._undo(undo)) if _may_hold(done) else None)
            raise
        if isinstance(reply, int):
            lease = Lease(target, lock_key, artifact_key, waiters_key, token, reply)
            await self._confirm(lease, ttl)
            return Acquired(lease)
        found = found_by_acquire(reply, target, lock_key, artifact_key)
        if isinstance(found, FastForward) and target.external_artifact_key is None:
            self._remember(artifact_key)
        return found

    async def commit(self, lease: Lease, artifact: bytes, artifact_ttl_ms: int | None = None) -> Committed:
        """Store the artifact; in the same step delete the lock if still ours. A late holder
        writes only into an empty slot: ``stored`` is False otherwise, and nothing changed."""
        self._check_lease("commit", lease)
        ttl = self.options.artifact_ttl_ms if artifact_ttl_ms is None else positive_int("artifact_ttl_ms", artifact_ttl_ms)
        record = format_artifact(lease.target.args_hash, artifact)
        keys = [lease.artifact_key, lease.lock_key, lease.waiters_key]
        args: list[str | bytes | int] = [lease.token, record, ttl, self._channel(lease.target)]
        # The script's reply stands even if the replicas fall short: the lock they may still hold
        # keeps later invocations waiting until its TTL, never dispatching.
        written = await self._run(error_context(lease.target, lease.artifact_key, lease.token), lambda: self._replicas.write(COMMIT, keys, args))
        reply = written.reply
        if reply == COMMIT_REFUSED:
            return Committed(False, stored=False)
        settled = _settled(reply)
        self._remember(lease.artifact_key)
        await self._hand_back(lease, settled)
        return Committed(settled.ours, settled.waiters)

    async def release(self, lease: Lease) -> Settled:
        """Compare-and-delete after a failure; ``ours`` is false when refused."""
        self._check_lease("release", lease)
        keys = [lease.lock_key, lease.waiters_key]
        args = [lease.token, self._channel(lease.target)]
        written = await self._run(error_context(lease.target, lease.lock_key, lease.token), lambda: self._replicas.write(RELEASE, keys, args))
        settled = _settled(written.reply)  # as a commit's, whatever the replicas acknowledged
        await self._hand_back(lease, settled)
        return settled

    async def _confirm(self, lease: Lease, lock_ttl_ms: int) -> None:
        """After an acquire took the lock: wait for the replicas (``replica_sync``). A lock they did
        not acknowledge in time would be lost by a failover, and its job dispatched again: undo it
        and fail, retryable; so too when the wait fails (WAIT denied, the connection lost) or times out."""
        context = error_context(lease.target, lease.lock_key)
        try:
            written = await self._run(
                context, lambda: self._replicas.confirm(lease.lock_key, lease.waiters_key, lease.token, lock_ttl_ms, lock_ttl_ms + WAITERS_GRACE_MS)
            )
        except BaseException:
            background(self._undo(lease))
            raise
        if written is None:
            return
        if written.reply != 1:  # nothing to undo: the lock is gone, or another holder's
            raise FireOnceStoreUnavailable(
                "the lock was lost before the replicas acknowledged it (it expired, or was released or taken, "
                "between the acquire and its confirm): nothing was dispatched",
                context,
            )
        if written.acked < written.wanted:
            background(self._undo(lease))
            raise FireOnceStoreUnavailable(self._shortfall("lock", written.wanted, written.acked), context)

    def _shortfall(self, what: str, wanted: int, acked: int, wait_error: Exception | None = None) -> str:
        why = "" if wait_error is None else f": WAIT failed ({wait_error})"
        return f"only {acked} of {wanted} replica(s) acknowledged the {what} within {self.options.replica_sync_setting.timeout_ms} ms (replica_sync){why}"

    async def _undo(self, lease: Lease) -> None:
        """Compare-and-delete a lock nobody holds, putting back the waiters it takes; sent again while
        its slot migrates, so that a lock undone mid-migration does not stay until its TTL."""
        keys = [lease.lock_key, lease.waiters_key]
        settled = _settled(await through_migration(self.redis, self.options.store_timeout_ms, lambda: RELEASE(self.redis, keys, [lease.token, ""])))
        await self._hand_back(lease, settled)

    async def _hand_back(self, lease: Lease, settled: Settled) -> None:
        """Put back the waiters a commit or release handed over: this package cannot complete
        another worker's parked activities, so it leaves them to the reap of the worker that
        parked them (PROTOCOL.md section 7), which completes them with the artifact now stored,
        or fails them so that they retry once the lock is gone."""
        if not settled.waiters:
            return
        key = lease.waiters_key

        async def put_back() -> None:
            # One round trip, as in TypeScript: a PEXPIRE sent apart could be lost after its RPUSH,
            # leaving the list without a TTL until the parking worker's next reap.
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.rpush(key, *settled.waiters)
                pipe.pexpire(key, WAITERS_GRACE_MS)
                await pipe.execute()

        await self._run(error_context(lease.target, key, lease.token), put_back)

    async def extend(self, lease: Lease, lock_ttl_ms: int) -> bool:
        """Compare-and-expire: renew a lease, or hold the lock after a dispatch."""
        self._check_lease("extend", lease)
        ttl = positive_int("lock_ttl_ms", lock_ttl_ms)
        keys = [lease.lock_key, lease.waiters_key]
        context = error_context(lease.target, lease.lock_key, lease.token)
        written = await self._run(context, lambda: self._replicas.write(EXTEND, keys, [lease.token, ttl, ttl + WAITERS_GRACE_MS]))
        if written.reply == 1 and written.acked < written.wanted:
            # A renewal no replica has would not survive a failover: it counts as a failed renewal.
            raise FireOnceStoreUnavailable(self._shortfall("lease renewal", written.wanted, written.acked, written.wait_error), context)
        return bool(written.reply == 1)

    async def keep(self, lease: Lease, lock_ttl_ms: int | None) -> Settled:
        """Hold the lock after a dispatch whose result is in hand but not stored (over
        ``max_artifact_bytes``, refused by the codec or the converter), and take the waiters parked
        on it in the same step (``extend`` with ``take``), for the caller to hand that outcome to:
        they waited for this very job. ``lock_ttl_ms`` sets the lock's TTL; ``None`` leaves it
        (``'fixed'`` mode). ``ours`` is false, and nothing is taken, if the lock was lost."""
        self._check_lease("keep", lease)
        ttl: int | str = "" if lock_ttl_ms is None else positive_int("lock_ttl_ms", lock_ttl_ms)
        keys = [lease.lock_key, lease.waiters_key]
        written = await self._run(
            error_context(lease.target, lease.lock_key, lease.token), lambda: self._replicas.write(EXTEND, keys, [lease.token, ttl, 0, "take"])
        )
        return _settled(written.reply)  # as a commit's, whatever the replicas acknowledged

    async def invalidate(self, scope: str, job_type: str, namespace: str | None = None) -> bool:
        """Delete the artifact of (scope, job type) and publish its key to local caches."""
        keys = self.keys_for(namespace)
        key = keys.artifact(scope, job_type)
        if self._known is not None:
            self._known.pop(key, None)
        reply = await self._run({"key": key, "scope": scope, "jobType": job_type}, lambda: INVALIDATE(self.redis, [key], [keys.invalidations()]))
        return bool(reply == 1)

    async def log_append(self, namespace: str | None, max_len: int, entries: list[list[tuple[str, str]]]) -> int:
        """Append dispatch-log entries (PROTOCOL.md section 9) in one round trip. ``max_len`` goes to
        every ``XADD ... MAXLEN ~``: anything but a positive integer is ``FireOnceConfigError``
        (0 would trim the stream to nothing, and Redis refuses a float or a negative)."""
        positive_int("max_len", max_len, MAX_LOG_LEN, "entries")
        key = self.keys_for(namespace).log()
        args: list[str | bytes | int] = [max_len]
        for entry in entries:
            args.append(len(entry) * 2)
            for name, value in entry:
                args.extend((name, value))
        return int(await self._run({"key": key}, lambda: LOG_APPEND(self.redis, [key], args)))

    def artifact_key(self, target: DispatchTarget) -> str:
        if target.external_artifact_key is None:
            return self.keys_for(target.namespace).artifact(target.scope, target.job_type)
        encode_id("jobType", target.job_type)
        return self.external_key(target)

    def external_key(self, target: DispatchTarget) -> str:
        """The target's external artifact key, unless the guard must not take it: another scope's
        or namespace's key, or one it writes itself, would read or replace a result that is not
        this call's (``FireOnceKeys.external_key_problem``); nor a key that is no string, ``None``
        included (an ``external`` option that returned nothing)."""
        key = target.external_artifact_key
        problem = self.keys_for(target.namespace).external_key_problem(key, target.scope, target.job_type)
        if problem is not None:
            raise FireOnceConfigError(f"the external artifact key of {target.job_type!r} in scope {target.scope!r} {problem}", error_context(target, str(key)))
        assert key is not None
        return key

    def _step_keys(self, target: DispatchTarget) -> tuple[str, str, str]:
        """The lock, waiter-list and artifact keys of the target's step, as acquire writes them into
        its lease (``stepKeys`` in ``src/core/step-keys.ts``)."""
        base = self.keys_for(target.namespace).scope_base(target.scope)
        step = encode_id("step", target.step)
        job_type = encode_id("jobType", target.job_type)
        artifact_key = f"{base}:a:{job_type}" if target.external_artifact_key is None else self.external_key(target)
        return f"{base}:l:{step}", f"{base}:w:{step}", artifact_key

    def _check_lease(self, what: str, lease: Lease) -> None:
        """A lease names the keys commit, release and extend write: refuse one whose keys are not
        those this guard builds for its target (a lease of a guard with another key prefix, or one
        edited or made by hand), so that no lease writes into another scope's or prefix's keys."""
        target = lease.target
        if (lease.lock_key, lease.waiters_key, lease.artifact_key) != self._step_keys(target):
            raise FireOnceConfigError(
                f"{what}: the lease's keys are not this guard's for its target (key_prefix {self.keys.prefix!r}): "
                "pass the lease acquire() returned, unchanged, to a guard with the key_prefix that acquired it",
                error_context(target, lease.lock_key),
            )

    def _channel(self, target: DispatchTarget) -> str:
        return self.keys_for(target.namespace).wake_channel(target.scope) if self.options.publish_wake_ups else ""

    def _remember(self, artifact_key: str) -> None:
        if self._known is not None:
            self._known[artifact_key] = True

    async def _read_known(self, target: DispatchTarget, artifact_key: str) -> bytes | None:
        """The artifact record at a key this guard saw exist, read with a plain ``GET``; ``None``
        once it is gone, and the key is forgotten. A key that no longer holds a string is left to
        the script, which reports what it holds."""

        async def read() -> bytes | None:
            try:
                record = await self.redis.get(artifact_key)
            except ResponseError as err:
                if str(err).startswith("WRONGTYPE"):
                    return None
                raise
            return record.encode() if isinstance(record, str) else record  # the client is made with decode_responses=False

        record = await self._run(error_context(target, artifact_key), read)
        if record is None and self._known is not None:
            self._known.pop(artifact_key, None)
        return record

    async def _run(self, context: dict[str, str], call: Callable[[], Awaitable[T]]) -> T:
        """One store call within ``store_timeout_ms``, failing closed (``store_calls``)."""
        return await store_call(self.options.store_timeout_ms, context, call)


def _may_hold(done: asyncio.Future[Any]) -> bool:
    """Whether an acquire that settled unseen may have left a lock: it took one, or its outcome is unknown."""
    return done.cancelled() or done.exception() is not None or isinstance(done.result(), int)


def _settled(reply: Any) -> Settled:
    if isinstance(reply, int):
        return Settled(reply == 1)
    return Settled(reply[0] == 1, tuple(reply[1:]))
