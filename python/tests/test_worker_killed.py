"""A worker SIGKILLed in the middle of a guarded dispatch (``test/faults/worker-killed.fault.ts``
in TypeScript): nothing releases the dead holder's lock and nothing renews it, so it lives one
lease. No other attempt dispatches while it lives; once it expires, exactly one does, on another
worker, and the run completes with that dispatch's result."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio import activity
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin, fire_once
from temporal_fire_once.core import FireOnceKeys, parse_lock

from .py_worker import start_py_worker
from .pyactivities import counter_key
from .pyworkflows import GuardedCall

LEASE_MS = 6_000


async def test_a_holder_killed_mid_job_is_dispatched_again_once_after_its_lease_and_never_before(
    temporal_env: Any, client: Redis, redis_url: str, prefix: str
) -> None:
    queue = f"py-{uuid.uuid4().hex[:8]}"
    lock_key = FireOnceKeys(prefix).lock("s-killed", "crashableJob")
    counter = counter_key(prefix, "killed")
    killed = await start_py_worker(temporal_env, redis_url, prefix, queue, lease_ms=LEASE_MS)
    # 1.5 s attempts, so that several find the dead holder's lock before it expires.
    handle = await temporal_env.client.start_workflow(
        GuardedCall.run, args=["s-killed", "crashableJob", ["killed"], None, 30, [1_500]], id=f"{queue}-run", task_queue=queue
    )
    try:
        while await client.get(counter) != b"1":
            await asyncio.sleep(0.02)
    except BaseException:
        killed.kill()
        raise
    value: Any = await client.get(lock_key)  # bytes: the client does not decode
    dead = parse_lock(value or b"")
    assert dead is not None

    @fire_once()
    @activity.defn(name="crashableJob")
    async def crashable_job(counter_id: str) -> dict[str, str]:
        await client.incr(counter_key(prefix, counter_id))
        await asyncio.sleep(0.5)  # so that a snapshot sees the dispatch before the run ends
        return {"by": "the other worker"}

    # Snapshots of (the lock's holder, dispatches), each read in one MULTI, until the run ends.
    snapshots: list[tuple[str | None, int]] = []
    redispatched_at: float | None = None
    plugin = FireOncePlugin(client, key_prefix=prefix, lease_ms=LEASE_MS, store_timeout_ms=2_000, poll_interval_ms=50)
    # The other worker polls before the kill (attempt 1 is the killed one's already), so the retries
    # that come while the dead holder's lock lives find a worker.
    async with Worker(temporal_env.client, task_queue=queue, workflows=[GuardedCall], activities=[crashable_job], plugins=[plugin]):
        killed.send_signal(signal.SIGKILL)
        await killed.wait()
        # When the dead holder's lock expires, by Redis's clock: no dispatch may be seen before it.
        ttl_s = await client.pttl(lock_key) / 1000
        expires_at = time.monotonic() + ttl_s
        result = asyncio.ensure_future(handle.result())
        while not result.done():
            pipe: Any = client.pipeline(transaction=True)
            lock, count = await pipe.get(lock_key).get(counter).execute()
            holder = parse_lock(lock) if lock is not None else None
            snapshots.append((holder.token if holder else None, int(count or 0)))
            if int(count or 0) >= 2 and redispatched_at is None:
                redispatched_at = time.monotonic()
            await asyncio.wait([result], timeout=0.05)
        assert await result == {"by": "the other worker"}
    assert await client.get(counter) == b"2"
    while_dead = [count for token, count in snapshots if token == dead.token]
    assert while_dead and set(while_dead) == {1}  # the window was watched, and nothing dispatched in it
    # Seen late under load, never early: only a lock taken from the dead holder could be seen before.
    assert redispatched_at is not None and redispatched_at >= expires_at - 0.1
    started = [e.activity_task_started_event_attributes async for e in handle.fetch_history_events() if e.HasField("activity_task_started_event_attributes")]
    assert started[-1].attempt >= 2  # a retry dispatched, not the killed attempt
