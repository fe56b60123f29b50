"""``set_dispatch_scope()`` for Python workflows (``src/workflow/scope.ts``). Sandbox-safe: it
imports nothing but ``temporalio.workflow`` and the shared ID check."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from .._ids import id_problem

# Kept on the run's own runtime (the SDK's per-run workflow event loop), so a scope never leaks
# between runs, whatever the sandbox shares between them; and, unlike the workflow instance,
# it exists while a ``@workflow.init`` ``__init__`` runs.
_SLOT = "__temporal_fire_once_dispatch_scope"


def set_dispatch_scope(scope: str) -> None:
    """Set the dispatch scope of this workflow: every activity, local activity and child workflow
    scheduled from now on carries it in the ``temporal-fire-once-scope`` header, and so does a
    continue-as-new. Use the session or job ID that many runs share, never the workflow or run ID.
    It may be called in ``__init__`` (``@workflow.init`` or not): a scope set there is kept over
    the one inherited from the parent or the previous run, as one set in ``run`` replaces it.

    Raises a non-retryable ``ApplicationError`` of type ``FireOnceInvalidId`` for a scope the
    worker would refuse, failing the workflow before it schedules anything under a bad scope.

    Needs :class:`FireOnceWorkflowInterceptor` (or ``FireOncePlugin``) on the worker.
    """
    problem = id_problem("scope", scope)
    if problem is not None:
        raise ApplicationError(problem, type="FireOnceInvalidId", non_retryable=True)
    setattr(workflow._Runtime.current(), _SLOT, scope)


def get_dispatch_scope() -> str | None:
    """The dispatch scope set in (or inherited by) this workflow, or ``None``."""
    scope = getattr(workflow._Runtime.current(), _SLOT, None)
    return scope if isinstance(scope, str) else None
