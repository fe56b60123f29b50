"""``FireOncePlugin``: one object that guards a worker's ``@fire_once`` activities and carries the
dispatch scope in its workflows (``src/worker/plugin.ts``). Before the worker takes tasks it
claims the key prefix for protocol v3, and refuses to start on a mismatch."""

from __future__ import annotations

import dataclasses
from contextlib import asynccontextmanager
from typing import AsyncIterator

from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from ..core.guard import FireOnceGuard
from ..core.options import GuardOptions
from ..core.scripts import RedisClient
from ..core.wake import WakeHub
from .interceptor import FireOnceInterceptor
from .options import InFlightPolicy, LockMode, WorkerDefaults


class FireOncePlugin(SimplePlugin):
    """Pass it in ``Worker(..., plugins=[FireOncePlugin(redis)])``.

    ``redis`` is a ``redis.asyncio.Redis`` or ``RedisCluster`` made with
    ``decode_responses=False``; the caller owns it. Options and defaults are the TypeScript
    plugin's, snake_cased. The worker's payload codec (``client.data_converter.payload_codec``)
    is applied to artifacts at rest.
    """

    def __init__(
        self,
        redis: RedisClient,
        *,
        key_prefix: str = "fire-once",
        lock_ttl_ms: int = 15 * 60 * 1000,
        artifact_ttl_ms: int = 7 * 24 * 60 * 60 * 1000,
        store_timeout_ms: int = 5_000,
        publish_wake_ups: bool = True,
        on_in_flight: InFlightPolicy = "wait",
        poll_interval_ms: int = 250,
        lock_mode: LockMode = "lease",
        lease_ms: int = 30_000,
        max_artifact_bytes: int = 1024 * 1024,
        key_namespace: str | None = None,
        dispatch_log: bool = True,
        dispatch_log_max_len: int = 100_000,
    ) -> None:
        options = GuardOptions(key_prefix, "default", lock_ttl_ms, artifact_ttl_ms, store_timeout_ms, publish_wake_ups)
        self.guard = FireOnceGuard(redis, options)
        self.defaults = WorkerDefaults(
            on_in_flight, poll_interval_ms, lock_mode, lease_ms, max_artifact_bytes, key_namespace, dispatch_log, dispatch_log_max_len
        )
        self._wake: WakeHub | None = None
        super().__init__("temporal-fire-once", run_context=self._claim, workflow_runner=_pass_through)

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        codec = config["client"].data_converter.payload_codec
        if self._wake is None and self.guard.options.publish_wake_ups:
            self._wake = WakeHub(self.guard.redis)
        interceptor = FireOnceInterceptor(self.guard, self.defaults, codec, wake=self._wake)
        config["interceptors"] = [*config.get("interceptors", []), interceptor]
        return config

    @asynccontextmanager
    async def _claim(self) -> AsyncIterator[None]:
        await self.guard.claim_protocol()
        try:
            yield
        finally:
            if self._wake is not None:
                await self._wake.close()


def _pass_through(runner: WorkflowRunner | None) -> WorkflowRunner:
    """Pass ``temporal_fire_once`` through the workflow sandbox: its workflow side is
    deterministic (it only reads headers and sets an attribute on the workflow instance), so each
    workflow run need not re-import it."""
    runner = runner or SandboxedWorkflowRunner()
    if not isinstance(runner, SandboxedWorkflowRunner):
        return runner
    return dataclasses.replace(runner, restrictions=runner.restrictions.with_passthrough_modules("temporal_fire_once"))
