"""The dispatch log (PROTOCOL.md section 9): one stream entry per decision, written in the
background so a decision never waits for its log line, and batched per event-loop turn; one batch
of a namespace at a time, so the stream keeps the order of the decisions."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from temporalio import activity

from ..core.guard import FireOnceGuard
from ..core.outcomes import Lease
from ..core.store_calls import holder_id

_FIELDS = ("decision", "namespace", "scope", "step", "jobType", "workflowId", "runId", "activityId", "activityType", "attempt")
_logger = logging.getLogger("temporal_fire_once")


class DispatchLog:
    """Appends decisions through log-append.lua; a failure to log is logged, never raised."""

    def __init__(self, guard: FireOnceGuard, max_len: int) -> None:
        self._guard = guard
        self._max_len = max_len
        self._pending: dict[str, list[list[tuple[str, str]]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        # One append in flight per namespace: sent at once, a batch could go out on another pool
        # connection and land before the one ahead of it (a `committed` before its `dispatched`).
        self._sending: dict[str, asyncio.Lock] = {}

    def decision(self, decision: str, namespace: str, ids: dict[str, str], lease: Lease | None = None, fencing: int | None = None) -> None:
        info = activity.info()
        values = {
            "decision": decision,
            "namespace": namespace,
            "scope": ids.get("scope", ""),
            "step": ids.get("step", ""),
            "jobType": ids.get("jobType", ""),
            "workflowId": info.workflow_id or "",
            "runId": info.workflow_run_id or "",
            "activityId": info.activity_id,
            "activityType": info.activity_type,
            "attempt": str(info.attempt),
        }
        entry = [(name, values[name]) for name in _FIELDS if values[name] != ""]
        if lease is not None:
            entry.append(("holder", holder_id(lease.token)))
        token = lease.fencing_token if lease is not None else fencing
        if token is not None:
            entry.append(("fencingToken", str(token)))
        entry.append(("ts", str(int(time.time() * 1000))))
        batch = self._pending.setdefault(namespace, [])
        batch.append(entry)
        if len(batch) == 1:
            task = asyncio.get_running_loop().create_task(self._flush(namespace))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _flush(self, namespace: str) -> None:
        await asyncio.sleep(0)
        # Locks wake in the order they were awaited: batches go out in the order they were begun.
        async with self._sending.setdefault(namespace, asyncio.Lock()):
            entries = self._pending.pop(namespace, [])
            try:
                await self._guard.log_append(namespace, self._max_len, entries)
            except Exception as err:
                _logger.warning("fire-once: could not append %d dispatch-log entries: %s", len(entries), err)
