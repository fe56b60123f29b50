"""The dispatch log (PROTOCOL.md section 9): one stream entry per decision, written in the
background so a decision never waits for its log line, and batched per event-loop turn; one batch
of a namespace at a time, so the stream keeps the order of the decisions. ``flush()`` waits for
the batches begun, as ``DispatchLog.flush`` does in ``src/core/dispatch-log.ts``."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from temporalio import activity

from ..core.guard import FireOnceGuard
from ..core.options import positive_int
from ..core.outcomes import Lease
from ..core.store_calls import holder_id

EVENT_FIELDS = (
    "decision", "namespace", "scope", "step", "jobType", "workflowId", "runId", "activityId", "activityType", "attempt",
    "holder", "fencingToken", "redisTime", "late", "ts",
)
"""Stream field names, in order: ``EVENT_FIELDS`` of ``src/core/dispatch-log.ts``, whose CLI reads them back."""
_logger = logging.getLogger("temporal_fire_once")
_Batch = list[list[tuple[str, str]]]


def event_fields(values: dict[str, str]) -> list[tuple[str, str]]:
    """One entry's fields in :data:`EVENT_FIELDS` order, empty values left out, ``ts`` (epoch
    milliseconds) now unless given: ``eventFields`` of ``src/core/dispatch-log.ts``."""
    values = {"ts": str(int(time.time() * 1000)), **values}
    return [(name, values[name]) for name in EVENT_FIELDS if values.get(name, "") != ""]


class _Turns:
    """The batches of one namespace, sent one at a time: the lock, and how many batches hold or await it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class DispatchLog:
    """Appends decisions through log-append.lua; a failure to log is logged, never raised."""

    def __init__(self, guard: FireOnceGuard, max_len: int) -> None:
        self._guard = guard
        self._max_len = max_len
        self._pending: dict[str, _Batch] = {}
        self._tasks: dict[asyncio.Task[Any], _Batch] = {}  # each batch begun and not yet answered
        # One append in flight per namespace: sent at once, a batch could go out on another pool
        # connection and land before the one ahead of it (a `committed` before its `dispatched`).
        # A namespace's lock lives while a batch of it holds or awaits it: kept for good, a worker
        # would keep one for every namespace it ever logged (docs/reliability.md, 151).
        self._sending: dict[str, _Turns] = {}

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
        if lease is not None:
            values["holder"] = holder_id(lease.token)
        token = lease.fencing_token if lease is not None else fencing
        if token is not None:
            values["fencingToken"] = str(token)
        entry = event_fields(values)
        batch = self._pending.setdefault(namespace, [])
        batch.append(entry)
        if len(batch) == 1:
            task = asyncio.get_running_loop().create_task(self._send(namespace, batch))
            self._tasks[task] = batch
            task.add_done_callback(self._forget)

    async def flush(self, timeout_ms: int | None = None) -> int:
        """Wait until Redis has answered every batch begun so far, for at most ``timeout_ms``
        (default: the guard's ``store_timeout_ms``), so that a Redis gone or stalled cannot keep a
        stopping worker from stopping. Returns how many entries had no answer by then (0 when all
        had): those are given up, with a WARNING naming their count. An append already sent may
        still land; the others are lost."""
        bound = self._guard.options.store_timeout_ms if timeout_ms is None else positive_int("timeout_ms", timeout_ms)
        begun = list(self._tasks)
        if not begun:
            return 0
        await asyncio.wait(begun, timeout=bound / 1000)
        unanswered = [task for task in begun if not task.done()]
        lost = sum(len(self._tasks.get(task, ())) for task in unanswered)
        for task in unanswered:
            task.cancel()
        if unanswered:
            await asyncio.wait(unanswered)  # a cancelled append leaves nothing running on the client
            _logger.warning("fire-once: %d dispatch-log entries had no answer from Redis within %d ms; given up, they may be lost", lost, bound)
        return lost

    async def _send(self, namespace: str, batch: _Batch) -> None:
        try:
            await asyncio.sleep(0)
            turns = self._sending.get(namespace)
            if turns is None:
                turns = self._sending[namespace] = _Turns()
            turns.users += 1
            try:
                # Locks wake in the order they were awaited: batches go out in the order they were begun.
                async with turns.lock:
                    self._close(namespace, batch)
                    try:
                        await self._guard.log_append(namespace, self._max_len, batch)
                    except Exception as err:
                        _logger.warning("fire-once: could not append %d dispatch-log entries: %s", len(batch), err)
            finally:
                turns.users -= 1
                if turns.users == 0:
                    del self._sending[namespace]
        finally:
            self._close(namespace, batch)  # given up by flush() before it went out: the next decision begins another

    def _close(self, namespace: str, batch: _Batch) -> None:
        """Take no more entries into ``batch``."""
        if self._pending.get(namespace) is batch:
            del self._pending[namespace]

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
