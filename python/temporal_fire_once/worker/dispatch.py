"""Run the activity under a held lock (``src/worker/dispatch.ts``): renew the lease while it
runs; on failure (cancellation included) release by compare-and-delete and re-raise; a call
cancelled before it runs releases and raises without running; on success
commit the artifact, which takes over from the lock in one atomic step, or hold the lock for
``lock_ttl_ms`` (external artifacts, and a result that cannot be stored: then the waiters parked
on the lock get that result, or its failure, from this holder). Once the job has returned or
failed, that settling runs to its end even if the attempt is cancelled meanwhile."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.exceptions import ApplicationError, CancelledError

from ..core.errors import FireOnceUnstorableResult
from ..core.outcomes import Lease
from ..core.store_calls import cancel_and_wait
from .artifact import encode_artifact
from .context import FireOnceContext, _current
from .failures import to_application_error
from .hand_over import HandOver, complete_waiters, fail_waiters_with, settle_waiters
from .setup import CallSetup

_logger = logging.getLogger("temporal_fire_once")
T = TypeVar("T")
# Raised by activity.raise_complete_async(): neither success nor failure, the job goes on.
_COMPLETE_ASYNC: type[BaseException] = getattr(activity, "_CompleteAsyncError", type("_Never", (BaseException,), {}))
_ASYNC_RESULT_WARNING = (
    "fire-once: the job completes asynchronously, but in 'result' mode the result it is completed with never reaches the guard: "
    "nothing is stored, and every other run of this step waits for the lock's TTL, then dispatches again. Give the activity "
    "artifact=ExternalArtifact(...) and have the completer write that key before it completes the activity"
)


@dataclass
class Renewal:
    """Renews the lease every third of it (``src/core/renewal.ts``). If a renewal finds the lock
    gone or another holder's, the lock is lost: ``lost`` is set and renewing stops. If no renewal
    has succeeded for a whole lease (Redis unreachable), the lock may be lost: ``lost`` is set too,
    but renewing goes on, so that a lock Redis still holds for this token stays this holder's."""

    call: CallSetup
    lease: Lease
    lease_ms: int
    lost: asyncio.Event
    task: asyncio.Task[None] | None = None
    renewed: float = field(default_factory=time.monotonic)  # the last successful renewal, or the start
    stopping: bool = False

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while not self.stopping:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                if not await self.call.guard.extend(self.lease, self.lease_ms):
                    self._lose("it expired or passed to another holder")
                    return
                self.renewed = time.monotonic()
            except Exception as err:  # one failed renewal is retried at the next period
                _logger.warning("fire-once: lease renewal failed: %s", err)
                if time.monotonic() - self.renewed >= self.lease_ms / 1000:
                    self._lose(f"no renewal succeeded for a whole lease ({self.lease_ms} ms)")

    def _lose(self, why: str) -> None:
        if self.lost.is_set():
            return
        self.lost.set()
        self.call.decision("lock-lost", lease=self.lease)
        _logger.warning("fire-once: lockLost %s: %s", self.lease.lock_key, why)

    async def stop(self) -> None:
        """Stop renewing and wait until the task has ended: it ends at its next turn of the loop
        too, should code under a renewal swallow its cancellation (defect 175)."""
        self.stopping = True
        if self.task is not None:
            await cancel_and_wait(self.task)


async def dispatch(call: CallSetup, lease: Lease, run: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``run`` under ``lease``; see the module docstring."""
    if activity.is_cancelled():
        # Cancelled (or shut down) while the lock was being taken, e.g. during a waiter's re-check:
        # run nothing for a call nobody waits for, and give the lock back at once.
        await _release(call, lease)
        raise CancelledError("Cancelled")
    call.decision("dispatched", lease=lease)
    lost = asyncio.Event()
    renewal = None
    if call.lock_mode == "lease":
        renewal = Renewal(call, lease, call.lease_ms, lost)
        renewal.start()
    target = lease.target
    token = _current.set(FireOnceContext(target.scope, target.step, target.job_type, lease.lock_key, lease.fencing_token, lost))
    try:
        result = await run()
    except _COMPLETE_ASYNC:
        if target.external_artifact_key is None:
            _logger.warning("%s (lock %s, scope %r, step %r)", _ASYNC_RESULT_WARNING, lease.lock_key, target.scope, target.step)
        await _to_the_end(_after(renewal, _hold(call, lease, renewal)))
        raise
    except BaseException:
        await _to_the_end(_after(renewal, _release(call, lease)))
        raise
    finally:
        _current.reset(token)
    if lease.target.external_artifact_key is not None:
        await _to_the_end(_after(renewal, _hold(call, lease, renewal)))
        return result
    return await _to_the_end(_after(renewal, _commit(call, lease, renewal, result)))


async def _after(renewal: Renewal | None, settle: Awaitable[T]) -> T:
    """Stop renewing, then settle the lock: give it back, hold it, or commit the result."""
    if renewal is not None:
        await renewal.stop()
    return await settle


async def _to_the_end(settle: Awaitable[T]) -> T:
    """Run ``settle`` to its end, even if this attempt is cancelled meanwhile (worker shutdown, or a
    cancellation, pause or reset that the job's last heartbeat brought back), then end as
    cancelled. The job has run: a commit cut short would leave the lock to its lease and the next
    call would dispatch the job again; a release or a hold cut short, leave waiters without their
    outcome. Every step is bounded by ``store_timeout_ms``; waiting here, rather than leaving the
    work to the background, lets it land before a stopping worker's ``run()`` returns."""
    work = asyncio.ensure_future(settle)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(work)
            break
        except asyncio.CancelledError:
            if work.cancelled():
                raise
            cancelled = True  # the work goes on; so does the wait
        except BaseException:
            if not cancelled:
                raise
            break  # the attempt ends as cancelled all the same
    if cancelled:
        raise asyncio.CancelledError()
    return result


async def _commit(call: CallSetup, lease: Lease, renewal: Renewal | None, result: Any) -> Any:
    activity_type = activity.info().activity_type
    try:
        payload: Payload = call.payload_converter.to_payloads([result])[0]
    except Exception as err:
        unstorable = FireOnceUnstorableResult(
            f"the result of {activity_type} cannot be serialised by the payload converter ({type(err).__name__}); the lock is kept until its TTL",
            {"key": lease.lock_key, "jobType": lease.target.job_type},
        )
        # Parked waiters would get nothing either: they fail as the holder does, for good.
        failure = to_application_error(unstorable, {"activityType": activity_type})
        await _hold(call, lease, renewal, lambda client, tokens: fail_waiters_with(client, tokens, failure))
        raise unstorable from None  # the converter's message may quote the result

    # Stored or not, the result in hand is what any waiter parked on this dispatch gets.
    async def hand_result(client: Client, tokens: Sequence[bytes]) -> None:
        await complete_waiters(client, tokens, payload)

    try:
        data = await encode_artifact(payload, call.payload_codec)
    except Exception as err:
        _logger.error("fire-once: the payload codec failed on the result; result delivered, not stored: %s", err)
        # The waiters' completions would run the same codec: they fail with its error, retryably,
        # as Temporal fails the holder's own attempt when it encodes the result it returns.
        refused = err if isinstance(err, ApplicationError) else ApplicationError(str(err), type=type(err).__name__)
        await _hold(call, lease, renewal, lambda client, tokens: fail_waiters_with(client, tokens, refused))
        return result
    if len(data) > call.defaults.max_artifact_bytes:
        _logger.error(
            "fire-once: FireOnceArtifactTooLarge: artifact of %d bytes exceeds max_artifact_bytes (%d); not stored, lock held for lock_ttl_ms",
            len(data),
            call.defaults.max_artifact_bytes,
        )
        await _hold(call, lease, renewal, hand_result)
        return result
    try:
        settled = await call.guard.commit(lease, data, call.options.artifact_ttl_ms)
    except Exception as err:
        # Left to its lease, the lock would run out with no artifact behind it, and the next run of
        # the step would dispatch again: hold it for lock_ttl_ms, as a result too large to store
        # is. A commit that timed out and landed all the same has deleted the lock: the hold then
        # finds it gone and changes nothing.
        _logger.error("fire-once: could not store the artifact; result delivered, lock held for lock_ttl_ms: %s", err)
        await _hold(call, lease, renewal, hand_result)
        return result
    if not settled.stored:
        call.decision("commit-refused", lease=lease)
        _logger.warning(
            "fire-once: result delivered, not stored: this holder lost its lock (lock_ttl_ms or lease_ms below the job time, "
            "or fire-once release --force), and a newer holder's lock or result stands"
        )
        return result
    call.decision("committed", lease=lease)
    if not settled.ours:
        _logger.warning("fire-once: artifact written after the lock had expired or been released; raise lock_ttl_ms or lease_ms above the job time")
    return result


async def _hold(call: CallSetup, lease: Lease, renewal: Renewal | None, hand_over: HandOver | None = None) -> None:
    """Keep the lock for ``lock_ttl_ms`` after a dispatch that stored no artifact of ours: the
    job's own artifact (or nothing) must take over before anyone may dispatch again. With
    ``hand_over`` (a result in hand but not stored), the waiters parked on the lock are taken in
    the same step (``keep``) and given that outcome; otherwise they stay parked, for the job's own
    artifact (``src/worker/dispatch.ts`` ``hold``). Never raises: a cancellation of this attempt
    lets the keep and the hand-over finish, as ``_release`` lets a release finish, so waiters a
    keep took off their list are never left without their outcome."""
    # 'fixed' mode: the lock already has lock_ttl_ms, so its TTL is left as it is.
    ttl = None if renewal is None else (call.options.lock_ttl_ms or call.guard.options.lock_ttl_ms)
    client = _completer(call) if hand_over is not None else None
    work = asyncio.ensure_future(_keep(call, lease, ttl, client, hand_over))
    _holding.add(work)  # a strong reference: the loop keeps only weak ones to tasks
    work.add_done_callback(_holding.discard)
    try:
        await asyncio.shield(work)
    except BaseException as err:  # the work runs on even if this task is cancelled
        if not isinstance(err, asyncio.CancelledError):
            _logger.error("fire-once: could not hold the lock after the dispatch; it expires with its lease: %s", err)


_holding: set[asyncio.Future[None]] = set()


async def _keep(call: CallSetup, lease: Lease, ttl: int | None, client: Client | None, hand_over: HandOver | None) -> None:
    """The hold itself: extend the lock, or keep it and hand the waiters taken their outcome."""
    try:
        if client is None or hand_over is None:
            # No client to complete them: the waiters stay parked, as after a hold of the job's own artifact.
            if ttl is not None and not await call.guard.extend(lease, ttl):
                _logger.warning("fire-once: lock lost before it could be held after the dispatch")
            return
        settled = await call.guard.keep(lease, ttl)
    except Exception as err:
        _logger.error("fire-once: could not hold the lock after the dispatch; it expires with its lease: %s", err)
        return
    if not settled.ours:
        _logger.warning("fire-once: lock lost before it could be held after the dispatch")
        return
    if settled.waiters:
        try:
            await settle_waiters(client, settled.waiters, lease.target, hand_over)
        except Exception as err:
            _logger.error("fire-once: handing over parked waiters failed: %s", err)


def _completer(call: CallSetup) -> Client | None:
    """The client that can complete the waiters parked on this call's lock, if any. Only workers
    without ``key_namespace`` park (TypeScript's), so the waiters are of the namespace the keys
    are filed under: a holder of another Temporal namespace that shares them cannot complete them."""
    key_namespace = call.defaults.key_namespace
    if key_namespace is not None and key_namespace != activity.info().namespace:
        return None
    return call.client


async def _release(call: CallSetup, lease: Lease) -> None:
    """Compare-and-delete after a failure; never raises."""
    try:
        settled = await asyncio.shield(call.guard.release(lease))
    except BaseException as err:  # the release runs on even if this task is cancelled again
        _logger.error("fire-once: dispatch failed and releasing the lock failed too; it expires by its TTL: %s", err)
        return
    call.decision("released-on-failure" if settled.ours else "release-refused", lease=lease)
