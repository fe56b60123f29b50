"""The stale owner (``test/faults/stale-owner.fault.ts`` in TypeScript) on Python workers: holder A's
lease runs out while A's worker process is frozen (SIGSTOP: a GC pause, a stalled VM), B takes the
lock and dispatches, then A wakes up and fails. Expected: A's compare-and-delete release is
refused and logged, B's lock survives, the downstream system refuses A's late write by its lower
fencing token, and both runs complete with B's result: 2 dispatches, A's (gone stale) and B's. A
and B run on two task queues, one per worker, so that the frozen worker cannot be handed B's
tasks."""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import FireOnceKeys, parse_lock

from .conftest import equals, until
from .py_worker import start_py_worker
from .pyactivities import counter_key, fenced_keys, make_fenced_job
from .pyworkflows import GuardedCall

LEASE_MS = 3_000
STEP = "fencedJob"


async def test_a_holder_frozen_past_its_lease_is_fenced_off_its_release_refused_and_both_runs_get_the_new_holders_result(
    temporal_env: Any, client: Redis, redis_url: str, prefix: str
) -> None:
    scope = f"stale-{uuid.uuid4().hex[:8]}"
    queue_a, queue_b = f"py-stale-a-{uuid.uuid4().hex[:8]}", f"py-stale-b-{uuid.uuid4().hex[:8]}"
    keys = fenced_keys(prefix, scope)
    lock_key = FireOnceKeys(prefix).lock(scope, STEP)
    log_key = f"{prefix}:v3:default:log"

    async def lock() -> Any:
        value: Any = await client.get(lock_key)  # bytes: the client does not decode
        return parse_lock(value or b"")

    worker_a = await start_py_worker(temporal_env, redis_url, prefix, queue_a, lease_ms=LEASE_MS)
    plugin = FireOncePlugin(client, key_prefix=prefix, lease_ms=LEASE_MS, store_timeout_ms=2_000)
    fenced_job = make_fenced_job(client, prefix, os.getpid())
    try:
        async with Worker(temporal_env.client, task_queue=queue_b, workflows=[GuardedCall], activities=[fenced_job], plugins=[plugin]):
            # A dispatches on worker A, writes 'start' downstream with its fencing token, and holds.
            run_a = await temporal_env.client.start_workflow(GuardedCall.run, args=[scope, STEP, [scope]], id=f"{scope}-a", task_queue=queue_a)
            await until(lambda: client.llen(keys["dispatch-log"]), "A to dispatch")
            lock_a = await lock()
            assert lock_a is not None and run_a.id in lock_a.holder

            # Freeze A's worker until its lease has run out.
            worker_a.send_signal(signal.SIGSTOP)
            await until(lambda: equals(client.exists(lock_key), 0), "A's lease to run out while A is frozen")

            # B acquires (a greater fencing token), writes 'start' downstream and holds.
            run_b = await temporal_env.client.start_workflow(GuardedCall.run, args=[scope, STEP, [scope]], id=f"{scope}-b", task_queue=queue_b)
            await until(lambda: equals(client.llen(keys["dispatch-log"]), 2), "B to dispatch")
            lock_b = await lock()
            assert lock_b is not None and run_b.id in lock_b.holder
            assert lock_b.fencing_token > lock_a.fencing_token
            assert await client.lrange(keys["dispatch-log"], 0, -1) == [
                f"{worker_a.pid} {lock_a.fencing_token}".encode(),
                f"{os.getpid()} {lock_b.fencing_token}".encode(),
            ]

            # A wakes up: its renewal finds the lock lost, its job stops and fails, and its release
            # is refused, in the dispatch log with A's fencing token.
            worker_a.send_signal(signal.SIGCONT)

            async def refused() -> bool:
                entries: Any = await client.xrange(log_key)
                return any(f[b"decision"] == b"release-refused" and f[b"fencingToken"] == str(lock_a.fencing_token).encode() for _, f in entries)

            await until(refused, "A's refused release in the dispatch log")
            # B's lock survived A's release, token and all; the downstream took B's write and
            # refused A's late one.
            assert await lock() == lock_b
            assert await client.lrange(keys["fence-log"], 0, -1) == [
                f"accepted start {lock_a.fencing_token}".encode(),
                f"accepted start {lock_b.fencing_token}".encode(),
                f"refused finish {lock_a.fencing_token}".encode(),
            ]

            # B finishes; A's retry waits for B and fast-forwards to B's result.
            await client.set(keys["gate"], "1")
            result_b = await run_b.result()
            assert result_b == {"counterId": scope, "pid": os.getpid(), "fencingToken": lock_b.fencing_token}
            assert await run_a.result() == result_b
            assert (await client.lrange(keys["fence-log"], 0, -1))[3:] == [f"accepted finish {lock_b.fencing_token}".encode()]
    finally:
        worker_a.send_signal(signal.SIGCONT)
        worker_a.terminate()
        await worker_a.wait()
    assert await client.get(counter_key(prefix, scope)) == b"2"

