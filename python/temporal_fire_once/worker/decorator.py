"""``@fire_once(...)``: records the options on the activity function and nothing else; the
interceptor reads them (the way ``@FireOnce`` delegates to ``fireOnce`` on the TypeScript side)."""

from __future__ import annotations

from typing import Any, Callable, Literal, Sequence, TypeVar

from temporalio import activity

from ..core.errors import FireOnceConfigError
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
    artifact: Literal["result"] | ExternalArtifact | None = None,
    on_conflict: ConflictPolicy | None = None,
    conflict_key: Callable[[Sequence[Any]], Any] | None = None,
    observe_only: bool | None = None,
) -> Callable[[F], F]:
    """Guard an activity: it dispatches at most once per (scope, step); later calls fast-forward
    to its stored result. Put it above or below ``@activity.defn``. Options are checked here, so
    a bad one fails at import with ``FireOnceConfigError`` naming it. The options and their
    defaults are :class:`FireOnceOptions`'s.

    >>> from temporalio import activity
    >>> @fire_once(job_type="summary")
    ... @activity.defn
    ... async def summarise(text: str) -> str:
    ...     return text[:10]
    >>> options_of(summarise).job_type
    'summary'
    """
    # Each option left None takes its default, declared once in FireOnceOptions.
    options = FireOnceOptions(**{name: value for name, value in locals().items() if value is not None})

    def mark(fn: F) -> F:
        if options_of(fn) is not None:
            # The outer decorator's options would replace the inner's without a word.
            raise FireOnceConfigError(
                f"fire_once: {getattr(fn, '__name__', 'the activity')} is already decorated with @fire_once; give every option in one @fire_once(...)"
            )
        setattr(fn, _ATTR, options)
        return fn

    return mark


def options_of(fn: object) -> FireOnceOptions | None:
    """The options ``@fire_once`` recorded on ``fn``, or ``None`` for an unguarded activity."""
    options = getattr(fn, _ATTR, None)
    return options if isinstance(options, FireOnceOptions) else None
