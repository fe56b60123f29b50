"""The race storm (``test/faults/race-storm.fault.ts`` in TypeScript) on Python workers: the 20 runs
of each scope start at once, on two worker processes, so all but one of them arrive while the
scope's job (500 ms) is in flight or just done. Expected: exactly one dispatch per scope, counted
in the job's body, and every run completes with that dispatch's result.

PY_RACE_STORM_SCOPES: 20 scopes (400 runs) by default; each scope still sees its 20 runs race,
which is the point."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

from redis.asyncio import Redis

from .py_worker import start_py_worker
from .pyactivities import counter_key
from .pyworkflows import GuardedCall

SCOPES = int(os.environ.get("PY_RACE_STORM_SCOPES", "20"))
RUNS_PER_SCOPE = 20
JOB_MS = 500
SCOPES_IN_FLIGHT = 10  # so that the dev server's backlog stays bounded on 2 cores


async def test_race_storm_on_two_worker_processes_dispatches_once_per_scope_and_every_run_gets_that_result(
    temporal_env: Any, client: Redis, redis_url: str, prefix: str
) -> None:
    queue = f"py-storm-{uuid.uuid4().hex[:8]}"
    workers = await asyncio.gather(*(start_py_worker(temporal_env, redis_url, prefix, queue) for _ in range(2)))
    scopes = [f"storm-{i}-{uuid.uuid4().hex[:8]}" for i in range(SCOPES)]
    in_flight = asyncio.Semaphore(SCOPES_IN_FLIGHT)

    async def storm(scope: str) -> list[Any]:
        async with in_flight:
            handles = await asyncio.gather(
                *(
                    temporal_env.client.start_workflow(GuardedCall.run, args=[scope, "stormJob", [scope, JOB_MS]], id=f"{scope}-{n}", task_queue=queue)
                    for n in range(RUNS_PER_SCOPE)
                )
            )
            return list(await asyncio.gather(*(handle.result() for handle in handles)))

    try:
        results = await asyncio.gather(*(storm(scope) for scope in scopes))
    finally:
        for worker in workers:
            worker.terminate()
        await asyncio.gather(*(worker.wait() for worker in workers))
    counts = await client.mget([counter_key(prefix, scope) for scope in scopes])
    wrong = [
        f"{scope}: {count!r} dispatches, {len(mine)} results, {len({r['nonce'] for r in mine})} distinct"
        for scope, count, mine in zip(scopes, counts, results)
        if count != b"1" or len(mine) != RUNS_PER_SCOPE or len({r["nonce"] for r in mine}) != 1 or {r["counterId"] for r in mine} != {scope}
    ]
    assert wrong == []
