"""The target of one guarded call (``resolveTarget`` in ``src/worker/resolve-target.ts``): its scope,
step, job type, namespace, holder and args hash, and the external artifact key its ``artifact``
option builds. The option functions the user wrote run here, before anything is locked: one that
raises or returns an awaitable, arguments the payload converter cannot serialise, or an external
key the guard cannot use, is a non-retryable ``FireOnceConfigError`` naming it."""

from __future__ import annotations

import inspect
from typing import Any, Callable, TypeVar

from temporalio import activity
from temporalio.worker import ExecuteActivityInput

from .._header import scope_from_headers
from ..core.errors import FireOnceConfigError, FireOnceMissingScope
from ..core.guard import FireOnceGuard
from ..core.keys import encode_id
from ..core.outcomes import DispatchTarget
from .args_hash import args_hashes
from .options import ArtifactIds, FireOnceOptions

T = TypeVar("T")


def resolve_target(
    input: ExecuteActivityInput, options: FireOnceOptions, info: activity.Info, guard: FireOnceGuard, key_namespace: str | None
) -> DispatchTarget:
    """The target of this call, from its input, its options and the worker's ``key_namespace``."""
    scope_fn = options.scope
    scope = _user_option("scope", info, lambda: scope_fn(input.args, info)) if scope_fn is not None else scope_from_headers(input.headers)
    if scope is None:
        fix = (
            "its scope option returned None: make it return the scope, a string such as the session's ID"
            if scope_fn is not None
            else "call set_dispatch_scope() in the workflow, or give fire_once a scope option; "
            "a workflow worker without the plugin's workflow interceptor (FireOnceWorkflowInterceptor) carries no scope"
        )
        raise FireOnceMissingScope(f"activity {info.activity_type!r} has no dispatch scope: {fix}", {"activityType": info.activity_type})
    step = options.step or info.activity_type
    job_type = options.job_type or step
    holder = f"{info.workflow_id or ''} {info.workflow_run_id or ''} {info.activity_id}"
    hashed = former = ""
    if options.on_conflict != "ignore":
        key_fn = options.conflict_key
        values = call_arguments(input) if key_fn is None else [_user_option("conflict_key", info, lambda: key_fn(input.args))]
        hashed, former = _args_hashes(values, "the arguments" if key_fn is None else "the value of the conflict_key option", info)
    namespace = key_namespace or info.namespace
    artifact = options.artifact
    if artifact == "result":
        return DispatchTarget(scope, step, job_type, namespace, None, holder, hashed, former)
    # The key is built from the scope: a bad one is refused as the guard would refuse it
    # (FireOnceInvalidId), before the user's function sees it.
    encode_id("scope", scope)
    key = _user_option("artifact.external", info, lambda: artifact.external(ArtifactIds(scope, job_type, namespace)))
    target = DispatchTarget(scope, step, job_type, namespace, key, holder, hashed, former)
    encode_id("jobType", job_type)
    # Refused with FireOnceConfigError, before anything is locked: no key (None would run the call
    # in result mode), or under the guard's prefix a key not in this scope's slot and namespace,
    # or one the guard writes itself (a lock, a result).
    guard.external_key(target)
    return target


def call_arguments(input: ExecuteActivityInput) -> list[Any]:
    """The arguments of the call, as its caller gave them. The SDK hands a dynamic activity
    (``@activity.defn(dynamic=True)``) every argument in one sequence of ``RawValue``: those are
    the arguments, each hashed by its payload as the SDK received it (the converter passes a
    ``RawValue`` through), so the hash is the one a typed activity, or a TypeScript worker, takes
    of the same call. The SDK tells a dynamic activity by its definition's missing name, as here."""
    definition = activity._Definition.from_callable(input.fn)
    if definition is not None and not definition.name and len(input.args) == 1:
        return list(input.args[0])
    return list(input.args)


def _args_hashes(values: list[Any], what: str, info: activity.Info) -> tuple[str, str]:
    """The args hash of ``values``, and its former one (:func:`args_hashes`). If the payload converter cannot serialise them, the worker's
    code is at fault, not the call: a non-retryable ``FireOnceConfigError`` naming ``what`` and the
    error's class (never its message, which may quote the value), before anything is locked."""
    try:
        return args_hashes(values, activity.payload_converter())
    except Exception as err:
        raise FireOnceConfigError(
            f"{what} of activity {info.activity_type!r} cannot be serialised by the payload converter ({type(err).__name__})",
            {"activityType": info.activity_type},
        ) from None


def _user_option(name: str, info: activity.Info, fn: Callable[[], T]) -> T:
    """Run an option function the user wrote; if it raises or returns an awaitable, the worker's
    configuration is at fault: a non-retryable ``FireOnceConfigError`` naming the option, before
    anything is locked."""
    try:
        value = fn()
    except Exception as err:
        raise FireOnceConfigError(
            f"the {name} option of activity {info.activity_type!r} raised: {type(err).__name__}: {err}", {"activityType": info.activity_type}
        ) from err
    if inspect.isawaitable(value):
        # An async function: its awaitable is no scope, key or conflict value (as in TypeScript,
        # where an async conflictKey hashed alike for every call). Closed, so it is not left unawaited.
        if inspect.iscoroutine(value):
            value.close()
        raise FireOnceConfigError(
            f"the {name} option of activity {info.activity_type!r} returned an awaitable: it must return the value itself (a plain function, not an async one)",
            {"activityType": info.activity_type},
        )
    return value
