"""A worker that runs for weeks over millions of scopes: what the guard, the interceptor, the wake
hub and the dispatch log hold, in this process and on Redis, must not grow with the scopes or
namespaces they have seen. Each test drives the real interceptor on a real Redis through many
distinct scopes, counts dispatches with an INCR of its own, then measures the structures by size."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio.converter import DataConverter
from temporalio.testing import ActivityEnvironment

from temporal_fire_once.core import Acquired, DispatchTarget, FireOnceGuard, GuardOptions, WakeHub
from temporal_fire_once.worker.log import DispatchLog

from .conftest import until
from .guarded_calls import GuardedCalls, subscribed


async def test_a_burst_of_waiters_on_a_fresh_wake_hub_subscribes_on_one_connection_and_leaves_none_subscribed(
    redis_url: str, client: Redis, prefix: str
) -> None:
    """Waiters of 50 scopes arrive at once on a worker that has just started, its wake hub on a
    client of its own. Each first ``join`` found the hub's pubsub not yet connected and took a
    connection of its own from the pool: all but one stayed subscribed to their scope's channel,
    never read, never unsubscribed and never given back, even once the hub was closed. The pool
    (100 connections) ran out after two such bursts, and with it every join after."""
    name = f"burst-{uuid.uuid4().hex[:8]}"
    hub_client: Redis = Redis.from_url(redis_url, client_name=name)
    hub = WakeHub(hub_client)
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    counter = f"{prefix}:test:dispatches"
    worker = GuardedCalls(client, guard, counter, wake=hub)
    scopes = [f"burst-{i}" for i in range(50)]
    holders = [await guard.acquire(DispatchTarget(scope, "job", "job", "default")) for scope in scopes]  # another worker's
    waiting = [asyncio.ensure_future(worker.call(scope)) for scope in scopes]
    while len(hub._events) < len(scopes):  # every waiter has joined its scope's channel
        await asyncio.sleep(0.01)

    async def all_subscribed() -> bool:
        return sum(await subscribed(client, name)) >= len(scopes)

    await until(all_subscribed, "every scope's channel subscribed", seconds=10)
    during = await subscribed(client, name)
    assert (len(during), sum(during)) == (1, len(scopes))  # one connection, every scope's channel on it
    result = DataConverter.default.payload_converter.to_payloads(["held result"])[0].SerializeToString()
    for holder in holders:
        assert isinstance(holder, Acquired)
        await guard.commit(holder.lease, result)
    assert {r.payload.data for r in await asyncio.gather(*waiting)} == {b'"held result"'}

    async def none_subscribed() -> bool:  # the unsubscribes of the last waiters
        return await subscribed(client, name) == []

    await until(none_subscribed, "the last waiters' unsubscribes", seconds=10)
    after = await subscribed(client, name)
    await hub.close()
    closed = await subscribed(client, name)
    await hub_client.aclose()
    assert await client.get(counter) is None  # every waiter fast-forwarded: none dispatched
    assert (after, closed) == ([], [])
    assert await client.pubsub_channels(f"{prefix}:*") == []


async def test_the_dispatch_log_keeps_nothing_per_namespace_once_its_batches_are_sent(client: Redis, prefix: str) -> None:
    """Decisions of 2,000 namespaces of arbitrary names. The log kept an ``asyncio.Lock`` for each
    namespace it had ever written to, for the life of the worker, although a lock only orders
    the batches of a namespace while one is queued."""
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    log = DispatchLog(guard, 1_000)
    namespaces = [f"tenant-{i}.{uuid.uuid4().hex[:4]}" for i in range(2_000)]
    counter = f"{prefix}:test:dispatches"

    async def decide() -> None:
        for i, namespace in enumerate(namespaces):
            await client.incr(counter)  # the dispatch this decision records
            log.decision("dispatched", namespace, {"scope": f"s{i}", "step": "job", "jobType": "job"})
            if i % 100 == 99:
                await asyncio.sleep(0)  # batches go out as the worker goes on

    await ActivityEnvironment().run(decide)
    assert await log.flush() == 0
    assert int(await client.get(counter) or 0) == len(namespaces)
    assert sum([await client.xlen(guard.keys_for(ns).log()) for ns in namespaces[::100]]) == len(namespaces[::100])
    assert (len(log._pending), len(log._tasks), len(log._sending)) == (0, 0, 0)
    for namespace in namespaces:  # the streams of a test of its own
        await client.delete(guard.keys_for(namespace).log())


async def test_a_worker_driven_through_every_path_over_2000_scopes_holds_nothing_per_scope(redis_url: str, client: Redis, prefix: str) -> None:
    """Fresh fires and fast-forwards of 2,000 scopes, and over 200 more, in three namespaces of
    arbitrary names: failures and releases, invalidations and fires again, waits that time out and
    waits a release ends. Then nothing in this process or on Redis holds an entry per scope: no
    waiter, subscription, task or connection is left, the guard remembers at most
    ``known_artifacts`` keys, and the only keys Redis keeps without a TTL are the namespaces' log
    streams, each capped near its ``dispatch_log_max_len``."""
    name = f"soak-{uuid.uuid4().hex[:8]}"
    redis: Redis = Redis.from_url(redis_url, client_name=name)
    guard = FireOnceGuard(redis, GuardOptions(key_prefix=prefix, known_artifacts=500))
    hub = WakeHub(redis)
    counter = f"{prefix}:test:dispatches"
    worker = GuardedCalls(redis, guard, counter, wake=hub, log_max_len=200)
    namespaces = ["default", "tenant.a-1", "B_2"]
    tasks_before = len(asyncio.all_tasks())

    async def each(scopes: list[str], call: Any) -> None:
        for start in range(0, len(scopes), 25):
            await asyncio.gather(*(call(scope, namespaces[i % 3]) for i, scope in enumerate(scopes[start : start + 25], start)))

    async def fire_twice(scope: str, ns: str) -> None:
        assert await worker.call(scope, ns) == f"result of {scope}"  # a fresh fire
        assert (await worker.call(scope, ns)).payload.data == f'"result of {scope}"'.encode()  # a fast-forward

    async def fail_invalidate_fire(scope: str, ns: str) -> None:
        await asyncio.gather(worker.call(f"{scope}-fails", ns, fail=True), return_exceptions=True)  # released on failure
        await guard.invalidate(scope, "job", ns)
        await worker.call(scope, ns)  # fires again

    async def wait_out(scope: str, ns: str) -> None:
        holder = await guard.acquire(DispatchTarget(f"{scope}-held", "job", "job", ns))
        assert isinstance(holder, Acquired)
        timed_out = await asyncio.gather(worker.call(f"{scope}-held", ns, start_to_close_s=0.05), return_exceptions=True)
        assert "FireOnceInFlight" in repr(timed_out)  # gave up before its deadline
        assert "gave up waiting on the lock of step 'job'" in repr(timed_out) and "or by one that ended without storing its result" in repr(timed_out)
        waiting = asyncio.ensure_future(worker.call(f"{scope}-held", ns))
        await asyncio.sleep(0.05)
        await guard.release(holder.lease)  # the waiter wakes, acquires and fires
        await waiting

    await each([f"s{i}" for i in range(2_000)], fire_twice)
    await each([f"s{i}" for i in range(200)], fail_invalidate_fire)
    await each([f"w{i}" for i in range(200)], wait_out)
    assert await worker.interceptor.flush() == 0

    async def no_channel() -> bool:  # the last unsubscribes
        return await client.pubsub_channels(f"{prefix}:*") == []

    await until(no_channel, "no channel subscribed", seconds=10)

    assert int(await client.get(counter) or 0) == 2_000 + 200 * 2 + 200  # fires, failures and fires again, waiters' fires
    # No waiter, and no channel subscribed on Redis. (The pubsub may still list the last few channels
    # left, until its next read takes the replies to their UNSUBSCRIBEs: as many as were left at once.)
    assert (len(hub._events), await client.pubsub_channels(f"{prefix}:*")) == (0, [])
    assert len(guard._known or {}) <= 500
    log = worker.interceptor.log
    assert log is not None and (len(log._pending), len(log._tasks), len(log._sending)) == (0, 0, 0)
    assert len(asyncio.all_tasks()) <= tasks_before + 1  # the hub's reader, which ends at its next read
    assert len([c for c in await client.client_list() if c.get("name") == name]) <= 101  # the pool's and the hub's
    keys = [key async for key in client.scan_iter(match=f"{prefix}:v3:*", count=1_000)]
    untimed = [key for key in keys if await client.pttl(key) == -1]
    assert sorted(untimed) == sorted(guard.keys_for(ns).log().encode() for ns in namespaces)
    assert max([await client.xlen(key) for key in untimed]) <= 200 + 100  # MAXLEN ~ trims whole nodes of 100 entries
    await hub.close()
    await redis.aclose()
