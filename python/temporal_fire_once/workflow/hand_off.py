"""The workflow's end of the hand-off (``_hand_off.py``): a local activity scheduled again, for
the workflow's next worker, each time its worker's shutdown ends its wait. Sandbox-safe.

The SDK's own retries of a local activity go through a timer the same way, but keep the attempt
number and the first schedule time, which no public API passes on. So the activity starts again
numbered 1, and is given what is left of the limits the workflow set: of ``maximum_attempts``, the
attempts used before the one handed off (its failure names it), and of ``schedule_to_close_timeout``
the workflow time since the first schedule. One whose schedule-to-close ran out while handed off
fails as the SDK fails a local activity timed out, without running again."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any, Callable, Mapping

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, RetryState, TimeoutError, TimeoutType
from temporalio.worker import StartLocalActivityInput

from .._hand_off import HAND_OFF_ATTEMPT, HAND_OFF_DELAY_S, WORKER_SHUTDOWN_TYPE

Start = Callable[[StartLocalActivityInput], workflow.ActivityHandle[Any]]


class HandOffHandle(workflow.ActivityHandle[Any]):
    """The handle of a local activity that the workflow schedules again, behind a timer of
    ``HAND_OFF_DELAY_S`` that lets the workflow task complete and the stopping worker stop, each
    time it is handed off. Any other outcome is the activity's own, cancellation included."""

    def __init__(self, start: Start, input: StartLocalActivityInput) -> None:
        self._start, self._input = start, input
        self._first_scheduled = workflow.now()
        self._attempts_used = 0
        self._current = start(input)
        self._running = False
        super().__init__(self._run())
        # A worker that stops drops its workflows unfinished, this task with them, as the SDK's own
        # tasks: like them, not worth asyncio's "Task was destroyed but it is pending!".
        if hasattr(self, "_log_destroy_pending"):
            setattr(self, "_log_destroy_pending", False)

    async def _run(self) -> Any:
        self._running = True
        while True:
            try:
                return await self._current
            except (ActivityError, ApplicationError) as err:
                attempt = handed_off_attempt(err)
                if attempt is None:
                    raise
            self._attempts_used += attempt - 1  # the attempt handed off goes on in the next schedule
            await workflow.sleep(HAND_OFF_DELAY_S)
            self._current = self._start(self._what_is_left())

    def _what_is_left(self) -> StartLocalActivityInput:
        input, retry = self._input, self._input.retry_policy
        if retry is not None and retry.maximum_attempts > 0:
            retry = dataclasses.replace(retry, maximum_attempts=max(retry.maximum_attempts - self._attempts_used, 1))
        overall = input.schedule_to_close_timeout
        if overall is not None:
            overall -= workflow.now() - self._first_scheduled
            if overall <= timedelta(0):
                raise _timed_out(input)
        return dataclasses.replace(input, retry_policy=retry, schedule_to_close_timeout=overall)

    def cancel(self, msg: Any | None = None) -> bool:
        # Not yet running, this task would end without ever awaiting the activity: cancel that too,
        # as the SDK's handle sends the cancel of an activity it has not started to await.
        if not self._running and not self.done():
            self._current.cancel(msg)
        return super().cancel(msg)


def handed_off_attempt(err: BaseException) -> int | None:
    """The attempt a local activity's failure hands off, or ``None`` when the failure is none of
    the hand-off's: not of its type, or of its type but without the attempt that only the guard
    puts in its details (a failure of the activity's own). Core passes a local activity's failure
    on as the activity raised it, where a remote activity's is wrapped in an ``ActivityError``.

    >>> handed_off_attempt(ApplicationError("a user's own", type=WORKER_SHUTDOWN_TYPE)) is None
    True
    >>> handed_off_attempt(ApplicationError("handed off", {HAND_OFF_ATTEMPT: "2"}, type=WORKER_SHUTDOWN_TYPE))
    2
    """
    failure = err.cause if isinstance(err, ActivityError) else err
    if not isinstance(failure, ApplicationError) or failure.type != WORKER_SHUTDOWN_TYPE or not failure.details:
        return None
    details = failure.details[0]
    attempt = details.get(HAND_OFF_ATTEMPT) if isinstance(details, Mapping) else None
    return int(attempt) if isinstance(attempt, str) and attempt.isdigit() and int(attempt) > 0 else None


def _timed_out(input: StartLocalActivityInput) -> ActivityError:
    """The failure of a local activity whose schedule-to-close ran out, as the SDK raises it."""
    failure = ActivityError(
        "Local Activity timed out",
        scheduled_event_id=0,
        started_event_id=0,
        identity="",
        activity_type=input.activity,
        activity_id=input.activity_id or "",
        retry_state=RetryState.TIMEOUT,
    )
    failure.__cause__ = TimeoutError("Activity timed out", type=TimeoutType.SCHEDULE_TO_CLOSE, last_heartbeat_details=[])
    return failure
