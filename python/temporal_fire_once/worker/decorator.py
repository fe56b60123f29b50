"""``@fire_once(...)``: records the options on the activity function and nothing else; the
interceptor reads them (the way ``@FireOnce`` delegates to ``fireOnce`` on the TypeScript side)."""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Iterable, Literal, Sequence, TypeVar

from temporalio import activity

from ..core.errors import FireOnceConfigError
from .options import ConflictPolicy, ExternalArtifact, FireOnceOptions, InFlightPolicy, LockMode

F = TypeVar("F", bound=Callable[..., Any])
_ATTR = "__temporal_fire_once__"


def fire_once(
    _misused: object = None,
    /,
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
    to its stored result. Put it above or below ``@activity.defn``, always with its parentheses,
    on a function or on a method in its class (give the worker the method of an instance, as the
    SDK has it); never on a bound method, which cannot carry the options. Options are checked here, so
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
    if _misused is not None:
        raise FireOnceConfigError(
            f"fire_once: write @fire_once() with parentheses (options, if any, inside them), not @fire_once, above {_name(_misused)}"
        )
    # Each option left None takes its default, declared once in FireOnceOptions.
    options = FireOnceOptions(**{name: value for name, value in locals().items() if value is not None and name != "_misused"})

    def mark(fn: F) -> F:
        if inspect.isclass(fn) or not callable(fn):
            what = f"{_name(fn)} is a class" if inspect.isclass(fn) else f"a value of type {type(fn).__name__} is not a function"
            raise FireOnceConfigError(
                f"fire_once: {what}: it guards an activity, so put @fire_once() on an activity's function or method (a workflow's never)"
            )
        if inspect.ismethod(fn):
            # Its attributes are its function's, shared by the class and every instance, and it takes none of its own.
            raise FireOnceConfigError(
                f"fire_once: {_name(fn)} is a bound method, which cannot carry options (nor can @activity.defn mark one): "
                "decorate it in its class, above or below @activity.defn, and give the worker the instance's method"
            )
        if options_of(fn) is not None:
            # The outer decorator's options would replace the inner's without a word.
            raise FireOnceConfigError(
                f"fire_once: {getattr(fn, '__name__', 'the activity')} is already decorated with @fire_once; give every option in one @fire_once(...)"
            )
        _check_may_return_none(fn, options)
        setattr(fn, _ATTR, options)
        return fn

    return mark


def _check_may_return_none(fn: Callable[..., Any], options: FireOnceOptions) -> None:
    """Refuse ``'skip'`` (``None`` without running) and an external artifact (``None`` on a
    fast-forward) on an activity annotated to return a value its callers could not be given: a
    workflow typed ``str`` would get ``None``. TypeScript's types only let them on ``Promise<void>``.
    An annotation that cannot be resolved, or none, is not checked."""
    if options.on_in_flight == "skip":
        why = "on_in_flight='skip' returns None without running it while another call holds the lock"
    elif isinstance(options.artifact, ExternalArtifact):
        why = "an external artifact returns None when a call fast-forwards"
    else:
        return
    try:
        returns = typing.get_type_hints(fn).get("return", Any)
    except Exception:
        return
    if returns in (Any, object, type(None)) or type(None) in typing.get_args(returns):
        return
    name = _name(fn)
    shown = returns.__name__ if isinstance(returns, type) else repr(returns)
    raise FireOnceConfigError(
        f"fire_once: {name} is annotated to return {shown}, but {why}, "
        "so a caller would get None: annotate it -> None (or make None one of its types), or choose another policy"
    )


def refuse_marked_workflow_methods(workflows: Iterable[object]) -> None:
    """Refuse a workflow class with a method marked ``@fire_once``: the guard runs around
    activities, so such a mark would guard nothing, without a word."""
    for cls in workflows:
        seen: set[str] = set()
        # Every class the workflow's methods come from, so that a marked method it inherits counts;
        # a name seen in a subclass hides the same name further up, as it does for the workflow.
        for owner in inspect.getmro(cls) if inspect.isclass(cls) else ():
            for name, member in vars(owner).items():
                if name in seen:
                    continue
                seen.add(name)
                if options_of(getattr(member, "__func__", member)) is not None:
                    raise FireOnceConfigError(
                        f"fire_once: {_name(cls)}.{name} is a method of a workflow, which @fire_once() does not guard: "
                        "put it on the activity the workflow calls"
                    )


def _name(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "the activity"))


def options_of(fn: object) -> FireOnceOptions | None:
    """The options ``@fire_once`` recorded on ``fn``, or ``None`` for an unguarded activity."""
    options = getattr(fn, _ATTR, None)
    return options if isinstance(options, FireOnceOptions) else None
