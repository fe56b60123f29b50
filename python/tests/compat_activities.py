"""The activities of the compatibility tests (``compat_workflows.py``), as
``test/compat/fixtures/activities.ts``: each counts its own dispatches with an INCR the guard does
not own, and records which release's worker ran it. Marked with the ``fire_once`` of whichever
``temporal_fire_once`` the process imports: HEAD's in pytest, an earlier release's in the process
of ``compat_record.py`` or ``compat_worker.py``. Nothing here imports from ``tests``."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio import activity
from temporalio.exceptions import ApplicationError

from temporal_fire_once import fire_once


def counter_key(prefix: str, job: str, scope: str) -> str:
    """The counter a job INCRs as it starts; the guard never touches it."""
    return f"{prefix}:counter:{job}:{scope}"


def dispatched_by_key(prefix: str, scope: str) -> str:
    """The list each dispatch pushes ``<release>:<job>`` onto."""
    return f"{prefix}:dispatched-by:{scope}"


def gate_key(prefix: str, scope: str) -> str:
    """The key whose existence lets ``gatedJob`` in ``scope`` finish."""
    return f"{prefix}:gate:{scope}"


def compat_activities(redis: Redis, prefix: str, release: str) -> list[Any]:
    async def start(job: str, scope: str) -> int:
        await redis.rpush(dispatched_by_key(prefix, scope), f"{release}:{job}")
        return int(await redis.incr(counter_key(prefix, job, scope)))

    @fire_once()
    @activity.defn(name="dispatchJob")
    async def dispatch_job(scope: str, ms: int) -> dict[str, str]:
        """Runs ``ms``, then returns a fresh nonce."""
        await start("dispatchJob", scope)
        await asyncio.sleep(ms / 1000)
        return {"scope": scope, "nonce": str(uuid.uuid4())}

    @fire_once()
    @activity.defn(name="flakyJob")
    async def flaky_job(scope: str) -> dict[str, str]:
        """Fails its first dispatch in ``scope`` (retryably), succeeds on every later one."""
        if await start("flakyJob", scope) == 1:
            raise ApplicationError("the first dispatch fails")
        return {"scope": scope, "nonce": str(uuid.uuid4())}

    @fire_once()
    @activity.defn(name="gatedJob")
    async def gated_job(scope: str) -> dict[str, str]:
        """Heartbeats until the test opens its gate (``gate_key``); a gate opened with
        ``fail-first`` fails the step's first dispatch."""
        dispatch = await start("gatedJob", scope)
        while (gate := await redis.get(gate_key(prefix, scope))) is None:
            activity.heartbeat()
            await asyncio.sleep(0.02)
        if gate == b"fail-first" and dispatch == 1:
            raise ApplicationError("the first dispatch fails")
        return {"scope": scope, "nonce": str(uuid.uuid4())}

    return [dispatch_job, flaky_job, gated_job]
