"""Every error the guard raises, with the same ``type`` strings as the TypeScript package's
``src/core/errors.ts``, so that a caller in any language sees the same ``ApplicationError.type``
(PROTOCOL.md section 10). The Temporal adapter maps them in ``worker/failures.py``.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

from .._hand_off import WORKER_SHUTDOWN_TYPE


class FireOnceError(Exception):
    """Base class. ``type`` is the stable failure type; ``retryable`` how Temporal treats it.

    ``context`` names the keys and IDs concerned (key, scope, step, jobType, holder,
    activityType), never an argument or a result.

    >>> err = FireOnceInFlight("busy", 1000, {"scope": "s"})
    >>> (err.type, err.retryable, err.context["scope"])
    ('FireOnceInFlight', True, 's')
    """

    type: ClassVar[str] = "FireOnceError"
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, context: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, str] = dict(context or {})


class FireOnceConfigError(FireOnceError):
    """Options are invalid, or the key prefix is written with another protocol version."""

    type = "FireOnceConfigError"


class FireOnceMissingScope(FireOnceError):
    """A guarded activity ran without a scope: no header and no ``scope`` option."""

    type = "FireOnceMissingScope"


class FireOnceInvalidId(FireOnceError):
    """A scope, step, job type or namespace is not a usable ID (PROTOCOL.md section 2)."""

    type = "FireOnceInvalidId"


class FireOnceInFlight(FireOnceError):
    """Another invocation holds the lock and the policy gave up waiting (or is ``'fail'``)."""

    type = "FireOnceInFlight"
    retryable = True

    def __init__(self, message: str, retry_after_ms: int, context: Mapping[str, str] | None = None) -> None:
        super().__init__(message, context)
        self.retry_after_ms = retry_after_ms


class FireOnceStoreUnavailable(FireOnceError):
    """Redis could not be reached or did not answer in time: fail closed, nothing dispatched."""

    type = "FireOnceStoreUnavailable"
    retryable = True


class FireOnceProtocolError(FireOnceError):
    """Redis answered something this protocol never sends or stores."""

    type = "FireOnceProtocolError"


class FireOnceCorruptArtifact(FireOnceError):
    """A stored artifact is not a record or payload this protocol writes."""

    type = "FireOnceCorruptArtifact"


class FireOnceUnstorableResult(FireOnceError):
    """The job ran but its result cannot be converted to a payload; the lock is kept."""

    type = "FireOnceUnstorableResult"


class FireOnceKeyConflict(FireOnceError):
    """Same scope and step, other arguments than the call in flight or the stored artifact."""

    type = "FireOnceKeyConflict"


class FireOnceLockLost(FireOnceError):
    """A lease renewal found the lock gone or another holder's."""

    type = "FireOnceLockLost"
    retryable = True


class FireOnceArtifactTooLarge(FireOnceError):
    """A result is larger than ``max_artifact_bytes``: logged, never raised to the workflow."""

    type = "FireOnceArtifactTooLarge"


class FireOnceWorkerShutdown(FireOnceError):
    """A guarded local activity waited in its slot for another worker's job when its own worker
    began to shut down. The SDK never cancels a local activity at shutdown, and the worker cannot
    stop before the workflow task that waits on it completes, so the wait ends with this; the
    plugin's workflow interceptor, which asked for it in the activity's header, schedules the
    activity again behind a short timer, and the workflow's next worker runs it. Workflow code
    never sees it. Not retryable: a retry would run on the stopping worker."""

    type = WORKER_SHUTDOWN_TYPE


class FireOnceProtocolMismatch(FireOnceConfigError):
    """The key prefix is written with another protocol version (PROTOCOL.md section 1).

    A ``FireOnceConfigError`` (its ``type`` stays ``FireOnceConfigError``, as the TypeScript side
    reports it), with the version found in ``found``.
    """

    def __init__(self, message: str, found: str, context: Mapping[str, str] | None = None) -> None:
        super().__init__(message, context)
        self.found = found
