"""The activity interceptor (``src/worker/interceptor.ts``): for an activity marked with
``@fire_once`` (or listed in ``activities``), one decision per call: fast-forward to the stored
result, dispatch under the lock, or apply the in-flight policy (``in_flight``). Every guard error
leaves the activity as an ``ApplicationError`` of the same ``type`` as on the TypeScript side."""

from __future__ import annotations

import inspect
import logging
import time
from contextvars import ContextVar
from typing import Any, Mapping

from temporalio import activity
from temporalio.client import Client
from temporalio.common import RawValue
from temporalio.converter import PayloadCodec
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, WorkflowInterceptorClassInput
from temporalio.worker import WorkflowInboundInterceptor

from .._hand_off import HAND_OFF_HEADER
from ..core.errors import FireOnceConfigError, FireOnceError, FireOnceKeyConflict
from ..core.guard import FireOnceGuard
from ..core.outcomes import Acquired, Held
from ..core.wake import WakeHub
from ..workflow.interceptor import FireOnceWorkflowInterceptor
from .artifact import decode_artifact
from .decorator import options_of
from .dispatch import dispatch
from .failures import to_application_error
from .in_flight import on_held
from .log import DispatchLog
from .options import FireOnceOptions, WorkerDefaults
from .setup import CallSetup
from .target import resolve_target

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
        client: Client | None = None,
    ) -> None:
        """``wake``: wakes ``'wait'``ers by pub/sub; without it they only poll. The caller
        closes it (``FireOncePlugin`` makes one and closes it when the worker stops). ``client``:
        the worker's client (``FireOncePlugin`` passes it), which completes the TypeScript waiters
        parked on a lock held after a result that could not be stored; without it, an ``async def``
        activity's own (``activity.client()``), and a sync one leaves them parked. ``payload_codec``
        seals artifacts at rest and opens them; without it, ``client``'s codec
        (``client.data_converter.payload_codec``, as the plugin passes), else none. Anything
        it cannot use is ``FireOnceConfigError`` here, naming it, rather than a failure of every
        guarded call (as TypeScript's ``createFireOnceActivityInterceptor`` checks its input)."""
        _check_wiring(guard, defaults, payload_codec, activities, wake, client)
        self.guard = guard
        self.wake = wake
        self.client = client
        self.defaults = defaults or WorkerDefaults()
        # Without the client's codec, results would be stored unsealed, and artifacts sealed by
        # other workers handed back still sealed, which the workflow cannot decode.
        self.payload_codec = payload_codec if payload_codec is not None or client is None else client.data_converter.payload_codec
        self.activities = dict(activities or {})
        self.log = DispatchLog(guard, self.defaults.dispatch_log_max_len) if self.defaults.dispatch_log else None
        self._workflow = FireOnceWorkflowInterceptor()

    async def flush(self, timeout_ms: int | None = None) -> int:
        """Wait for the dispatch log's last entries: call it once the worker has stopped, before
        closing the Redis client, or the last batch is cut off (``FireOncePlugin`` calls it as its
        worker stops). It waits at most ``timeout_ms`` (default: the guard's ``store_timeout_ms``)
        and returns how many entries Redis had not answered by then, which are given up (an append
        already sent may still land) with a WARNING; 0 when all were answered, or the log is off.

        >>> import asyncio, redis.asyncio
        >>> interceptor = FireOnceInterceptor(FireOnceGuard(redis.asyncio.Redis()))
        >>> asyncio.run(interceptor.flush())  # nothing logged yet: nothing to wait for
        0
        """
        return 0 if self.log is None else await self.log.flush(timeout_ms)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _GuardedActivity(next, self)

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor] | None:
        return self._workflow.workflow_interceptor_class(input)


def _check_wiring(guard: object, defaults: object, codec: object, activities: object, wake: object, client: object) -> None:
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
    if client is not None and not isinstance(client, Client):
        raise FireOnceConfigError(f"client must be a temporalio Client or None (got {kind(client)})")


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
            target = resolve_target(input, options, info, root.guard, root.defaults.key_namespace)
        except FireOnceError as err:
            if not options.observe_only:
                raise
            # Measuring must never fail a call: one the guard would refuse runs, unlogged.
            _logger.warning("fire-once: observeOnly: the guard would refuse this call (%s: %s); it runs, unlogged", type(err).__name__, err)
            return await self.next.execute_activity(input)
        client = root.client or _activity_client()
        call = CallSetup(root.guard, root.defaults, options, activity.payload_converter(), root.payload_codec, target, root.log, client)
        if options.observe_only:
            call.decision("dispatched")
            return await self.next.execute_activity(input)
        try:
            first = await root.guard.acquire(call.target, call.lock_ttl_ms)
            hand_off = info.is_local and HAND_OFF_HEADER in input.headers
            outcome = await on_held(call, first, info, root.wake, started, _is_sync(input), hand_off) if isinstance(first, Held) else first
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


def _activity_client() -> Client | None:
    """The client of an ``async def`` activity; ``None`` for a sync one, or in a test environment without one."""
    try:
        return activity.client()
    except RuntimeError:
        return None


def _is_sync(input: ExecuteActivityInput) -> bool:
    """Whether the SDK runs the activity in its executor (as ``_ActivityInboundImpl`` decides)."""
    fn: Any = input.fn
    return not (inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)))
