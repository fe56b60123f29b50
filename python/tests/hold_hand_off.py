"""An activity interceptor that holds the guard's ``FireOnceWorkerShutdown`` until the activity is
cancelled: the cancel that reaches a local activity just after its worker's shutdown ended its
wait, taken every time (``test_hand_off_cancel.py``, ``compat_record.py``,
``test_compat_hand_off_cancel.py``). Imports nothing of the plugin: a process of an earlier
release's package uses it too."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor


class HoldHandOff(Interceptor):
    """Holds the guard's ``FireOnceWorkerShutdown`` until the activity is cancelled, then raises it:
    the cancel that reaches a local activity just after its worker's shutdown ended its wait, in
    the time its failure takes to reach the workflow. Sets ``key`` once it holds one."""

    def __init__(self, client: Redis, key: str) -> None:
        self.client, self.key = client, key

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        root = self

        class Inbound(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                try:
                    return await super().execute_activity(input)
                except ApplicationError as err:
                    if err.type != "FireOnceWorkerShutdown":
                        raise
                    await root.client.set(root.key, "held")
                    while not activity.is_cancelled():
                        try:
                            await asyncio.sleep(0.02)
                        except asyncio.CancelledError:
                            pass  # the cancel: raise the failure all the same
                    raise

        return Inbound(next)
