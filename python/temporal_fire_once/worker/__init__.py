"""The Temporal adapter: the plugin, the interceptor, ``@fire_once`` and failure mapping."""

from .args_hash import args_hash, canonical_json
from .context import FireOnceContext, fire_once_context
from .decorator import fire_once, options_of
from .failures import to_application_error
from .interceptor import FireOnceInterceptor
from .options import ArtifactIds, ExternalArtifact, FireOnceOptions, WorkerDefaults
from .plugin import FireOncePlugin

__all__ = [
    "ArtifactIds",
    "ExternalArtifact",
    "FireOnceContext",
    "FireOnceInterceptor",
    "FireOnceOptions",
    "FireOncePlugin",
    "WorkerDefaults",
    "args_hash",
    "canonical_json",
    "fire_once",
    "fire_once_context",
    "options_of",
    "to_application_error",
]
