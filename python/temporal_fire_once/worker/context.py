"""``fire_once_context()``: what a guarded activity can learn about its own dispatch while it
runs (``fireOnceContext()`` on the TypeScript side): its IDs, its lock, its fencing token, and
whether its lease was lost."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from dataclasses import dataclass

from ..core.errors import FireOnceConfigError


@dataclass(frozen=True)
class FireOnceContext:
    scope: str
    step: str
    job_type: str
    lock_key: str
    fencing_token: int
    """Strictly greater than every earlier holder's of this (scope, step): send it with every
    write to a downstream system, which refuses writes with a lower one."""
    lost: asyncio.Event
    """Set when a lease renewal found the lock gone or another holder's, or none succeeded for a
    whole lease. Nothing is raised: the job decides whether to stop (it may raise
    ``FireOnceLockLost``, where the TypeScript side aborts its signal with one)."""


_current: ContextVar[FireOnceContext | None] = ContextVar("temporal_fire_once_context", default=None)


def fire_once_context() -> FireOnceContext:
    """The context of the guarded dispatch running now. Raises ``FireOnceConfigError`` outside
    one (an unguarded activity, a fast-forward, or ``observe_only``), as ``fireOnceContext()``
    throws on the TypeScript side."""
    context = _current.get()
    if context is None:
        raise FireOnceConfigError("fire_once_context() is only available inside a guarded activity's dispatch")
    return context
