"""What a call does when another holds its lock (``onHeld`` and ``waitInSlotFor`` in
``src/worker/in-flight.ts``, and ``src/core/wait.ts``): ``'skip'`` returns ``None``, ``'fail'``
raises the retryable ``FireOnceInFlight`` with a retry delay that grows with the holder's run, and
``'wait'`` waits in the worker slot, re-checking at every poll and at every wake-up in the scope,
until the lock is gone, the attempt's deadline nears or the activity is cancelled, or, for a local
activity whose workflow takes its wait back (``_hand_off.py``), until its worker begins to shut down."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timezone

from temporalio import activity
from temporalio.exceptions import CancelledError

from .._hand_off import HAND_OFF_ACTIVITY_ID, HAND_OFF_ATTEMPT
from ..core.errors import FireOnceInFlight, FireOnceWorkerShutdown
from ..core.outcomes import Acquired, FastForward, Held
from ..core.store_calls import replied
from ..core.wake import WakeHub
from .setup import CallSetup

_logger = logging.getLogger("temporal_fire_once")


async def on_held(
    call: CallSetup, held: Held, info: activity.Info, hub: WakeHub | None, started: float, sync: bool, hand_off: bool = False
) -> FastForward | Acquired | None:
    """Apply the call's in-flight policy to ``held``: ``None`` when skipped, else what the lock's
    next acquire found once it was no longer held (``started``: the attempt's start, ``time.time()``;
    ``sync``: the activity runs in the SDK's executor, which only flags its cancellation;
    ``hand_off``: a local activity whose workflow takes its wait back when this worker begins to
    shut down, ``_hand_off.py``)."""
    policy = call.options.on_in_flight or call.defaults.on_in_flight
    if policy == "skip":
        call.decision("in-flight-skipped", fencing=held.fencing_token)
        return None
    if policy == "fail":
        call.decision("in-flight-failed", fencing=held.fencing_token)
        raise FireOnceInFlight(
            f"step {call.target.step!r} is in flight in scope {call.target.scope!r}", fail_retry_delay(held), {"key": held.lock_key, **call.ids}
        )
    deadline = _deadline(info, started)
    poll = call.defaults.poll_interval_ms / 1000
    if info.heartbeat_timeout is not None:
        poll = min(poll, max(info.heartbeat_timeout.total_seconds() / 2, 0.001))
    channel = call.guard.keys_for(call.target.namespace).wake_channel(call.target.scope)
    bell = await _join(call, hub, channel)
    ttl_ms = held.ttl_ms
    # Re-check at once once subscribed: a commit between the first acquire and the subscription
    # would otherwise go unnoticed until the next poll.
    first = bell is not None
    try:
        while True:
            if not first:
                remaining = deadline - datetime.now(timezone.utc).timestamp()
                if remaining <= 0:
                    call.decision("in-flight-failed", fencing=held.fencing_token)
                    raise FireOnceInFlight(
                        f"gave up waiting on the lock of step {call.target.step!r} in scope {call.target.scope!r}, held {ttl_ms} ms more: "
                        "by a dispatch still in flight, or by one that ended without storing its result, whose lock stands until it expires",
                        max(min(ttl_ms, call.defaults.poll_interval_ms), 0),
                        {"key": held.lock_key, **call.ids},
                    )
                if info.heartbeat_timeout is not None:
                    # With the details this attempt started with: each heartbeat replaces the
                    # activity's details, the progress an earlier attempt's job recorded.
                    activity.heartbeat(*info.heartbeat_details)
                await _sleep(bell, min(poll, remaining), sync, hand_off)
            first = False
            _raise_if_cancelled()
            if hand_off and activity.is_worker_shutdown():
                call.decision("in-flight-failed", fencing=held.fencing_token)
                raise FireOnceWorkerShutdown(
                    f"this worker began to shut down while the local activity waited for the in-flight dispatch of step {call.target.step!r} "
                    f"in scope {call.target.scope!r}: its workflow schedules it again, for its next worker",
                    {"key": held.lock_key, **call.ids, HAND_OFF_ATTEMPT: str(info.attempt), HAND_OFF_ACTIVITY_ID: info.activity_id},
                )
            outcome = await call.guard.acquire(call.target, call.lock_ttl_ms)
            if not isinstance(outcome, Held):
                call.decision("in-flight-waited", fencing=held.fencing_token)
                return outcome
            ttl_ms = outcome.ttl_ms
    finally:
        if hub is not None and bell is not None:
            await hub.leave(channel, bell)


def fail_retry_delay(held: Held, now_ms: float | None = None) -> int:
    """The retry delay of ``'fail'``: half the time the holder has run so far (its fencing token is
    its start on the Redis clock, in microseconds), at least 100 ms, at most the lock's TTL left. A
    waiter that comes back soon after a short job's result exists, and backs off as a long job runs
    on, with no fixed cap."""
    elapsed_ms = max((time.time() * 1000 if now_ms is None else now_ms) - held.fencing_token / 1000, 0)
    half = int(elapsed_ms / 2 + 0.5)  # rounded half up, as Math.round
    return min(max(half, _MIN_FAIL_RETRY_DELAY_MS), max(held.ttl_ms, _MIN_FAIL_RETRY_DELAY_MS))


_MIN_FAIL_RETRY_DELAY_MS = 100


async def _join(call: CallSetup, hub: WakeHub | None, channel: str) -> asyncio.Event | None:
    """Subscribe to the scope's wake channel within ``store_timeout_ms``, or poll alone."""
    if hub is None or not call.guard.options.publish_wake_ups:
        return None
    try:
        async with asyncio.timeout(call.guard.options.store_timeout_ms / 1000):
            return await hub.join(channel)
    except Exception as err:
        _logger.warning("fire-once: could not subscribe to the wake channel, polling only: %s", replied(err))
        return None


def _raise_if_cancelled() -> None:
    """End the call as the SDK ends a cancelled sync activity, if its cancellation was requested:
    the SDK cancels an async activity's task, but only flags a sync (thread-pool) one, so a
    waiter must look (``src/core/wait.ts`` stops on the cancellation signal). Worker shutdown
    cancels activities too, once ``graceful_shutdown_timeout`` has run out."""
    if activity.is_cancelled():
        raise CancelledError("Cancelled")


async def _sleep(bell: asyncio.Event | None, seconds: float, sync: bool, hand_off: bool) -> None:
    """Until the next poll, until a commit or release in the scope rings the bell, for a sync
    activity until its cancellation is requested, and with ``hand_off`` until the worker begins to
    shut down (both looked at every ``_CANCEL_CHECK_S``)."""
    end = time.monotonic() + seconds

    def ended() -> bool:
        return (sync and activity.is_cancelled()) or (hand_off and activity.is_worker_shutdown())

    while (left := end - time.monotonic()) > 0 and not ended():
        step = min(left, _CANCEL_CHECK_S) if sync or hand_off else left
        if bell is None:
            await asyncio.sleep(step)
            continue
        try:
            async with asyncio.timeout(step):
                await bell.wait()
            break
        except TimeoutError:
            pass
    if bell is not None:
        bell.clear()


_CANCEL_CHECK_S = 0.1


def _deadline(info: activity.Info, started: float) -> float:
    """Give up before Temporal times this attempt out, so the failure is ours and says why. The
    timeout runs from the attempt's start (``started``), not from ``current_attempt_scheduled_time``,
    which for a local activity is its first attempt's schedule and which counts queue time too.
    Nor past schedule-to-close, which runs from the first schedule over every attempt: an activity
    Temporal has timed out must not go on to dispatch from its slot. One that ends before this
    attempt began is no real timeout (Temporal starts no attempt past it)."""
    start_to_close = info.start_to_close_timeout.total_seconds() if info.start_to_close_timeout else 3600.0
    margin = min(1.0, start_to_close * 0.2)
    deadline = started + start_to_close - margin
    if info.schedule_to_close_timeout:
        overall = info.scheduled_time.timestamp() + info.schedule_to_close_timeout.total_seconds()
        if overall > started:
            deadline = min(deadline, overall - margin)
    return deadline
