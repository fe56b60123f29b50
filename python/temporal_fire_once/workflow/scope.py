"""``set_dispatch_scope()`` for Python workflows (``src/workflow/scope.ts``). Sandbox-safe: it
imports nothing but ``temporalio.workflow``, the shared ID check and the table of run scopes."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from .._ids import id_problem

# Kept per workflow instance by the instance's own interceptor (see _runs), so a scope never leaks
# between runs, nor between two instances of one run; and, unlike the workflow object, it exists
# while a ``@workflow.init`` ``__init__`` runs. The host's
# table, also where the sandbox re-imports this module: only ``from ._runs import`` passes through
# (``from . import _runs`` loads the submodule past the sandbox's importer, hence afresh).
with workflow.unsafe.imports_passed_through():
    from ._runs import find_run


def set_dispatch_scope(scope: str) -> None:
    """Set the dispatch scope of this workflow: every activity, local activity and child workflow
    scheduled from now on carries it in the ``temporal-fire-once-scope`` header, and so does a
    continue-as-new. Use the session or job ID that many runs share, never the workflow or run ID.
    It may be called in ``__init__`` (``@workflow.init`` or not): a scope set there is kept over
    the one inherited from the parent or the previous run, as one set in ``run`` replaces it.

    Outside a workflow, or in a query handler or an update validator (which leave no trace in the
    history, so the scope would differ after a replay), it raises a non-retryable
    ``ApplicationError`` of type ``FireOnceConfigError``. Raises a non-retryable ``ApplicationError`` of type ``FireOnceInvalidId`` for a scope the
    worker would refuse, failing the workflow before it schedules anything under a bad scope.

    Needs :class:`FireOnceWorkflowInterceptor` (or ``FireOncePlugin``) on the worker; without it
    the scope is checked, logged as carried nowhere (WARNING on ``workflow.logger``), and dropped.
    """
    if not workflow.in_workflow():
        # As in TypeScript: called anywhere else, it could only fail later, far from its cause.
        raise ApplicationError(
            "set_dispatch_scope() must be called in a workflow: activities get the scope from the workflow that schedules them, or from their scope option",
            type="FireOnceConfigError",
            non_retryable=True,
        )
    if workflow.unsafe.is_read_only():
        # A query or a validator leaves no trace in the history: the scope would hold on this
        # worker and be gone after a replay.
        raise ApplicationError(
            "set_dispatch_scope() cannot be called in a query handler, an update validator or another read-only context: it leaves no trace in the history, "
            "so a replay would schedule under another scope; set it in the workflow, or in a signal or update handler",
            type="FireOnceConfigError",
            non_retryable=True,
        )
    check_scope(scope)
    run = find_run(workflow.info())
    if run is None:
        workflow.logger.warning(
            "fire-once: set_dispatch_scope() on a worker without FireOnceWorkflowInterceptor (or FireOncePlugin): the scope reaches no activity"
        )
        return
    run.scope = scope


def get_dispatch_scope() -> str | None:
    """The dispatch scope set in (or inherited by) this workflow, or ``None`` (also on a worker
    without :class:`FireOnceWorkflowInterceptor`, where no scope is carried). Outside a workflow it
    raises a non-retryable ``ApplicationError`` of type ``FireOnceConfigError``, as
    :func:`set_dispatch_scope` does."""
    if not workflow.in_workflow():
        raise ApplicationError(
            "get_dispatch_scope() must be called in a workflow: a guarded activity's dispatch reads its scope from fire_once_context().scope",
            type="FireOnceConfigError",
            non_retryable=True,
        )
    run = find_run(workflow.info())
    return None if run is None else run.scope


def check_scope(scope: str) -> None:
    """Raise the non-retryable ``FireOnceInvalidId`` for a scope the worker would refuse."""
    problem = id_problem("scope", scope)
    if problem is not None:
        raise ApplicationError(problem, type="FireOnceInvalidId", non_retryable=True)
