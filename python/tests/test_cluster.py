"""The guard on a real 3-master Redis Cluster through ``redis.asyncio.RedisCluster``: every key of
a scope shares one slot (the hash tag), scripts load on whichever node a scope lives on (EVALSHA
falls back to EVAL), and the conformance decisions hold for scopes spread over the slots.
Uses REDIS_CLUSTER_NODES (host:port,...) when set, else spawns the nodes itself."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, AsyncIterator, Iterator

import pytest
from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterNode

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import Acquired, DispatchTarget, FastForward, FireOnceGuard, GuardOptions, Held

from .redis_cluster import spawn_cluster


@pytest.fixture(scope="module")
def cluster_nodes() -> Iterator[list[tuple[str, int]]]:
    given = os.environ.get("REDIS_CLUSTER_NODES")
    if given:
        yield [(h, int(p)) for h, p in (entry.strip().rsplit(":", 1) for entry in given.split(","))]
        return
    with spawn_cluster() as nodes:
        yield nodes.masters


@pytest.fixture
async def cluster(cluster_nodes: list[tuple[str, int]]) -> AsyncIterator[RedisCluster]:
    client = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in cluster_nodes])
    yield client
    await client.aclose()


async def test_the_guard_decides_alike_on_a_cluster_for_scopes_on_every_master(cluster: RedisCluster) -> None:
    prefix = f"pyc-{uuid.uuid4().hex[:8]}"
    guard = FireOnceGuard(cluster, GuardOptions(key_prefix=prefix))
    await guard.claim_protocol()
    scopes = [f"scope-{i}" for i in range(24)]
    slots = {cluster.keyslot(guard.keys.lock(s, "step")) for s in scopes}
    owners = {cluster.get_node_from_key(guard.keys.lock(s, "step")).name for s in scopes}  # type: ignore[union-attr]
    assert len(owners) == 3, "the scopes should spread over every master"
    for scope in scopes:
        keys = [guard.keys.artifact(scope, "job"), guard.keys.lock(scope, "step"), guard.keys.waiters(scope, "step"), guard.keys.wake_channel(scope)]
        assert len({cluster.keyslot(k) for k in keys}) == 1, keys

    async def one_scope(scope: str) -> None:
        target = DispatchTarget(scope, "step", "job", args_hash="h")
        outcomes = await asyncio.gather(*(guard.acquire(target) for _ in range(10)))
        winners = [o for o in outcomes if isinstance(o, Acquired)]
        assert len(winners) == 1 and sum(isinstance(o, Held) for o in outcomes) == 9
        assert await guard.extend(winners[0].lease, 60_000)
        assert (await guard.commit(winners[0].lease, b"result of " + scope.encode())).ours
        again = await guard.acquire(target)
        assert isinstance(again, FastForward) and again.artifact == b"result of " + scope.encode()
        assert await guard.invalidate(scope, "job")

    await asyncio.gather(*(one_scope(s) for s in scopes))
    assert len(slots) > 3
    for scope in scopes:
        await cluster.delete(guard.keys.lock(scope, "step"))
    await cluster.delete(guard.keys.protocol_marker())


async def test_the_eviction_check_reads_every_master_and_names_the_one_that_can_evict(cluster: RedisCluster) -> None:
    from temporal_fire_once.core import FireOnceConfigError, check_eviction_policy

    policies = await check_eviction_policy(cluster)
    assert len(policies) == 3 and all(p.safe for p in policies)
    evicting = cluster.get_primaries()[1]
    await cluster.config_set("maxmemory-policy", "allkeys-lru", target_nodes=evicting)
    try:
        with pytest.raises(FireOnceConfigError) as caught:
            await check_eviction_policy(cluster)
    finally:
        await cluster.config_set("maxmemory-policy", "noeviction", target_nodes=evicting)
    assert caught.value.message.startswith(f"Redis at {evicting.name} has maxmemory-policy allkeys-lru: under memory pressure")
    assert caught.value.message.count("has maxmemory-policy") == 1


async def test_replica_sync_waits_on_the_master_of_the_scope_and_auto_sends_no_wait_without_replicas(cluster: RedisCluster) -> None:
    """The WAIT goes in the script's pipeline to the master that owns the scope, never to another
    node (where it would count none of the script's writes). These masters have no replicas: 'auto'
    waits for none, and a fixed count of 1 falls short and undoes the lock."""
    from temporal_fire_once.core import FireOnceStoreUnavailable

    async def wait_calls() -> dict[str, int]:
        stats = await cluster.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
        return {name: int(info.get("cmdstat_wait", {}).get("calls", 0)) for name, info in stats.items()}

    prefix = f"pyc-{uuid.uuid4().hex[:8]}"
    target = DispatchTarget("waited", "step", "job")
    before = await wait_calls()
    auto = FireOnceGuard(cluster, GuardOptions(key_prefix=prefix))
    outcome = await auto.acquire(target)
    assert isinstance(outcome, Acquired) and (await auto.commit(outcome.lease, b"done")).ours
    assert await wait_calls() == before
    assert await auto.invalidate("waited", "job")

    one = FireOnceGuard(cluster, GuardOptions(key_prefix=prefix, replica_sync={"replicas": 1, "timeout_ms": 50}))
    with pytest.raises(FireOnceStoreUnavailable, match=r"^only 0 of 1 replica\(s\) acknowledged the lock within 50 ms \(replica_sync\)$"):
        await one.acquire(target)
    owner = cluster.get_node_from_key(one.keys.lock("waited", "step"))
    assert owner is not None
    after = await wait_calls()
    # One WAIT on the owner, or two if the owner had to be sent the script by EVAL first.
    assert {name for name, calls in before.items() if after[name] > calls} == {owner.name}
    for _ in range(100):
        if not await cluster.exists(one.keys.lock("waited", "step")):
            break
        await asyncio.sleep(0.05)
    assert not await cluster.exists(one.keys.lock("waited", "step")), "the unreplicated lock should be undone"


async def test_the_plugins_invalidate_records_redis_time_for_scopes_on_every_master_and_the_next_dispatch_comes_after_it(cluster: RedisCluster) -> None:
    # The report orders an `invalidated` entry by its redisTime against the dispatches' fencing
    # tokens, which the scope's master's clock gives: the TIME is read there (a script on the
    # artifact's key), and a read the cluster client could not route would leave the field out.
    prefix = f"pyc-{uuid.uuid4().hex[:8]}"
    plugin = FireOncePlugin(cluster, key_prefix=prefix, key_namespace="default")
    guard = plugin.guard
    await guard.claim_protocol()
    scopes = [f"inv-{i}" for i in range(12)]
    assert len({cluster.get_node_from_key(guard.keys.artifact(s, "job")).name for s in scopes}) == 3  # type: ignore[union-attr]
    for scope in scopes:
        first = await guard.acquire(DispatchTarget(scope, "step", "job"))
        assert isinstance(first, Acquired) and (await guard.commit(first.lease, b"r")).ours
        assert await plugin.invalidate(scope, "job") is True
    raw: Any = await cluster.xrange(guard.keys.log())
    entries = [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in raw]
    invalidated = {e["scope"]: int(e["redisTime"]) for e in entries if e["decision"] == "invalidated"}
    assert sorted(invalidated) == sorted(scopes)
    for scope in scopes:
        again = await guard.acquire(DispatchTarget(scope, "step", "job"))
        assert isinstance(again, Acquired) and again.lease.fencing_token >= invalidated[scope], scope
