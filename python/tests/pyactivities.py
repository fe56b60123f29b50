"""Python activities of the tests. Each guarded job INCRs a counter the guard does not own."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable

from redis.asyncio import Redis
from temporalio import activity

from temporal_fire_once import ExternalArtifact, FireOnceKeys, fire_once, fire_once_context
from temporal_fire_once.worker import ArtifactIds


def counter_key(prefix: str, counter_id: str) -> str:
    """The same key as counterKey() in test/integration/fixtures/activities.ts."""
    return f"{prefix}:counter:{counter_id}"


def make_activities(redis: Redis, prefix: str) -> list[Any]:
    @fire_once()
    @activity.defn(name="crossJob")
    async def cross_job(counter_id: str, ms: int) -> dict[str, Any]:
        await redis.incr(counter_key(prefix, counter_id))
        await asyncio.sleep(ms / 1000)
        return {"counterId": counter_id, "nonce": str(uuid.uuid4()), "by": "python"}

    @fire_once(step="flaky")
    @activity.defn(name="flakyJob")
    async def flaky_job(counter_id: str) -> dict[str, Any]:
        count = await redis.incr(counter_key(prefix, counter_id))
        if count == 1:
            raise RuntimeError("the first dispatch fails")
        return {"counterId": counter_id, "count": count}

    @activity.defn(name="plainJob")
    async def plain_job(counter_id: str) -> int:
        return int(await redis.incr(counter_key(prefix, counter_id)))

    @fire_once(step="busy", on_in_flight="fail")
    @activity.defn(name="failWhileBusy")
    async def fail_while_busy(counter_id: str) -> str:
        await redis.incr(counter_key(prefix, counter_id))
        return "ran"

    @fire_once(step="busy", on_in_flight="skip")
    @activity.defn(name="skipWhileBusy")
    async def skip_while_busy(counter_id: str) -> None:
        await redis.incr(counter_key(prefix, counter_id))

    @fire_once(lease_ms=1_000)
    @activity.defn(name="longJob")
    async def long_job(counter_id: str, ms: int) -> dict[str, Any]:
        """Outlives its 1 s lease several times over: only renewal keeps it the only one."""
        await redis.incr(counter_key(prefix, counter_id))
        await asyncio.sleep(ms / 1000)
        return {"counterId": counter_id, "nonce": str(uuid.uuid4())}

    @fire_once()
    @activity.defn(name="cancellableJob")
    async def cancellable_job(counter_id: str) -> str:
        await redis.incr(counter_key(prefix, counter_id))
        while True:  # until cancelled
            activity.heartbeat()
            await asyncio.sleep(0.1)

    @fire_once(artifact=ExternalArtifact(external=lambda ids: FireOnceKeys(prefix).for_namespace(ids.namespace).external(ids.scope, ids.job_type)))
    @activity.defn(name="externalJob")
    async def external_job(counter_id: str) -> None:
        await redis.incr(counter_key(prefix, counter_id))

    # The external key each scope's call builds: all but the user's own key are refused.
    wrong_keys: dict[str, Callable[[ArtifactIds], Any]] = {
        "s-other-scope": lambda ids: FireOnceKeys(prefix).for_namespace(ids.namespace).external("another-scope", ids.job_type),
        "s-other-namespace": lambda ids: FireOnceKeys(prefix).for_namespace("another-namespace").external(ids.scope, ids.job_type),
        "s-lock": lambda ids: FireOnceKeys(prefix).for_namespace(ids.namespace).lock(ids.scope, ids.job_type),
        "s-result": lambda ids: FireOnceKeys(prefix).for_namespace(ids.namespace).artifact(ids.scope, ids.job_type),
        "s-empty": lambda ids: "",
        "s-not-a-string": lambda ids: None,
        "s-users-own": lambda ids: f"{prefix}-own:{ids.scope}",
    }

    @fire_once(artifact=ExternalArtifact(external=lambda ids: wrong_keys[ids.scope](ids)))
    @activity.defn(name="checkedExternalJob")
    async def checked_external_job(counter_id: str) -> None:
        await redis.incr(counter_key(prefix, counter_id))

    @fire_once()
    @activity.defn(name="contextJob")
    async def context_job() -> dict[str, Any]:
        context = fire_once_context()
        return {"lockKey": context.lock_key, "fencing": context.fencing_token, "lost": context.lost.is_set()}

    def broken_scope(args: Any, info: Any) -> str:
        raise ZeroDivisionError("boom")

    @fire_once(scope=broken_scope)
    @activity.defn(name="brokenScopeJob")
    async def broken_scope_job(counter_id: str) -> None:
        await redis.incr(counter_key(prefix, counter_id))

    return [
        context_job,
        cross_job,
        flaky_job,
        plain_job,
        fail_while_busy,
        skip_while_busy,
        long_job,
        cancellable_job,
        external_job,
        checked_external_job,
        broken_scope_job,
    ]
