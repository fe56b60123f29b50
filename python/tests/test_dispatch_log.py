"""The Python dispatch log on a real Redis: decisions reach the stream in the order they were made,
whatever connection of the pool each batch goes out on, and `fire-once report` places a batch that
lands after an invalidation on the side of it where its dispatch was."""

from __future__ import annotations

import asyncio
import dataclasses
import json

from redis.asyncio import Redis
from temporalio.testing import ActivityEnvironment

from temporal_fire_once.core import Acquired, DispatchTarget, FireOnceGuard, GuardOptions
from temporal_fire_once.worker.log import DispatchLog

from .ts_cli import fire_once


async def test_decisions_reach_the_log_in_the_order_they_were_made(client: Redis, prefix: str) -> None:
    """A batch goes out a loop turn after its first decision; the next batch must wait for it. Sent
    at once on another pool connection, a `committed` landed before its `dispatched` whenever the
    first append was slower (a new connection, a script reloaded): the stream, which `report` and
    an operator read in order, showed a step committed before it was dispatched."""
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    real = guard.log_append
    first_held = asyncio.Event()
    release_first = asyncio.Event()
    calls = 0

    async def first_slow(namespace: str | None, max_len: int, entries: list[list[tuple[str, str]]]) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            first_held.set()
            await release_first.wait()  # the first append is slow (a new connection, say)
        return await real(namespace, max_len, entries)

    guard.log_append = first_slow  # type: ignore[method-assign]
    log = DispatchLog(guard, 1_000)
    ids = {"scope": "s", "step": "summarise", "jobType": "summary"}
    key = f"{prefix}:v3:default:log"

    async def decide() -> None:
        log.decision("dispatched", "default", ids)
        await first_held.wait()
        log.decision("committed", "default", ids)
        for _ in range(20):  # loop turns, and Redis round trips, for a second batch sent at once to land
            await asyncio.sleep(0.005)
        release_first.set()
        for _ in range(600):
            if await client.xlen(key) == 2:
                return
            await asyncio.sleep(0.01)

    await ActivityEnvironment().run(decide)
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrange(key)  # type: ignore[assignment]
    assert [fields[b"decision"] for _, fields in entries] == [b"dispatched", b"committed"]


async def test_report_places_a_python_batch_that_lands_after_an_invalidation_by_its_fencing_token(
    client: Redis, prefix: str, redis_url: str
) -> None:
    """Worker a dispatches and commits; its batch is held while an operator invalidates the result
    and worker b dispatches afresh, and lands last. Placed by where it landed, a's dispatch was
    counted after the invalidation with b's and flagged as a duplicate: a false alarm. Both
    dispatches are counted by an INCR of the test's own."""
    target = DispatchTarget(scope="session-1", step="summarise", job_type="summary")
    ids = {"scope": target.scope, "step": target.step, "jobType": target.job_type}
    counter = f"{prefix}:test:dispatches"
    release_a = asyncio.Event()
    guards = {name: FireOnceGuard(client, GuardOptions(key_prefix=prefix)) for name in ("a", "b")}
    real = guards["a"].log_append

    async def held(namespace: str | None, max_len: int, entries: list[list[tuple[str, str]]]) -> int:
        await release_a.wait()
        return await real(namespace, max_len, entries)

    guards["a"].log_append = held  # type: ignore[method-assign]
    logs = {name: DispatchLog(guard, 1_000) for name, guard in guards.items()}
    key = f"{prefix}:v3:default:log"

    async def landed(count: int) -> None:
        for _ in range(600):
            if await client.xlen(key) == count:
                return
            await asyncio.sleep(0.01)

    async def dispatch(name: str) -> None:
        """As the worker's dispatch does: acquire, log, run the job, commit, log."""

        async def run() -> None:
            outcome = await guards[name].acquire(target)
            assert isinstance(outcome, Acquired)
            logs[name].decision("dispatched", "default", ids, outcome.lease)
            await client.incr(counter)
            await guards[name].commit(outcome.lease, b"summary")
            logs[name].decision("committed", "default", ids, outcome.lease)

        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, workflow_id=f"wf-{name}", workflow_run_id=f"run-{name}")
        await env.run(run)

    await dispatch("a")
    code, _, err = await fire_once("invalidate", target.scope, "--job-type", "summary", "--prefix", prefix, "--redis", redis_url, "--force")
    assert (code, err) == (0, "")
    await dispatch("b")
    await landed(3)  # the invalidation, and b's two entries
    release_a.set()
    await landed(5)

    assert await client.get(counter) == b"2"
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrange(key)  # type: ignore[assignment]
    assert [(fields[b"decision"], fields.get(b"workflowId")) for _, fields in entries] == [
        (b"invalidated", None),
        (b"dispatched", b"wf-b"),
        (b"committed", b"wf-b"),
        (b"dispatched", b"wf-a"),
        (b"committed", b"wf-a"),
    ]
    code, out, err = await fire_once("report", "--prefix", prefix, "--redis", redis_url, "--since", "all", "--json")
    assert json.loads(out)["duplicates"] == []
    assert (code, err) == (0, "")
