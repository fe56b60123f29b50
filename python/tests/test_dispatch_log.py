"""The Python dispatch log on a real Redis: decisions reach the stream in the order they were made,
whatever connection of the pool each batch goes out on."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis
from temporalio.testing import ActivityEnvironment

from temporal_fire_once.core import FireOnceGuard, GuardOptions
from temporal_fire_once.worker.log import DispatchLog


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
