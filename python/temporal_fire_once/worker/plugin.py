"""``FireOncePlugin``: one object that guards a worker's ``@fire_once`` activities and carries the
dispatch scope in its workflows (``src/worker/plugin.ts``). Before the worker takes tasks it
refuses a client of a Sentinel's own address, and a Redis that can evict the guard's keys (unless
``allow_evicting_redis``), then claims the
key prefix for protocol v3, and refuses to start on a mismatch. A replayer gets the workflow
side alone, and touches no Redis."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import warnings
import weakref
from typing import Awaitable, Callable

from temporalio.plugin import SimplePlugin
from temporalio.worker import ReplayerConfig, Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from ..core.errors import FireOnceConfigError
from ..core.eviction import EvictionPolicy
from ..core.guard import FireOnceGuard
from ..core.options import GuardOptions, ReplicaSyncOption
from ..core.scripts import RedisClient
from ..core.store_calls import store_call
from ..core.wake import WakeHub
from ..core.worker_check import check_worker_redis
from ..workflow.interceptor import FireOnceWorkflowInterceptor
from .decorator import refuse_marked_workflow_methods
from .interceptor import FireOnceInterceptor
from .log import event_fields
from .options import DefaultInFlightPolicy, LockMode, WorkerDefaults, ttl_warnings

_logger = logging.getLogger("temporal_fire_once")


class FireOncePlugin(SimplePlugin):
    """Pass it in ``Worker(..., plugins=[FireOncePlugin(redis)])``, and in a ``Replayer``'s
    ``plugins`` too: there it only carries the scope, and never uses Redis.

    ``redis`` is a ``redis.asyncio.Redis`` or ``RedisCluster`` made with
    ``decode_responses=False`` (one with ``True`` is refused); the caller owns it. Options and defaults are the TypeScript
    plugin's, snake_cased. The worker's payload codec (``client.data_converter.payload_codec``)
    is applied to artifacts at rest.
    """

    def __init__(
        self,
        redis: RedisClient,
        *,
        key_prefix: str | None = None,
        lock_ttl_ms: int | None = None,
        artifact_ttl_ms: int | None = None,
        store_timeout_ms: int | None = None,
        publish_wake_ups: bool | None = None,
        known_artifacts: int | None = None,
        replica_sync: ReplicaSyncOption | None = None,
        on_in_flight: DefaultInFlightPolicy | None = None,
        poll_interval_ms: int | None = None,
        lock_mode: LockMode | None = None,
        lease_ms: int | None = None,
        max_artifact_bytes: int | None = None,
        key_namespace: str | None = None,
        dispatch_log: bool | None = None,
        dispatch_log_max_len: int | None = None,
        allow_evicting_redis: bool | None = None,
    ) -> None:
        """Each option left ``None`` takes its default, declared once in :class:`GuardOptions`
        or :class:`WorkerDefaults`; a bad value raises ``FireOnceConfigError`` naming it."""
        given = {name: value for name, value in locals().items() if name not in ("self", "redis", "__class__") and value is not None}
        guard_fields = {f.name for f in dataclasses.fields(GuardOptions)} - {"namespace"}
        self.guard = FireOnceGuard(redis, GuardOptions(**{k: v for k, v in given.items() if k in guard_fields}))
        self.defaults = WorkerDefaults(**{k: v for k, v in given.items() if k not in guard_fields})
        options = self.guard.options
        for warning in ttl_warnings(options.artifact_ttl_ms, options.lock_ttl_ms, options.store_timeout_ms, self.defaults):
            warnings.warn(f"fire-once: {warning}", UserWarning, stacklevel=2)
        self._wake: WakeHub | None = None
        self._redis_check: asyncio.Task[list[EvictionPolicy]] | None = None  # the eviction check, shared by workers starting together
        self._running = 0  # workers of this plugin running: they share its wake hub
        self._namespaces: set[str] = set()  # the Temporal namespaces of its workers, for invalidate()
        super().__init__("temporal-fire-once", workflow_runner=_pass_through)

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        refuse_marked_workflow_methods(config.get("workflows", []))
        client = config["client"]
        self._namespaces.add(client.namespace)
        if self._wake is None and self.guard.options.publish_wake_ups:
            self._wake = WakeHub(self.guard.redis)
        interceptor = FireOnceInterceptor(self.guard, self.defaults, client.data_converter.payload_codec, wake=self._wake, client=client)
        config["interceptors"] = [*config.get("interceptors", []), interceptor]
        return config

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        """The workflow side alone (the scope carried into children and continued runs): a replay
        runs no activity, so it needs no Redis and nothing here starts any."""
        config = super().configure_replayer(config)
        config["interceptors"] = [*config.get("interceptors", []), FireOnceWorkflowInterceptor()]
        return config

    async def invalidate(self, scope: str, job_type: str, namespace: str | None = None) -> bool:
        """Delete the stored result of ``(scope, job_type)`` so that the next invocation dispatches
        again, tell the workers' local caches (TypeScript's) to drop it, and record ``invalidated``
        in the dispatch log (unless ``dispatch_log=False``), so that ``fire-once report`` counts the
        next dispatch as a fresh start, not a duplicate: ``FireOnceGuard.invalidate`` records
        nothing. ``namespace`` is the Temporal namespace whose result it is; when ``None``, the
        plugin's ``key_namespace``, else the one namespace its workers run in. A plugin with neither
        (no worker yet, or workers in several namespaces) refuses with ``FireOnceConfigError``
        rather than guess; a bad ID raises the guard's typed error. Either way nothing is deleted or
        logged. Returns whether an artifact existed; a failure to log is logged at WARNING, not
        raised (``FireOncePlugin.invalidate`` in ``src/worker/plugin.ts``)."""
        if namespace is None:
            namespace = self.defaults.key_namespace if self.defaults.key_namespace is not None else self._only_namespace()
        artifact_key = self.guard.keys_for(namespace).artifact(scope, job_type)  # refuses a bad ID before any call
        log = self.defaults.dispatch_log
        # Redis's clock just before the delete orders the entry against the dispatches' fencing
        # tokens however late either lands in the log (docs/operating.md, report); read on the
        # artifact key's node, as on a Cluster the step's tokens are. Unread, the field is left
        # out, and `fire-once report` goes by the entry's stream ID.
        redis_time = await self._redis_time(artifact_key) if log else None
        existed = await self.guard.invalidate(scope, job_type, namespace)
        if log:
            values = {"decision": "invalidated", "namespace": namespace, "scope": scope, "jobType": job_type, "redisTime": redis_time or ""}
            try:
                await self.guard.log_append(namespace, self.defaults.dispatch_log_max_len, [event_fields(values)])
            except Exception as err:
                _logger.warning("fire-once: invalidated %r of scope %r, but could not record it in the dispatch log: %s", job_type, scope, err)
        return existed

    def _only_namespace(self) -> str:
        """The namespace of this plugin's workers, when they all run in one."""
        if len(self._namespaces) == 1:
            return next(iter(self._namespaces))
        workers = "has no worker yet" if not self._namespaces else "has workers in " + " and ".join(json.dumps(ns) for ns in sorted(self._namespaces))
        raise FireOnceConfigError(
            "invalidate: say whose result: keys are filed under each activity's namespace (key_namespace is unset) "
            f"and this plugin {workers}; pass the namespace, e.g. plugin.invalidate(scope, job_type, 'default')"
        )

    async def _redis_time(self, key: str) -> str | None:
        """Redis's clock in microseconds, as a fencing token reads it, on the node of ``key``
        (``redisTimeMicros`` in ``src/core/dispatch-log.ts``); ``None`` if it cannot be read."""
        try:
            seconds, micros = await store_call(self.guard.options.store_timeout_ms, {"key": key}, lambda: self.guard.redis.eval("return redis.call('TIME')", 1, key))
            return str(int(seconds) * 1_000_000 + int(micros))
        except Exception:
            return None

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """Refuse a sentinel's address, or a Redis that can evict the guard's keys (once per
        plugin; a refusal is checked again at the next start), then claim the key prefix for this
        protocol (once per run); run the worker; wait for its dispatch log's last entries
        (:meth:`FireOnceInterceptor.flush`: at most ``store_timeout_ms``), so that its client may
        be closed once ``async with Worker`` has exited or ``run()`` has returned; close the wake
        hub once no worker of this plugin runs: several may share it. A ``Replayer`` does none of
        this (``SimplePlugin.run_replayer`` only replays)."""
        _unmark_never_started(worker)  # refused before, and run again
        self._running += 1
        ran = False  # a worker refused at start logged nothing, and may be a stand-in
        try:
            try:
                await self._check_redis()
                await self.guard.claim_protocol()
            except BaseException:
                _mark_never_started(worker)
                raise
            ran = True
            await next(worker)
        finally:
            self._running -= 1
            try:
                for interceptor in worker.config(active_config=True).get("interceptors", []) if ran else []:
                    if isinstance(interceptor, FireOnceInterceptor) and interceptor.guard is self.guard:
                        await interceptor.flush()
            finally:
                if self._running == 0 and self._wake is not None:
                    await self._wake.close()

    async def _check_redis(self) -> None:
        """The start check (:func:`check_worker_redis`: a refused database, a sentinel's address, the eviction policy), run once for all the
        workers of this plugin, as the TypeScript plugin shares one promise: workers starting
        together wait for the check the first one started, and share its outcome. A passed check is kept; a refusal or an error is dropped
        once it is settled, so the next start checks again. The check runs on even if the worker
        that started it is cancelled: others may be waiting for it."""
        check = self._redis_check
        if check is None:
            check = asyncio.ensure_future(self._start_check())
            check.add_done_callback(self._forget_failed_check)
            self._redis_check = check
        await asyncio.shield(check)

    async def _start_check(self) -> list[EvictionPolicy]:
        return await check_worker_redis(
            self.guard.redis, allow_evicting_redis=self.defaults.allow_evicting_redis, timeout_ms=self.guard.options.store_timeout_ms
        )

    def _forget_failed_check(self, check: asyncio.Task[list[EvictionPolicy]]) -> None:
        if check.cancelled() or check.exception() is not None:  # exception() also marks it retrieved
            if self._redis_check is check:
                self._redis_check = None


def _mark_never_started(worker: Worker) -> None:
    """Mark a worker refused before it started as shut down, as the SDK marks one whose own start
    check fails (``Worker._run``): ``shutdown()``, and so ``async with Worker``'s exit, wait for that
    mark, which only a worker that ran sets, and would wait for ever. The SDK gives a plugin no
    public way to set it; a stand-in without it is left as it is."""
    event = getattr(worker, "_shutdown_complete_event", None)
    if isinstance(event, asyncio.Event):
        event.set()
        _marked.add(worker)


def _unmark_never_started(worker: Worker) -> None:
    """Take the mark back from a worker refused before and run again, so that its ``shutdown()``
    waits for the run again."""
    if worker in _marked:
        _marked.discard(worker)
        getattr(worker, "_shutdown_complete_event").clear()


# The workers _mark_never_started marked, until they are run again.
_marked: weakref.WeakSet[Worker] = weakref.WeakSet()


def _pass_through(runner: WorkflowRunner | None) -> WorkflowRunner:
    """Pass ``temporal_fire_once`` through the workflow sandbox: its workflow side is
    deterministic (it only reads headers and keeps each run's scope in its own interceptor), so
    each workflow run need not re-import it."""
    runner = runner or SandboxedWorkflowRunner()
    if not isinstance(runner, SandboxedWorkflowRunner):
        return runner
    return dataclasses.replace(runner, restrictions=runner.restrictions.with_passthrough_modules("temporal_fire_once"))
