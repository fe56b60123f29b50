"""Python activities of the tests. Each guarded job INCRs a counter the guard does not own."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, cast

from redis.asyncio import Redis
from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from temporal_fire_once import ExternalArtifact, FireOnceKeys, fire_once, fire_once_context
from temporal_fire_once.worker import ArtifactIds

from .codec import REFUSED_MARKER
from .conftest import REPO


def counter_key(prefix: str, counter_id: str) -> str:
    """The same key as counterKey() in test/integration/fixtures/activities.ts."""
    return f"{prefix}:counter:{counter_id}"


# A downstream write that refuses a fencing token lower than the highest it has seen, the fault
# suites' own (KEYS: the highest token, the log of writes; ARGV: the token, the phase).
_FENCED_WRITE = (REPO / "test" / "faults" / "fixtures" / "fenced-write.lua").read_text()


def fenced_keys(prefix: str, counter_id: str) -> dict[str, str]:
    """The keys of :func:`make_fenced_job`'s downstream system and its record of dispatches."""
    return {name: f"{prefix}:{name}:{counter_id}" for name in ("fence", "fence-log", "dispatch-log", "gate")}


def make_fenced_job(redis: Redis, prefix: str, pid: int) -> Any:
    """``fencedJob``: counts its dispatch, records ``<pid> <fencing token>``, writes 'start'
    downstream with its fencing token, holds until its lock is lost or the gate opens, then writes
    'finish'. A write the downstream refuses fails the attempt, retryably."""

    @fire_once()
    @activity.defn(name="fencedJob")
    async def fenced_job(counter_id: str) -> dict[str, Any]:
        await redis.incr(counter_key(prefix, counter_id))
        context = fire_once_context()
        keys = fenced_keys(prefix, counter_id)
        await redis.rpush(keys["dispatch-log"], f"{pid} {context.fencing_token}")

        async def write(phase: str) -> None:
            accepted = await cast(Any, redis.eval(_FENCED_WRITE, 2, keys["fence"], keys["fence-log"], str(context.fencing_token), phase))
            if accepted != 1:
                raise ApplicationError(f"downstream refused the {phase} write of fencing token {context.fencing_token}", type="StaleFencingToken")

        await write("start")
        while not context.lost.is_set() and await redis.get(keys["gate"]) is None:
            await asyncio.sleep(0.05)
        await write("finish")
        return {"counterId": counter_id, "pid": pid, "fencingToken": context.fencing_token}

    return fenced_job


@dataclass
class Pattern:
    """An argument the converter decodes but cannot encode again: ``compiled`` is no JSON value."""

    text: str
    compiled: re.Pattern[str] = field(init=False)

    def __post_init__(self) -> None:
        self.compiled = re.compile(self.text)


def gate_key(prefix: str, counter_id: str) -> str:
    """The key whose existence lets ``gatedJob(counter_id)`` finish: the test sets it."""
    return f"{prefix}:gate:{counter_id}"


def make_activities(redis: Redis, prefix: str) -> list[Any]:
    @fire_once()
    @activity.defn(name="crossJob")
    async def cross_job(counter_id: str, ms: int) -> dict[str, Any]:
        await redis.incr(counter_key(prefix, counter_id))
        await asyncio.sleep(ms / 1000)
        return {"counterId": counter_id, "nonce": str(uuid.uuid4()), "by": "python"}

    @fire_once()
    @activity.defn(name="reportJob")
    async def report_job(counter_id: str, ms: int) -> dict[str, Any]:
        """``crossJob`` under a step of its own: a run's second guarded job."""
        return await cross_job(counter_id, ms)

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

    async def gated(counter_id: str, heartbeat: bool) -> dict[str, Any]:
        """Runs until the test sets its gate key; counts its start, and its end under ``-finished``.
        Stops when cancelled: it also looks at ``activity.is_cancelled()``, since on Python 3.11
        redis-py can swallow the task's cancellation (see python/README.md, known limits)."""
        await redis.incr(counter_key(prefix, counter_id))
        while not await redis.exists(gate_key(prefix, counter_id)):
            if heartbeat:
                activity.heartbeat()  # hears of a cancellation, a pause or a reset in the reply
            if activity.is_cancelled():
                raise CancelledError("Cancelled")
            await asyncio.sleep(0.05)
        await redis.incr(counter_key(prefix, f"{counter_id}-finished"))
        return {"counterId": counter_id, "nonce": str(uuid.uuid4())}

    @fire_once()
    @activity.defn(name="gatedJob")
    async def gated_job(counter_id: str) -> dict[str, Any]:
        return await gated(counter_id, heartbeat=False)

    @fire_once()
    @activity.defn(name="heldJob")
    async def held_job(counter_id: str, size: int) -> Any:
        """Runs until its gate is set, then returns ``size`` bytes of padding; for ``size`` -1, a
        value no payload converter can serialise, and for -2 one that holds the marker the tests'
        ``RefusingCodec`` refuses (the TypeScript ``heldJob``'s twin)."""
        await gated(counter_id, heartbeat=False)
        if size == -2:
            return {"counterId": counter_id, "by": "python", "pad": REFUSED_MARKER}
        if size < 0:
            return object()
        return {"counterId": counter_id, "by": "python", "pad": "x" * size}

    @fire_once()
    @activity.defn(name="heartbeatingGatedJob")
    async def heartbeating_gated_job(counter_id: str) -> dict[str, Any]:
        return await gated(counter_id, heartbeat=True)

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

    async def complete_later(counter_id: str) -> None:
        """Counts, leaves its task token for the test to complete the activity with, and returns
        without a result: ``raise_complete_async``."""
        await redis.incr(counter_key(prefix, counter_id))
        await redis.set(f"{prefix}:task-token:{counter_id}", activity.info().task_token)
        activity.raise_complete_async()

    @fire_once()
    @activity.defn(name="asyncJob")
    async def async_job(counter_id: str) -> str:
        await complete_later(counter_id)
        return "never"  # raise_complete_async() always raises

    @fire_once(artifact=ExternalArtifact(external=lambda ids: FireOnceKeys(prefix).for_namespace(ids.namespace).external(ids.scope, ids.job_type)))
    @activity.defn(name="externalAsyncJob")
    async def external_async_job(counter_id: str) -> None:
        await complete_later(counter_id)

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

    @fire_once(lease_ms=1_000)
    @activity.defn(name="unrenewedJob")
    async def unrenewed_job(counter_id: str, renewals_id: str) -> dict[str, Any]:
        """Runs until its 1 s lease is reported lost (at most 5 s), then three renewal periods
        more; returns whether it was lost, and the renewals counted (by the test) by then."""
        await redis.incr(counter_key(prefix, counter_id))
        lost = fire_once_context().lost
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(lost.wait(), 5)
        renewals = int(await redis.get(counter_key(prefix, renewals_id)) or 0)
        await asyncio.sleep(1.0)
        return {"lost": lost.is_set(), "renewalsWhenLost": renewals}

    def broken_scope(args: Any, info: Any) -> str:
        raise ZeroDivisionError("boom")

    @fire_once(scope=broken_scope)
    @activity.defn(name="brokenScopeJob")
    async def broken_scope_job(counter_id: str) -> None:
        await redis.incr(counter_key(prefix, counter_id))

    async def async_scope(args: Any, info: Any) -> str:
        return "s-async-option"

    async def async_value(*_: Any) -> Any:
        return "s-async-option"

    def counting_job(name: str, **options: Any) -> Any:
        """A guarded activity that only counts its dispatch, under ``options``."""

        @fire_once(**options)
        @activity.defn(name=name)
        async def job(counter_id: str) -> None:
            await redis.incr(counter_key(prefix, counter_id))

        return job

    # An option function written async: each must be refused before anything is dispatched.
    async_option_jobs = [
        counting_job("asyncScopeJob", scope=cast(Any, async_scope)),
        counting_job("asyncConflictKeyJob", conflict_key=async_value),
        counting_job("asyncExternalJob", artifact=ExternalArtifact(external=cast(Any, async_value))),
    ]

    @fire_once(conflict_key=lambda args: {"counterId": args[0], "at": object()})
    @activity.defn(name="unhashableKeyJob")
    async def unhashable_key_job(counter_id: str) -> None:
        await redis.incr(counter_key(prefix, counter_id))

    @fire_once(observe_only=True)
    @activity.defn(name="observeJob")
    async def observe_job(counter_id: str) -> str:
        await redis.incr(counter_key(prefix, counter_id))
        return counter_id

    @fire_once()
    @activity.defn(name="bigIdJob")
    async def big_id_job(counter_id: str, big_id: int) -> dict[str, Any]:
        """Takes an integer past 2**53 (a snowflake ID), which a double cannot carry."""
        await redis.incr(counter_key(prefix, counter_id))
        return {"counterId": counter_id, "id": str(big_id)}

    @fire_once()
    @activity.defn(name="unhashableArgsJob")
    async def unhashable_args_job(counter_id: str, pattern: Pattern) -> None:
        await redis.incr(counter_key(prefix, counter_id))

    return [
        big_id_job,
        *async_option_jobs,
        async_job,
        external_async_job,
        context_job,
        unrenewed_job,
        cross_job,
        report_job,
        flaky_job,
        plain_job,
        fail_while_busy,
        skip_while_busy,
        long_job,
        gated_job,
        held_job,
        heartbeating_gated_job,
        cancellable_job,
        external_job,
        checked_external_job,
        broken_scope_job,
        unhashable_key_job,
        unhashable_args_job,
        observe_job,
    ]
