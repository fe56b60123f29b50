"""Guarded calls without a Temporal server: the real ``FireOnceInterceptor`` runs an activity
``job(scope, fail)`` in an ``ActivityEnvironment``, with the info a worker of any namespace would
give it. The job INCRs a counter the guard does not own, so a test counts dispatches itself."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from redis.asyncio import Redis
from temporalio.testing import ActivityEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from temporal_fire_once.core import FireOnceGuard, WakeHub
from temporal_fire_once.worker import FireOnceInterceptor, FireOnceOptions, WorkerDefaults


class _Run(ActivityInboundInterceptor):
    """The end of the chain: the activity function itself."""

    def __init__(self) -> None:
        pass

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        return await input.fn(*input.args)


class GuardedCalls:
    """A worker's interceptor, with ``'wait'`` as its in-flight policy and a 50 ms poll."""

    def __init__(self, redis: Redis, guard: FireOnceGuard, counter: str, wake: WakeHub | None = None, log_max_len: int = 100_000) -> None:
        options = FireOnceOptions(scope=lambda args, info: str(args[0]))
        defaults = WorkerDefaults(poll_interval_ms=50, dispatch_log_max_len=log_max_len)
        self.interceptor = FireOnceInterceptor(guard, defaults, wake=wake, activities={"job": options})
        self._inbound = self.interceptor.intercept_activity(_Run())

        async def job(scope: str, fail: bool = False) -> str:
            await redis.incr(counter)
            if fail:
                raise RuntimeError(f"job of {scope} failed")
            return f"result of {scope}"

        self._job = job

    async def call(self, scope: str, namespace: str = "default", fail: bool = False, start_to_close_s: float = 10.0) -> Any:
        """One call of ``job`` on ``scope``: its result, or a ``RawValue`` of the stored one when it fast-forwards."""
        env = ActivityEnvironment()
        timeout = timedelta(seconds=start_to_close_s)
        env.info = dataclasses.replace(env.info, namespace=namespace, activity_type="job", start_to_close_timeout=timeout, heartbeat_timeout=None)
        return await env.run(self._inbound.execute_activity, ExecuteActivityInput(fn=self._job, args=[scope, fail], executor=None, headers={}))


async def subscribed(probe: Redis, name: str) -> list[int]:
    """How many channels each of the server's connections named ``name`` is subscribed to, those with any."""
    return [int(c["sub"]) for c in await probe.client_list() if c.get("name") == name and int(c["sub"]) > 0]
