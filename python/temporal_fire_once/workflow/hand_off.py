"""The workflow's end of the hand-off (``_hand_off.py``): a local activity scheduled again, for
the workflow's next worker, each time its worker's shutdown ends its wait. Sandbox-safe.

The SDK's own retries of a local activity go through a timer the same way, but keep the attempt
number and the first schedule time, which no public API passes on. So the activity starts again
numbered 1, and is given what is left of the limits the workflow set: of ``maximum_attempts``, the
attempts used before the one handed off (its failure names it), and of ``schedule_to_close_timeout``
the workflow time since the first schedule. One whose schedule-to-close ran out while handed off
fails as the SDK fails a local activity timed out, without running again.

A cancel of the handle while no activity runs (handed off, behind the timer), or one that reached
the activity only after its worker's shutdown had ended its wait, ends it cancelled: without the
hand-off the wait would have heard it, and ended so, whatever the cancellation type."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any, Callable, Mapping

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState, TimeoutError, TimeoutType
from temporalio.worker import StartLocalActivityInput

from .._hand_off import HAND_OFF_ACTIVITY_ID, HAND_OFF_ATTEMPT, HAND_OFF_CANCEL_PATCH, HAND_OFF_DELAY_S, WORKER_SHUTDOWN_TYPE

Start = Callable[[StartLocalActivityInput], workflow.ActivityHandle[Any]]


class HandOffHandle(workflow.ActivityHandle[Any]):
    """The handle of a local activity that the workflow schedules again, behind a timer of
    ``HAND_OFF_DELAY_S`` that lets the workflow task complete and the stopping worker stop, each
    time it is handed off. Any other outcome is the activity's own, cancellation included; a cancel
    that finds the activity handed off ends it cancelled, as the SDK's failure of a cancelled local
    activity, instead of scheduling it again."""

    def __init__(self, start: Start, input: StartLocalActivityInput) -> None:
        self._start, self._input = start, input
        self._first_scheduled = workflow.now()
        self._attempts_used = 0
        self._current = start(input)
        self._running = False
        self._cancel_requested = False
        # What the SDK's failures name: the ID given, else its own, which each hand-off's failure names.
        self._activity_id = input.activity_id or ""
        super().__init__(self._run())
        # Named as the SDK names its own handles. The SDK lists in its stack-trace query only the
        # tasks it registers, which takes a private call or a task of its making in between, whose
        # extra step could reorder commands against recorded histories: this one is not listed, but
        # the run's task shows it by this name, and the activity's own handle is listed.
        info = workflow.info()
        self.set_name(f"activity: {input.activity}, fire-once hand-off (workflow: {info.workflow_type}, id: {info.workflow_id}, run: {info.run_id})")
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
                self._activity_id = _handed_off_activity_id(err) or self._input.activity_id or ""
                if self._cancel_requested and workflow.patched(HAND_OFF_CANCEL_PATCH):
                    # The cancel reached the activity after its worker's shutdown had ended its wait
                    # (WAIT_CANCELLATION_COMPLETED awaits the activity's own end): scheduled again,
                    # it would be lost.
                    raise _cancelled(self._input, self._activity_id)
            self._attempts_used += attempt - 1  # the attempt handed off goes on in the next schedule
            try:
                await workflow.sleep(HAND_OFF_DELAY_S)
            except asyncio.CancelledError:
                # No activity runs to hear the cancel, to wait for or to abandon: it ends now.
                if not workflow.patched(HAND_OFF_CANCEL_PATCH):
                    raise
                raise _cancelled(self._input, self._activity_id)
            self._current = self._start(self._what_is_left())

    def _what_is_left(self) -> StartLocalActivityInput:
        input, retry = self._input, self._input.retry_policy
        if retry is not None and retry.maximum_attempts > 0:
            retry = dataclasses.replace(retry, maximum_attempts=max(retry.maximum_attempts - self._attempts_used, 1))
        overall = input.schedule_to_close_timeout
        if overall is not None:
            overall -= workflow.now() - self._first_scheduled
            if overall <= timedelta(0):
                raise _timed_out(input, self._activity_id)
        return dataclasses.replace(input, retry_policy=retry, schedule_to_close_timeout=overall)

    def cancel(self, msg: Any | None = None) -> bool:
        # Not yet running, this task would end without ever awaiting the activity: cancel that too,
        # as the SDK's handle sends the cancel of an activity it has not started to await.
        if not self._running and not self.done():
            self._current.cancel(msg)
        self._cancel_requested = True
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


def _handed_off_activity_id(err: BaseException) -> str:
    """The ID of the local activity that a hand-off failure ended, as its worker names it ("" in a
    failure recorded before 0.10.0)."""
    failure = err.cause if isinstance(err, ActivityError) else err
    details = failure.details[0] if isinstance(failure, ApplicationError) and failure.details else None
    activity_id = details.get(HAND_OFF_ACTIVITY_ID) if isinstance(details, Mapping) else None
    return activity_id if isinstance(activity_id, str) else ""


def _failed(input: StartLocalActivityInput, activity_id: str, message: str, retry_state: RetryState) -> ActivityError:
    return ActivityError(
        message,
        scheduled_event_id=0,
        started_event_id=0,
        identity="",
        activity_type=input.activity,
        activity_id=activity_id,
        retry_state=retry_state,
    )


def _cancelled(input: StartLocalActivityInput, activity_id: str) -> ActivityError:
    """The failure of a local activity cancelled, as the SDK raises it."""
    failure = _failed(input, activity_id, "Local Activity cancelled", RetryState.CANCEL_REQUESTED)
    failure.__cause__ = CancelledError("Activity cancelled")
    return failure


def _timed_out(input: StartLocalActivityInput, activity_id: str) -> ActivityError:
    """The failure of a local activity whose schedule-to-close ran out, as the SDK raises it."""
    failure = _failed(input, activity_id, "Local Activity timed out", RetryState.TIMEOUT)
    failure.__cause__ = TimeoutError("Activity timed out", type=TimeoutType.SCHEDULE_TO_CLOSE, last_heartbeat_details=[])
    return failure
