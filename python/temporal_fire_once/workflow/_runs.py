"""The dispatch scope of each workflow run this process is running, by run ID. Sandbox-safe.

The SDK gives each run its own inbound interceptor, whose ``init`` runs before the workflow's
``__init__``. It opens the run's :class:`RunScope` there, under the run ID that its outbound
interceptor's ``info()`` gives, and holds it; the workflow finds it by ``workflow.info().run_id``.
All public SDK calls: no private SDK object holds the scope.

The table holds each entry weakly, so an entry goes once the SDK drops the run (evicted from its
cache, or done) and its interceptor with it: nothing is left behind per run. A run built again
(replayed after an eviction) opens a new entry under the same run ID, which replaces the old one;
the old one's later collection leaves the new one alone (``WeakValueDictionary`` removes only a
dead reference).

One table per process: this module must be the host's, also where the sandbox re-imports the rest
of the package (a worker wired by hand without ``temporal_fire_once`` passed through), so import it
only under ``workflow.unsafe.imports_passed_through()``, as ``from ._runs import ...``."""

from __future__ import annotations

import weakref


class RunScope:
    """The scope of one run: the one it set, or else the one it inherited, or ``None``."""

    __slots__ = ("scope", "__weakref__")

    def __init__(self) -> None:
        self.scope: str | None = None


_RUNS: weakref.WeakValueDictionary[str, RunScope] = weakref.WeakValueDictionary()


def open_run(run_id: str) -> RunScope:
    """A new, empty scope for run ``run_id``; the caller holds it for as long as the run lives."""
    run = RunScope()
    _RUNS[run_id] = run
    return run


def find_run(run_id: str) -> RunScope | None:
    """The scope of run ``run_id``, or ``None`` if no interceptor opened one (none installed)."""
    return _RUNS.get(run_id)


def open_run_ids() -> list[str]:
    """The run IDs that have a scope now (for tests)."""
    return list(_RUNS.keys())
