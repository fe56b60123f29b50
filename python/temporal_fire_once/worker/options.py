"""Options of guarded activities: per activity (``@fire_once``) and worker-wide defaults, with the
TypeScript package's names (snake_cased), defaults and bounds (``src/worker/options.ts``,
``src/worker/activity-options.ts``), each checked once with a message naming the field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from temporalio import activity

from .._ids import IdKind, id_problem
from ..core.errors import FireOnceConfigError
from ..core.keys import DEFAULT_NAMESPACE, encode_id
from ..core.options import MAX_LOG_LEN, one_of, positive_int

InFlightPolicy = Literal["wait", "fail", "skip"]
DefaultInFlightPolicy = Literal["wait", "fail"]
"""The in-flight policies a worker-wide default may take: all but ``'skip'``, which is per activity."""
LockMode = Literal["lease", "fixed"]
ConflictPolicy = Literal["fail", "ignore"]
MAX_LEASE_MS = 10 * 60 * 1000
MIN_LEASE_MS = 1_000
"""The shortest lease, as in TypeScript: it is renewed every third of it, and a shorter one runs
out under a Redis round trip or a pause of the worker, so the job is dispatched again."""


def _lease_ms(value: object) -> None:
    if positive_int("lease_ms", value, MAX_LEASE_MS) < MIN_LEASE_MS:
        raise FireOnceConfigError(
            f"lease_ms must be at least {MIN_LEASE_MS} ms (got {value}): the lock is renewed every third of it, "
            "and a shorter lease runs out under a Redis round trip or a pause of the worker, so the job is dispatched again"
        )


@dataclass(frozen=True)
class ArtifactIds:
    """What an ``external`` option builds its key from; the library makes one per call."""

    scope: str
    job_type: str
    namespace: str = DEFAULT_NAMESPACE
    """The namespace this call's keys are filed under: the worker's ``key_namespace``, else the
    Temporal namespace."""


@dataclass(frozen=True)
class ExternalArtifact:
    """The job writes its artifact itself under ``external(ids)``; the guard only tests it exists."""

    external: Callable[[ArtifactIds], str]


@dataclass(frozen=True)
class FireOnceOptions:
    """Options of one guarded activity. ``None`` means the worker-wide default (see
    :class:`WorkerDefaults`); the per-activity defaults are those of the TypeScript side."""

    step: str | None = None
    """Step the lock is named after. Default: the activity type."""
    job_type: str | None = None
    """Job type the artifact is named after. Default: ``step``."""
    scope: Callable[[Sequence[Any], activity.Info], str] | None = None
    """The scope of a call from its arguments. Default: the scope the workflow set."""
    on_in_flight: InFlightPolicy | None = None
    lock_mode: LockMode | None = None
    lease_ms: int | None = None
    lock_ttl_ms: int | None = None
    artifact_ttl_ms: int | None = None
    artifact: Literal["result"] | ExternalArtifact = "result"
    on_conflict: ConflictPolicy = "fail"
    conflict_key: Callable[[Sequence[Any]], Any] | None = None
    observe_only: bool = False

    def __post_init__(self) -> None:
        # Named as the Python options, not as the protocol's ID kinds (jobType).
        ids: tuple[tuple[str, IdKind, str | None], ...] = (("step", "step", self.step), ("job_type", "jobType", self.job_type))
        for name, kind, value in ids:
            problem = None if value is None else id_problem(kind, value, name)
            if problem is not None:
                raise FireOnceConfigError(problem)
        if self.scope is not None and not callable(self.scope):
            raise FireOnceConfigError(f"scope must be a function (args, info) -> str (got {self.scope!r})")
        if self.on_in_flight is not None:
            one_of("on_in_flight", self.on_in_flight, ("wait", "fail", "skip"))
        if self.lock_mode is not None:
            one_of("lock_mode", self.lock_mode, ("lease", "fixed"))
        if self.lease_ms is not None:
            _lease_ms(self.lease_ms)
        if self.lock_ttl_ms is not None:
            positive_int("lock_ttl_ms", self.lock_ttl_ms)
        if self.artifact_ttl_ms is not None:
            positive_int("artifact_ttl_ms", self.artifact_ttl_ms)
        if self.artifact != "result" and not isinstance(self.artifact, ExternalArtifact):
            raise FireOnceConfigError(f"artifact must be 'result' or ExternalArtifact(external=...) (got {self.artifact!r})")
        if isinstance(self.artifact, ExternalArtifact) and not callable(self.artifact.external):
            raise FireOnceConfigError(f"artifact.external must be a function (ids) -> key (got {self.artifact.external!r})")
        one_of("on_conflict", self.on_conflict, ("fail", "ignore"))
        if self.conflict_key is not None and not callable(self.conflict_key):
            raise FireOnceConfigError(f"conflict_key must be a function (args) -> value (got {self.conflict_key!r})")
        if not isinstance(self.observe_only, bool):
            raise FireOnceConfigError(f"observe_only must be a boolean (got {self.observe_only!r})")


@dataclass(frozen=True)
class WorkerDefaults:
    """Worker-wide defaults of guarded activities (the plugin's options of the same names)."""

    on_in_flight: DefaultInFlightPolicy = "wait"
    """What a guarded activity does while another invocation holds the lock, unless it sets its
    own. Not ``'skip'``: that returns ``None`` without running, so it is set per activity, on one
    whose callers expect no value."""
    poll_interval_ms: int = 250
    lock_mode: LockMode = "lease"
    lease_ms: int = 30_000
    max_artifact_bytes: int = 1024 * 1024
    key_namespace: str | None = None
    dispatch_log: bool = True
    dispatch_log_max_len: int = 100_000
    allow_evicting_redis: bool = False
    """Start even though Redis can evict the guard's keys (a ``maxmemory-policy`` other than
    ``noeviction``, or one that cannot be read); the risk is logged once at WARNING. An evicted
    lock or artifact lets a job be dispatched again. Checked by the plugin when a worker starts."""

    def __post_init__(self) -> None:
        policy: object = self.on_in_flight  # typed without 'skip', but a caller may pass anything
        if policy == "skip":
            raise FireOnceConfigError(
                "on_in_flight 'skip' returns None without running the activity, which suits only activities whose callers expect no value: "
                "set it per activity, @fire_once(on_in_flight='skip')"
            )
        one_of("on_in_flight", self.on_in_flight, ("wait", "fail"))
        positive_int("poll_interval_ms", self.poll_interval_ms, 60_000)
        one_of("lock_mode", self.lock_mode, ("lease", "fixed"))
        _lease_ms(self.lease_ms)
        positive_int("max_artifact_bytes", self.max_artifact_bytes, 512 * 1024 * 1024, "bytes")
        positive_int("dispatch_log_max_len", self.dispatch_log_max_len, MAX_LOG_LEN, "entries")
        for name in ("dispatch_log", "allow_evicting_redis"):
            # "false" would be truthy, 0 falsy: a flag is a bool, as TypeScript's flag() checks.
            if not isinstance(getattr(self, name), bool):
                raise FireOnceConfigError(f"{name} must be a boolean (got {getattr(self, name)!r})")
        if self.key_namespace is not None:
            try:
                encode_id("namespace", self.key_namespace)
            except Exception as err:
                raise FireOnceConfigError(f"key_namespace: {err}") from err


def ttl_warnings(artifact_ttl_ms: int, lock_ttl_ms: int, store_timeout_ms: int, defaults: WorkerDefaults) -> list[str]:
    """The plugin's TTL warnings, as TypeScript's ``ttlWarnings``: artifacts that expire before
    their lock (later invocations redo the work), a ``'fixed'`` lock shorter than ``store_timeout_ms``,
    and a lease a renewal cannot keep within ``store_timeout_ms``."""
    warnings: list[str] = []
    lease = defaults.lock_mode == "lease"
    lock_ttl, lock_field = (defaults.lease_ms, "lease_ms") if lease else (lock_ttl_ms, "lock_ttl_ms")
    if artifact_ttl_ms < lock_ttl:
        warnings.append(
            f"artifact_ttl_ms ({artifact_ttl_ms}) is shorter than {lock_field} ({lock_ttl}): artifacts can expire while their lock "
            "still stands, and later invocations then redo the work"
        )
    if not lease and lock_ttl_ms < store_timeout_ms:
        warnings.append(
            f"lock_ttl_ms ({lock_ttl_ms}) in 'fixed' mode is shorter than store_timeout_ms ({store_timeout_ms}): the lock can expire before "
            "the job has even started, and the next invocation then dispatches it again; make lock_ttl_ms longer than the longest job"
        )
    if lease and defaults.lease_ms * 2 / 3 < store_timeout_ms:
        warnings.append(
            f"lease_ms ({defaults.lease_ms}) leaves a renewal sent at a third of it less than store_timeout_ms ({store_timeout_ms}) "
            "to land before the lock expires: a slow Redis can let the lock lapse mid-job; make lease_ms at least 1.5 times store_timeout_ms"
        )
    return warnings
