"""A worker that runs for weeks over millions of scopes: what the guard, the interceptor, the wake
hub and the dispatch log hold, in this process and on Redis, must not grow with the scopes or
namespaces they have seen. Each test drives the real interceptor on a real Redis through many
distinct scopes, counts dispatches with an INCR of its own, then measures the structures by size."""

from __future__ import annotations

import asyncio
import uuid

from redis.asyncio import Redis
from temporalio.converter import DataConverter
from temporalio.testing import ActivityEnvironment

from temporal_fire_once.core import Acquired, DispatchTarget, FireOnceGuard, GuardOptions, WakeHub
from temporal_fire_once.worker.log import DispatchLog

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
    await asyncio.sleep(0.2)
    during = await subscribed(client, name)
    result = DataConverter.default.payload_converter.to_payloads(["held result"])[0].SerializeToString()
    for holder in holders:
        assert isinstance(holder, Acquired)
        await guard.commit(holder.lease, result)
    assert {r.payload.data for r in await asyncio.gather(*waiting)} == {b'"held result"'}
    await asyncio.sleep(0.5)  # the unsubscribes of the last waiters
    after = await subscribed(client, name)
    await hub.close()
    closed = await subscribed(client, name)
    await hub_client.aclose()
    assert await client.get(counter) is None  # every waiter fast-forwarded: none dispatched
    assert (len(during), sum(during)) == (1, len(scopes))  # one connection, every scope's channel on it
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
