"""The activity interceptor (``src/worker/interceptor.ts``): for an activity marked with
``@fire_once`` (or listed in ``activities``), one decision per call: fast-forward to the stored
result, dispatch under the lock, or apply the in-flight policy. Every guard error leaves the
activity as an ``ApplicationError`` of the same ``type`` as on the TypeScript side."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, TypeVar

from temporalio import activity
from temporalio.common import RawValue
from temporalio.converter import PayloadCodec
from temporalio.exceptions import CancelledError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, WorkflowInterceptorClassInput
from temporalio.worker import WorkflowInboundInterceptor

from .._header import scope_from_headers
from ..core.errors import FireOnceConfigError, FireOnceError, FireOnceInFlight, FireOnceKeyConflict, FireOnceMissingScope
from ..core.guard import FireOnceGuard
from ..core.keys import encode_id
from ..core.outcomes import Acquired, DispatchTarget, FastForward, Held
from ..core.wake import WakeHub
from ..workflow.interceptor import FireOnceWorkflowInterceptor
from .args_hash import args_hash
from .artifact import decode_artifact
from .decorator import options_of
from .dispatch import dispatch
from .failures import to_application_error
from .log import DispatchLog
from .options import ArtifactIds, FireOnceOptions, WorkerDefaults
from .setup import CallSetup

_logger = logging.getLogger("temporal_fire_once")
# Set while a guard runs an activity: a second guard of the same call (the plugin and a
# hand-wired interceptor on one worker, or the plugin given twice) sees it.
_guarding: ContextVar[bool] = ContextVar("temporal_fire_once_guarding", default=False)


class FireOnceInterceptor(Interceptor):
    """Guards activities marked with ``@fire_once``, and carries the dispatch scope in workflows.

    :class:`FireOncePlugin` installs it; a worker wired by hand passes it in ``interceptors``.
    """

    def __init__(
        self,
        guard: FireOnceGuard,
        defaults: WorkerDefaults | None = None,
        payload_codec: PayloadCodec | None = None,
        activities: Mapping[str, FireOnceOptions] | None = None,
        wake: WakeHub | None = None,
    ) -> None:
        """``wake``: wakes ``'wait'``ers by pub/sub; without it they only poll. The caller
        closes it (``FireOncePlugin`` makes one and closes it when the worker stops). Anything
        it cannot use is ``FireOnceConfigError`` here, naming it, rather than a failure of every
        guarded call (as TypeScript's ``createFireOnceActivityInterceptor`` checks its input)."""
        _check_wiring(guard, defaults, payload_codec, activities, wake)
        self.guard = guard
        self.wake = wake
        self.defaults = defaults or WorkerDefaults()
        self.payload_codec = payload_codec
        self.activities = dict(activities or {})
        self.log = DispatchLog(guard, self.defaults.dispatch_log_max_len) if self.defaults.dispatch_log else None
        self._workflow = FireOnceWorkflowInterceptor()

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _GuardedActivity(next, self)

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor] | None:
        return self._workflow.workflow_interceptor_class(input)


def _check_wiring(guard: object, defaults: object, codec: object, activities: object, wake: object) -> None:
    def kind(value: object) -> str:
        return type(value).__name__

    if not isinstance(guard, FireOnceGuard):
        raise FireOnceConfigError(f"guard must be a FireOnceGuard (got {kind(guard)})")
    if defaults is not None and not isinstance(defaults, WorkerDefaults):
        # A dict would be ignored when empty and fail untyped otherwise: name the mistake.
        raise FireOnceConfigError(f"defaults must be a WorkerDefaults, e.g. WorkerDefaults(lease_ms=60_000) (got {kind(defaults)})")
    if codec is not None and not isinstance(codec, PayloadCodec):
        raise FireOnceConfigError(f"payload_codec must be a PayloadCodec (got {kind(codec)})")
    if activities is not None:
        if not isinstance(activities, Mapping):
            raise FireOnceConfigError(f"activities must map activity types to FireOnceOptions (got {kind(activities)})")
        for name, options in activities.items():
            if not isinstance(name, str):
                raise FireOnceConfigError(f"activities must map activity types to FireOnceOptions, keyed by the type's name (got a key {name!r})")
            if not isinstance(options, FireOnceOptions):
                raise FireOnceConfigError(
                    f"activities[{name!r}] must be a FireOnceOptions, e.g. FireOnceOptions(job_type='summary') (got {kind(options)})"
                )
    if wake is not None and not isinstance(wake, WakeHub):
        raise FireOnceConfigError(f"wake must be a WakeHub or None (got {kind(wake)})")


T = TypeVar("T")


class _GuardedActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, root: FireOnceInterceptor) -> None:
        super().__init__(next)
        self._root = root

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        options = options_of(input.fn) or self._root.activities.get(info.activity_type)
        if options is None:
            return await self.next.execute_activity(input)
        if _guarding.get():
            # An inner guard would find the outer one's lock, wait the attempt out and fail it
            # retryably, for ever. The outer guard releases its lock on this error.
            raise to_application_error(
                FireOnceConfigError(
                    f"activity {info.activity_type!r} is guarded twice on this worker: give it FireOncePlugin or a FireOnceInterceptor, once",
                    {"activityType": info.activity_type},
                )
            )
        outer = _guarding.set(True)
        try:
            return await self._guarded(input, options, info)
        except FireOnceError as err:
            raise to_application_error(err, {"activityType": info.activity_type}) from None
        finally:
            _guarding.reset(outer)

    async def _guarded(self, input: ExecuteActivityInput, options: FireOnceOptions, info: activity.Info) -> Any:
        started = time.time()  # the attempt's start-to-close timeout runs from about now
        root = self._root
        try:
            target = _target(input, options, info, root)
        except FireOnceError as err:
            if not options.observe_only:
                raise
            # Measuring must never fail a call: one the guard would refuse runs, unlogged.
            _logger.warning("fire-once: observeOnly: the guard would refuse this call (%s: %s); it runs, unlogged", type(err).__name__, err)
            return await self.next.execute_activity(input)
        call = CallSetup(root.guard, root.defaults, options, activity.payload_converter(), root.payload_codec, target, root.log)
        if options.observe_only:
            call.decision("dispatched")
            return await self.next.execute_activity(input)
        try:
            first = await root.guard.acquire(call.target, call.lock_ttl_ms)
            outcome = await _on_held(call, first, info, root.wake, started, _is_sync(input)) if isinstance(first, Held) else first
        except FireOnceKeyConflict:
            call.decision("conflict")
            raise
        if outcome is None:
            return None  # skipped
        if isinstance(outcome, Acquired):
            return await dispatch(call, outcome.lease, lambda: self.next.execute_activity(input))
        call.decision("fast-forwarded")
        if call.target.external_artifact_key is not None:
            return None
        context = {"key": outcome.artifact_key, **call.ids}
        return RawValue(await decode_artifact(outcome.artifact, root.payload_codec, context))


def _target(input: ExecuteActivityInput, options: FireOnceOptions, info: activity.Info, root: FireOnceInterceptor) -> DispatchTarget:
    scope_fn = options.scope
    scope = _user_option("scope", info, lambda: scope_fn(input.args, info)) if scope_fn is not None else scope_from_headers(input.headers)
    if scope is None:
        raise FireOnceMissingScope(
            f"activity {info.activity_type!r} has no dispatch scope: call set_dispatch_scope() in the workflow, or give fire_once a scope option",
            {"activityType": info.activity_type},
        )
    step = options.step or info.activity_type
    job_type = options.job_type or step
    holder = f"{info.workflow_id or ''} {info.workflow_run_id or ''} {info.activity_id}"
    hashed = ""
    if options.on_conflict != "ignore":
        key_fn = options.conflict_key
        values = list(input.args) if key_fn is None else [_user_option("conflict_key", info, lambda: key_fn(input.args))]
        hashed = _args_hash(values, "the arguments" if key_fn is None else "the value of the conflict_key option", info)
    namespace = root.defaults.key_namespace or info.namespace
    external = None
    artifact = options.artifact
    if artifact != "result":
        # The key is built from the scope: a bad one is refused as the guard would refuse it
        # (FireOnceInvalidId), before the user's function sees it.
        encode_id("scope", scope)
        key = _user_option("artifact.external", info, lambda: artifact.external(ArtifactIds(scope, job_type, namespace)))
        external = _external_key(root.guard, key, scope, job_type, namespace, info)
    return DispatchTarget(scope, step, job_type, namespace, external, holder, hashed)


def _args_hash(values: list[Any], what: str, info: activity.Info) -> str:
    """The args hash of ``values``. If the payload converter cannot serialise them, the worker's
    code is at fault, not the call: a non-retryable ``FireOnceConfigError`` naming ``what`` and the
    error's class (never its message, which may quote the value), before anything is locked."""
    try:
        return args_hash(values, activity.payload_converter())
    except Exception as err:
        raise FireOnceConfigError(
            f"{what} of activity {info.activity_type!r} cannot be serialised by the payload converter ({type(err).__name__})",
            {"activityType": info.activity_type},
        ) from None


def _external_key(guard: FireOnceGuard, key: object, scope: str, job_type: str, namespace: str, info: activity.Info) -> str:
    """Check the key an ``external`` option built. Under the guard's prefix it must be in this
    scope's slot and this call's namespace, and not a key the guard writes itself: anything else
    (another scope's or namespace's key, a lock, a result artifact) would fast-forward on a job
    that is not this call's. Keys outside the prefix are the user's own."""
    where = f"the external artifact key of {job_type!r} in scope {scope!r}"
    context = {"activityType": info.activity_type}
    if not isinstance(key, str) or key == "":
        raise FireOnceConfigError(f"{where} must be a non-empty string (got {key!r})", context)
    if not key.startswith(f"{guard.keys.prefix}:"):
        return key
    keys = guard.keys_for(namespace)
    parsed = keys.parse(key)
    if not key.startswith(f"{keys.scope_base(scope)}:") or (parsed is not None and parsed.kind != "external"):
        raise FireOnceConfigError(
            f"{where} is {key!r}: under the guard's prefix it must be a key of this scope in namespace {namespace!r} that the "
            f"guard does not write, such as {keys.external(scope, job_type)!r} "
            "(FireOnceKeys(prefix).for_namespace(ids.namespace).external(ids.scope, ids.job_type))",
            context,
        )
    return key


def _user_option(name: str, info: activity.Info, fn: Callable[[], T]) -> T:
    """Run an option function the user wrote; if it raises or returns an awaitable, the worker's
    configuration is at fault: a non-retryable ``FireOnceConfigError`` naming the option, before
    anything is locked."""
    try:
        value = fn()
    except Exception as err:
        raise FireOnceConfigError(
            f"the {name} option of activity {info.activity_type!r} raised: {type(err).__name__}: {err}", {"activityType": info.activity_type}
        ) from err
    if inspect.isawaitable(value):
        # An async function: its awaitable is no scope, key or conflict value (as in TypeScript,
        # where an async conflictKey hashed alike for every call). Closed, so it is not left unawaited.
        if inspect.iscoroutine(value):
            value.close()
        raise FireOnceConfigError(
            f"the {name} option of activity {info.activity_type!r} returned an awaitable: it must return the value itself (a plain function, not an async one)",
            {"activityType": info.activity_type},
        )
    return value


def _is_sync(input: ExecuteActivityInput) -> bool:
    """Whether the SDK runs the activity in its executor (as ``_ActivityInboundImpl`` decides)."""
    fn: Any = input.fn
    return not (inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)))


async def _on_held(
    call: CallSetup, held: Held, info: activity.Info, hub: WakeHub | None, started: float, sync: bool
) -> FastForward | Acquired | None:
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
                        f"gave up waiting for the in-flight dispatch of step {call.target.step!r} in scope {call.target.scope!r}",
                        max(min(ttl_ms, call.defaults.poll_interval_ms), 0),
                        {"key": held.lock_key, **call.ids},
                    )
                if info.heartbeat_timeout is not None:
                    # With the details this attempt started with: each heartbeat replaces the
                    # activity's details, the progress an earlier attempt's job recorded.
                    activity.heartbeat(*info.heartbeat_details)
                await _sleep(bell, min(poll, remaining), sync)
            first = False
            _raise_if_cancelled()
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
        _logger.warning("fire-once: could not subscribe to the wake channel, polling only: %s", err)
        return None


def _raise_if_cancelled() -> None:
    """End the call as the SDK ends a cancelled sync activity, if its cancellation was requested:
    the SDK cancels an async activity's task, but only flags a sync (thread-pool) one, so a
    waiter must look (``src/core/wait.ts`` stops on the cancellation signal). Worker shutdown
    cancels activities too, once ``graceful_shutdown_timeout`` has run out."""
    if activity.is_cancelled():
        raise CancelledError("Cancelled")


async def _sleep(bell: asyncio.Event | None, seconds: float, sync: bool) -> None:
    """Until the next poll, until a commit or release in the scope rings the bell, or, for a sync
    activity, until its cancellation is requested (looked at every ``_CANCEL_CHECK_S``)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0 and not (sync and activity.is_cancelled()):
        step = min(left, _CANCEL_CHECK_S) if sync else left
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
