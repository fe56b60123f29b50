"""The workflow side: safe to import in the workflow sandbox (no Redis, no I/O)."""

from .._header import SCOPE_HEADER
from .interceptor import FireOnceWorkflowInterceptor
from .scope import get_dispatch_scope, set_dispatch_scope

__all__ = ["SCOPE_HEADER", "FireOnceWorkflowInterceptor", "get_dispatch_scope", "set_dispatch_scope"]
