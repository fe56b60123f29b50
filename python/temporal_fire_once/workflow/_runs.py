"""The dispatch scope of each workflow instance this process is running. Sandbox-safe.

The SDK gives each workflow instance its own inbound interceptor, whose ``init`` runs before the
workflow's ``__init__``, and its own ``workflow.Info`` object, which its outbound interceptor's
``info()`` gives there and ``workflow.info()`` gives to the workflow for as long as the instance
lives. The interceptor opens the instance's :class:`RunScope` under that object and holds it; the
workflow finds it by ``workflow.info()``. All public SDK calls: no private SDK object holds the scope.

Keyed by the instance, not by the run ID: one process may hold two instances of one run at once
(a ``Replayer`` replaying the history of a run that a live worker has cached, two workers of two
builds, an instance rebuilt after an eviction while the old one is torn down), and each must keep
its own scope (docs/reliability.md, 89). Should another interceptor hand the workflow a copy of the
info (``info()`` returning a new object), the run ID finds the scope instead, as long as only one
instance of that run is open here.

The table holds each entry weakly, so an entry goes once the SDK drops the instance (evicted from
its cache, or done) and its interceptor with it: nothing is left behind per run. An entry is filed
under ``id()`` of its info, which the entry keeps alive: no other object can take that ``id()``
while the entry is there.

One table per process: this module must be the host's, also where the sandbox re-imports the rest
of the package (a worker wired by hand without ``temporal_fire_once`` passed through), so import it
only under ``workflow.unsafe.imports_passed_through()``, as ``from ._runs import ...``."""

from __future__ import annotations

import weakref

from temporalio.workflow import Info


class RunScope:
    """The scope of one workflow instance: the one it set, or else the one it inherited, or ``None``."""

    __slots__ = ("scope", "info", "__weakref__")

    def __init__(self, info: Info) -> None:
        self.scope: str | None = None
        self.info = info


_RUNS: weakref.WeakValueDictionary[int, RunScope] = weakref.WeakValueDictionary()


def open_run(info: Info) -> RunScope:
    """A new, empty scope for the workflow instance whose info is ``info``; the caller holds it for
    as long as the instance lives."""
    run = RunScope(info)
    _RUNS[id(info)] = run
    return run


def find_run(info: Info) -> RunScope | None:
    """The scope of the workflow instance whose info is ``info``, or ``None`` if no interceptor
    opened one (none installed)."""
    run = _RUNS.get(id(info))
    if run is not None and run.info is info:
        return run
    # A copy of the info: its run's only open instance, if there is just one. (valuerefs() copies
    # the table at once; other threads open and drop instances meanwhile.)
    same_run = [run for ref in _RUNS.valuerefs() if (run := ref()) is not None and run.info.run_id == info.run_id]
    return same_run[0] if len(same_run) == 1 else None


def open_run_ids() -> list[str]:
    """The run IDs that have a scope now, once for each open instance (for tests)."""
    return [run.info.run_id for ref in _RUNS.valuerefs() if (run := ref()) is not None]
