"""``@fire_once(...)``: records the options on the activity function and nothing else; the
interceptor reads them (the way ``@FireOnce`` delegates to ``fireOnce`` on the TypeScript side)."""

from __future__ import annotations

from typing import Any, Callable, Literal, Sequence, TypeVar

from temporalio import activity

from .options import ConflictPolicy, ExternalArtifact, FireOnceOptions, InFlightPolicy, LockMode

F = TypeVar("F", bound=Callable[..., Any])
_ATTR = "__temporal_fire_once__"


def fire_once(
    *,
    step: str | None = None,
    job_type: str | None = None,
    scope: Callable[[Sequence[Any], activity.Info], str] | None = None,
    on_in_flight: InFlightPolicy | None = None,
    lock_mode: LockMode | None = None,
    lease_ms: int | None = None,
    lock_ttl_ms: int | None = None,
    artifact_ttl_ms: int | None = None,
    artifact: Literal["result"] | ExternalArtifact = "result",
    on_conflict: ConflictPolicy = "fail",
    conflict_key: Callable[[Sequence[Any]], Any] | None = None,
    observe_only: bool = False,
) -> Callable[[F], F]:
    """Guard an activity: it dispatches at most once per (scope, step); later calls fast-forward
    to its stored result. Put it above or below ``@activity.defn``. Options are checked here, so
    a bad one fails at import with ``FireOnceConfigError`` naming it.

    >>> from temporalio import activity
    >>> @fire_once(job_type="summary")
    ... @activity.defn
    ... async def summarise(text: str) -> str:
    ...     return text[:10]
    >>> options_of(summarise).job_type
    'summary'
    """
    options = FireOnceOptions(
        step=step,
        job_type=job_type,
        scope=scope,
        on_in_flight=on_in_flight,
        lock_mode=lock_mode,
        lease_ms=lease_ms,
        lock_ttl_ms=lock_ttl_ms,
        artifact_ttl_ms=artifact_ttl_ms,
        artifact=artifact,
        on_conflict=on_conflict,
        conflict_key=conflict_key,
        observe_only=observe_only,
    )

    def mark(fn: F) -> F:
        setattr(fn, _ATTR, options)
        return fn

    return mark


def options_of(fn: object) -> FireOnceOptions | None:
    """The options ``@fire_once`` recorded on ``fn``, or ``None`` for an unguarded activity."""
    options = getattr(fn, _ATTR, None)
    return options if isinstance(options, FireOnceOptions) else None
