"""Map a guard error to the ``ApplicationError`` that ends the activity: ``type`` is the error's
stable type string, ``non_retryable`` the inverse of ``retryable``, and a ``FireOnceInFlight``
asks for its ``retry_after_ms`` (at least 100 ms) as ``next_retry_delay``
(``src/worker/failures.ts``)."""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError

from ..core.errors import FireOnceError, FireOnceInFlight

_MIN_IN_FLIGHT_RETRY_DELAY_MS = 100


def to_application_error(err: FireOnceError, extra: dict[str, str] | None = None) -> ApplicationError:
    """
    >>> to_application_error(FireOnceInFlight("busy", 30_000)).next_retry_delay
    datetime.timedelta(seconds=30)
    """
    delay = None
    if isinstance(err, FireOnceInFlight):
        delay = timedelta(milliseconds=max(err.retry_after_ms, _MIN_IN_FLIGHT_RETRY_DELAY_MS))
    return ApplicationError(
        err.message,
        {**(extra or {}), **err.context},
        type=err.type,
        non_retryable=not err.retryable,
        next_retry_delay=delay,
    )
