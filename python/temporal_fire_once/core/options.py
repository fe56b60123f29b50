"""Options of the core guard, with the TypeScript package's defaults and bounds
(``src/core/options.ts``), each checked once with a message that names the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping, Union

from redis.asyncio import Redis, RedisCluster

from .errors import FireOnceConfigError
from .keys import DEFAULT_NAMESPACE, check_key_prefix, encode_id

MAX_DURATION_MS = 365 * 24 * 60 * 60 * 1000
# The largest dispatch-log cap: FireOnceGuard.log_append and the worker's dispatch_log_max_len.
MAX_LOG_LEN = 100_000_000
REPLICA_SYNC_TIMEOUT_MS = 200
"""How long ``WAIT`` waits for the replicas when ``replica_sync`` does not say."""

ReplicaSyncOption = Union[Literal["auto", False], Mapping[str, object]]
"""How the guard makes sure its writes reached the replicas, as ``replica_sync`` takes it:

- ``'auto'``: wait for every replica the primary has (on a Cluster, the master that serves the key), counted
  with ``INFO replication`` at the first write and again each minute; none attached, no wait.
- ``{'replicas': n or 'auto', 'timeout_ms': ms}``: wait for that many replicas (or ``'auto'``, as
  above), for at most ``timeout_ms`` (default 200, or half of ``store_timeout_ms`` when that is
  400 or less); it must be below ``store_timeout_ms``.
- ``False``: never wait (replication stays asynchronous).
"""


@dataclass(frozen=True)
class ReplicaSyncSetting:
    """The ``replica_sync`` option once checked."""

    replicas: int | Literal["auto"]
    """``'auto'``, or a fixed count (0: never wait)."""
    timeout_ms: int


def positive_int(label: str, value: object, maximum: int = MAX_DURATION_MS, unit: str = "ms") -> int:
    """``value`` as a whole number from 1 to ``maximum``, or ``FireOnceConfigError`` naming ``label``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise FireOnceConfigError(f"{label} must be a positive integer (got {value!r})")
    if value > maximum:
        raise FireOnceConfigError(f"{label} must be at most {maximum} {unit} (got {value})")
    return value


def one_of(label: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise FireOnceConfigError(f"{label} must be one of {', '.join(allowed)} (got {value!r})")
    assert isinstance(value, str)
    return value


def check_redis_client(redis: object, where: str | None = None) -> None:
    """``FireOnceConfigError`` unless ``redis`` is a ``redis.asyncio`` client the guard can use
    (``checkRedisClient`` in ``src/core/options.ts``); ``where`` (a function's name) starts the message."""
    at = "" if where is None else f"{where}: "
    if not isinstance(redis, (Redis, RedisCluster)):
        raise FireOnceConfigError(f"{at}redis must be a redis.asyncio Redis or RedisCluster (got {type(redis).__name__})")
    if redis.get_connection_kwargs().get("decode_responses"):
        raise FireOnceConfigError(
            f"{at}redis was created with decode_responses=True, which the guard cannot work under: it reads locks, artifacts and "
            "script replies as bytes, so every fast-forward would fail with FireOnceProtocolError; create the client with "
            "decode_responses=False (the default)"
        )


@dataclass(frozen=True)
class GuardOptions:
    """The core guard's options.

    >>> GuardOptions().lock_ttl_ms
    900000
    """

    key_prefix: str = "fire-once"
    """Prefix of every key. 1-64 characters of ``[A-Za-z0-9._:-]``."""
    namespace: str = DEFAULT_NAMESPACE
    """The namespace keys are filed under unless a call names its own."""
    lock_ttl_ms: int = 15 * 60 * 1000
    """TTL of the lock in ``'fixed'`` mode, and the hold after an external-artifact dispatch."""
    artifact_ttl_ms: int = 7 * 24 * 60 * 60 * 1000
    """TTL of a stored result artifact."""
    store_timeout_ms: int = 5_000
    """How long one Redis call may take before the guard fails closed."""
    publish_wake_ups: bool = True
    """Publish on the scope's wake channel on commit and release."""
    known_artifacts: int = 10_000
    """How many artifact keys the guard remembers having seen exist (committed or fast-forwarded
    to); a repeat of one is read with a plain ``GET`` before the script (PROTOCOL.md section 6).
    Keys only, never results. ``0`` turns it off."""
    replica_sync: ReplicaSyncOption = field(default="auto", hash=False)
    """Make sure every write reached the replicas: ``WAIT`` pipelined behind each commit, release
    and renewal, and sent after an acquire that took the lock (a fast-forward writes nothing, and
    waits for nothing). An acquire the replicas did not acknowledge in time is undone and fails
    with the retryable ``FireOnceStoreUnavailable``, so nothing is dispatched on a lock a failover
    could lose; a renewal counts as failed; a commit's result is still delivered. See
    :data:`ReplicaSyncOption` for the values."""
    replica_sync_setting: ReplicaSyncSetting = field(init=False, repr=False, compare=False)
    """``replica_sync`` resolved: what the guard waits for, and how long."""

    def __post_init__(self) -> None:
        check_key_prefix("key_prefix", self.key_prefix)
        try:
            encode_id("namespace", self.namespace)
        except Exception as err:
            raise FireOnceConfigError(f"namespace: {err}") from err
        positive_int("lock_ttl_ms", self.lock_ttl_ms)
        positive_int("artifact_ttl_ms", self.artifact_ttl_ms)
        positive_int("store_timeout_ms", self.store_timeout_ms, 60_000)
        if not isinstance(self.publish_wake_ups, bool):
            raise FireOnceConfigError(f"publish_wake_ups must be a boolean (got {self.publish_wake_ups!r})")
        if isinstance(self.known_artifacts, bool) or not isinstance(self.known_artifacts, int) or self.known_artifacts < 0:
            raise FireOnceConfigError(f"known_artifacts must be 0 (off) or a positive integer (got {self.known_artifacts!r})")
        if self.known_artifacts > 0:
            positive_int("known_artifacts", self.known_artifacts, 1_000_000, "keys")
        object.__setattr__(self, "replica_sync_setting", resolve_replica_sync(self.replica_sync, self.store_timeout_ms))


def resolve_replica_sync(value: object, store_timeout_ms: int) -> ReplicaSyncSetting:
    """``replica_sync`` checked (``checkReplicaSync`` and ``resolveGuardOptions`` in
    ``src/core/options.ts``), with the wait bounded by the store timeout, which bounds each write
    and its ``WAIT`` together: at or past it, the store timeout would always answer first. Without
    a ``timeout_ms`` the wait is 200 ms, or half of a store timeout shorter than 400 ms."""
    label = "replica_sync"
    if value == "auto" and isinstance(value, str):
        setting = ReplicaSyncSetting("auto", REPLICA_SYNC_TIMEOUT_MS)
    elif value is False:
        return ReplicaSyncSetting(0, REPLICA_SYNC_TIMEOUT_MS)
    elif isinstance(value, Mapping):
        unknown = [key for key in value if key not in ("replicas", "timeout_ms")]
        if unknown:
            raise FireOnceConfigError(f"{label}: unknown option {', '.join(repr(key) for key in unknown)}")
        replicas = value.get("replicas")
        timeout_ms = value.get("timeout_ms")
        setting = ReplicaSyncSetting(
            "auto" if replicas == "auto" else positive_int(f"{label}.replicas", replicas, 16, "replicas"),
            REPLICA_SYNC_TIMEOUT_MS if timeout_ms is None else positive_int(f"{label}.timeout_ms", timeout_ms, 60_000),
        )
        if timeout_ms is not None:
            if setting.timeout_ms >= store_timeout_ms:
                raise FireOnceConfigError(
                    f"{label}.timeout_ms ({setting.timeout_ms} ms) must be below store_timeout_ms ({store_timeout_ms} ms), "
                    "which bounds each write and its WAIT together"
                )
            return setting
    else:
        raise FireOnceConfigError(f"{label} must be 'auto', False or {{'replicas': n or 'auto', 'timeout_ms': ms}} (got {value!r})")
    # The default wait leaves the write at least half of the store timeout: 200 ms, or half of a
    # store timeout shorter than 400 ms.
    return ReplicaSyncSetting(setting.replicas, max(1, min(setting.timeout_ms, store_timeout_ms // 2)))
