"""Options of the core guard, with the TypeScript package's defaults and bounds
(``src/core/options.ts``), each checked once with a message that names the field."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis, RedisCluster

from .errors import FireOnceConfigError
from .keys import DEFAULT_NAMESPACE, check_key_prefix, encode_id

MAX_DURATION_MS = 365 * 24 * 60 * 60 * 1000
# The largest dispatch-log cap: FireOnceGuard.log_append and the worker's dispatch_log_max_len.
MAX_LOG_LEN = 100_000_000


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


def check_redis_client(redis: object) -> None:
    """``FireOnceConfigError`` unless ``redis`` is a ``redis.asyncio`` client the guard can use
    (``checkRedisOptions`` in ``src/core/options.ts``)."""
    if not isinstance(redis, (Redis, RedisCluster)):
        raise FireOnceConfigError(f"redis must be a redis.asyncio Redis or RedisCluster (got {type(redis).__name__})")
    if redis.get_connection_kwargs().get("decode_responses"):
        raise FireOnceConfigError(
            "redis was created with decode_responses=True, which the guard cannot work under: it reads locks, artifacts and "
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
