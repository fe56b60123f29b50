"""The workflow's end of the hand-off (``_hand_off.py``): a local activity scheduled again, for
the workflow's next worker, each time its worker's shutdown ends its wait. Sandbox-safe.

The SDK's own retries of a local activity go through a timer the same way, but keep the attempt
number and the first schedule time, which no public API passes on: here the activity starts again
from attempt 1, and its schedule-to-close from the new schedule."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import StartLocalActivityInput

from .._hand_off import HAND_OFF_ATTEMPT, HAND_OFF_DELAY_S, WORKER_SHUTDOWN_TYPE

Start = Callable[[StartLocalActivityInput], workflow.ActivityHandle[Any]]


class HandOffHandle(workflow.ActivityHandle[Any]):
    """The handle of a local activity that the workflow schedules again, behind a timer of
    ``HAND_OFF_DELAY_S`` that lets the workflow task complete and the stopping worker stop, each
    time it is handed off. Any other outcome is the activity's own, cancellation included."""

    def __init__(self, start: Start, input: StartLocalActivityInput) -> None:
        self._start, self._input = start, input
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
                if handed_off_attempt(err) is None:
                    raise
            await workflow.sleep(HAND_OFF_DELAY_S)
            self._current = self._start(self._input)

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

