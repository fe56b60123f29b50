"""temporal-fire-once for the Temporal Python SDK: fire-once dispatch of activities, sharing locks
and results with the TypeScript package through protocol v3 (PROTOCOL.md).

The worker side is imported lazily, so that ``temporal_fire_once.workflow`` stays safe in the
workflow sandbox (it never pulls in Redis).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.errors import (
        FireOnceArtifactTooLarge,
        FireOnceConfigError,
        FireOnceCorruptArtifact,
        FireOnceError,
        FireOnceInFlight,
        FireOnceInvalidId,
        FireOnceKeyConflict,
        FireOnceLockLost,
        FireOnceMissingScope,
        FireOnceProtocolError,
        FireOnceProtocolMismatch,
        FireOnceStoreUnavailable,
        FireOnceUnstorableResult,
    )
    from .core.guard import FireOnceGuard
    from .core.keys import PROTOCOL_VERSION, FireOnceKeys
    from .core.options import GuardOptions
    from .worker.context import FireOnceContext, fire_once_context
    from .worker.decorator import fire_once
    from .worker.interceptor import FireOnceInterceptor
    from .worker.options import ExternalArtifact, WorkerDefaults
    from .worker.plugin import FireOncePlugin
    from .workflow import SCOPE_HEADER, FireOnceWorkflowInterceptor, get_dispatch_scope, set_dispatch_scope

_EXPORTS = {
    **{
        name: "core.errors"
        for name in (
            "FireOnceArtifactTooLarge",
            "FireOnceConfigError",
            "FireOnceCorruptArtifact",
            "FireOnceError",
            "FireOnceInFlight",
            "FireOnceInvalidId",
            "FireOnceKeyConflict",
            "FireOnceLockLost",
            "FireOnceMissingScope",
            "FireOnceProtocolError",
            "FireOnceProtocolMismatch",
            "FireOnceStoreUnavailable",
            "FireOnceUnstorableResult",
        )
    },
    "FireOnceGuard": "core.guard",
    "FireOnceKeys": "core.keys",
    "PROTOCOL_VERSION": "core.keys",
    "GuardOptions": "core.options",
    "fire_once": "worker.decorator",
    "FireOnceContext": "worker.context",
    "fire_once_context": "worker.context",
    "FireOnceInterceptor": "worker.interceptor",
    "ExternalArtifact": "worker.options",
    "WorkerDefaults": "worker.options",
    "FireOncePlugin": "worker.plugin",
    "SCOPE_HEADER": "workflow",
    "FireOnceWorkflowInterceptor": "workflow",
    "get_dispatch_scope": "workflow",
    "set_dispatch_scope": "workflow",
}

__all__ = [
    "ExternalArtifact",
    "FireOnceArtifactTooLarge",
    "FireOnceConfigError",
    "FireOnceContext",
    "FireOnceCorruptArtifact",
    "FireOnceError",
    "FireOnceGuard",
    "FireOnceInFlight",
    "FireOnceInterceptor",
    "FireOnceInvalidId",
    "FireOnceKeyConflict",
    "FireOnceKeys",
    "FireOnceLockLost",
    "FireOnceMissingScope",
    "FireOncePlugin",
    "FireOnceProtocolError",
    "FireOnceProtocolMismatch",
    "FireOnceStoreUnavailable",
    "FireOnceUnstorableResult",
    "FireOnceWorkflowInterceptor",
    "GuardOptions",
    "PROTOCOL_VERSION",
    "SCOPE_HEADER",
    "WorkerDefaults",
    "fire_once",
    "fire_once_context",
    "get_dispatch_scope",
    "set_dispatch_scope",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'temporal_fire_once' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
