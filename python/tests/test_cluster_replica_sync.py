"""``replica_sync`` on a real Redis Cluster whose slot changes owner under the client: three masters,
the first with a replica, the others with none. A scope of the first master is moved to the second
between two of the guard's calls, so the client's slot map still names the first: the guard's write
is answered with ``MOVED`` (slot moved) or ``ASK`` (slot mid-migration). Its ``WAIT`` must count
the write on the master where it ran, never pass because the old master's replica acknowledged
something else. Nothing is mocked; no assertion reads a clock."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, AsyncIterator, Iterator

import pytest
import redis
from redis.asyncio import RedisCluster

from temporal_fire_once.core import Acquired, DispatchTarget, FastForward, FireOnceGuard, FireOnceStoreUnavailable, GuardOptions, Lease
from temporal_fire_once.core.scripts import PROTOCOL_SCRIPTS

from .redis_cluster import Address, SpawnedCluster, cluster_client, migrate_slot, spawn_cluster

# The first master's replica answers at once; the second master has none, so a WAIT there
# returns 0 after this timeout.
SYNC = {"replicas": 1, "timeout_ms": 1_000}


@pytest.fixture(scope="module")
def nodes() -> Iterator[SpawnedCluster]:
    with spawn_cluster(replicas_of_first=1) as spawned:
        # Every script in every master's cache, as on a cluster that has run a while: a node
        # without one would be sent it by EVAL in a pipeline routed anew, hiding a redirect.
        for address in spawned.masters:
            with redis.Redis(*address) as master:
                for script in PROTOCOL_SCRIPTS:
                    master.script_load(script.lua)
        yield spawned


@pytest.fixture
async def cluster(nodes: SpawnedCluster) -> AsyncIterator[RedisCluster]:
    async with cluster_client(nodes) as client:  # the slot map, read before the first command
        yield client


@pytest.fixture
def guard(cluster: RedisCluster) -> FireOnceGuard:
    return FireOnceGuard(cluster, GuardOptions(key_prefix=f"pyr-{uuid.uuid4().hex[:8]}", replica_sync=SYNC))


def _scope_on(cluster: RedisCluster, guard: FireOnceGuard, master: Address) -> DispatchTarget:
    """A target whose scope lives on ``master`` (with the replica) in the client's slot map."""
    for i in range(10_000):
        node = cluster.get_node_from_key(guard.keys.lock(f"scope-{i}", "step"))
        if node is not None and (node.host, node.port) == master:
            return DispatchTarget(f"scope-{i}", "step", "job")
    raise AssertionError(f"no scope hashes to {master}")


def _wait_calls(address: Address) -> int:
    with redis.Redis(*address) as node:
        return int(node.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))


async def test_an_acquire_whose_slot_moves_before_its_confirm_is_undone_where_it_moved(
    cluster: RedisCluster, guard: FireOnceGuard, nodes: SpawnedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = nodes.masters[0], nodes.masters[1]
    target = _scope_on(cluster, guard, first)
    lock_key = guard.keys.lock(target.scope, target.step)
    confirm = guard._replicas.confirm

    async def moved_first(*args: Any) -> Any:
        # The acquire took the lock on the first master; the slot moves, key and all, before the
        # confirm: the client still routes the confirm to the first master, which answers MOVED.
        await asyncio.to_thread(migrate_slot, cluster.keyslot(lock_key), first, second, nodes.masters)
        return await confirm(*args)

    monkeypatch.setattr(guard._replicas, "confirm", moved_first)
    dispatched = []
    with pytest.raises(FireOnceStoreUnavailable) as caught:
        dispatched.append(await guard.acquire(target))
    assert dispatched == []
    assert caught.value.message == "only 0 of 1 replica(s) acknowledged the lock within 1000 ms (replica_sync)"
    with redis.Redis(*second) as owner:
        for _ in range(100):
            if not owner.exists(lock_key):
                break
            await asyncio.sleep(0.05)
        assert not owner.exists(lock_key), "the unreplicated lock should be undone on the master it moved to"


async def test_auto_waits_on_each_master_for_its_own_replicas(cluster: RedisCluster, nodes: SpawnedCluster) -> None:
    """The first master has a replica and the others none, as after a failover whose old master has
    not come back. ``'auto'`` waited for the fewest any master had: none, so no write waited at all."""
    auto = FireOnceGuard(cluster, GuardOptions(key_prefix=f"pyr-auto-{uuid.uuid4().hex[:8]}", replica_sync="auto"))
    first, second = nodes.masters[0], nodes.masters[1]
    before = [_wait_calls(first), _wait_calls(second)]
    taken = await auto.acquire(_scope_on(cluster, auto, first))
    assert isinstance(taken, Acquired), taken
    assert (await auto.commit(taken.lease, b"result")).stored
    assert isinstance(await auto.acquire(_scope_on(cluster, auto, second)), Acquired)
    # The acquire's confirm and the commit on the first master; nothing to wait for on the second.
    assert [_wait_calls(first) - before[0], _wait_calls(second) - before[1]] == [2, 0]


async def test_auto_asks_the_master_a_write_was_redirected_to_for_its_own_replicas(cluster: RedisCluster, nodes: SpawnedCluster) -> None:
    """The client's map still names the first master (one replica): the renewal is redirected to
    the second (none), where a ``WAIT`` for the first master's 1 could only time out and fail it."""
    auto = FireOnceGuard(cluster, GuardOptions(key_prefix=f"pyr-moved-{uuid.uuid4().hex[:8]}", replica_sync={"replicas": "auto", "timeout_ms": 1_000}))
    taken = await auto.acquire(_scope_on(cluster, auto, nodes.masters[0]))
    assert isinstance(taken, Acquired), taken
    await asyncio.to_thread(migrate_slot, cluster.keyslot(taken.lease.lock_key), nodes.masters[0], nodes.masters[1], nodes.masters)
    assert await auto.extend(taken.lease, 60_000) is True


async def _lease_on_first(cluster: RedisCluster, guard: FireOnceGuard, nodes: SpawnedCluster) -> Lease:
    outcome = await guard.acquire(_scope_on(cluster, guard, nodes.masters[0]))
    assert isinstance(outcome, Acquired), outcome
    return outcome.lease


async def test_a_renewal_and_a_commit_after_their_slot_moved_wait_on_the_new_master(
    cluster: RedisCluster, guard: FireOnceGuard, nodes: SpawnedCluster
) -> None:
    lease = await _lease_on_first(cluster, guard, nodes)
    second = nodes.masters[1]
    await asyncio.to_thread(migrate_slot, cluster.keyslot(lease.lock_key), nodes.masters[0], second, nodes.masters)
    with pytest.raises(FireOnceStoreUnavailable) as caught:
        await guard.extend(lease, 60_000)
    assert caught.value.message == "only 0 of 1 replica(s) acknowledged the lease renewal within 1000 ms (replica_sync)"
    before = _wait_calls(second)
    committed = await guard.commit(lease, b"result")
    assert (committed.ours, committed.stored) == (True, True)
    assert _wait_calls(second) == before + 1  # the commit's WAIT went where the commit ran
    found = await guard.acquire(lease.target)
    assert isinstance(found, FastForward) and found.artifact == b"result"


async def test_a_renewal_sent_mid_migration_waits_on_the_master_its_keys_moved_to(
    cluster: RedisCluster, guard: FireOnceGuard, nodes: SpawnedCluster
) -> None:
    lease = await _lease_on_first(cluster, guard, nodes)
    await cluster.rpush(lease.waiters_key, b"a parked waiter")
    slot = cluster.keyslot(lease.lock_key)
    first, second = nodes.masters[0], nodes.masters[1]
    # The slot left migrating with the step's keys moved: the first master answers ASK for them.
    await asyncio.to_thread(migrate_slot, slot, first, second, nodes.masters, [lease.lock_key.encode(), lease.waiters_key.encode()])
    try:
        with pytest.raises(FireOnceStoreUnavailable) as caught:
            await guard.extend(lease, 60_000)
        assert caught.value.message == "only 0 of 1 replica(s) acknowledged the lease renewal within 1000 ms (replica_sync)"
    finally:
        await asyncio.to_thread(migrate_slot, slot, first, second, nodes.masters)
    with redis.Redis(*second) as owner:
        assert owner.pttl(lease.lock_key) > 0


def _error_replies(address: Address, kind: str) -> int:
    with redis.Redis(*address) as node:
        return int(node.info("errorstats").get(f"errorstat_{kind}", {}).get("count", 0))


async def test_a_commit_mid_migration_answered_tryagain_is_sent_again_until_the_slot_has_moved(
    cluster: RedisCluster, guard: FireOnceGuard, nodes: SpawnedCluster
) -> None:
    dispatched = 0
    lease = await _lease_on_first(cluster, guard, nodes)
    dispatched += 1
    slot = cluster.keyslot(lease.lock_key)
    first, second = nodes.masters[0], nodes.masters[1]
    # The lock has moved to the second master, the artifact key (not written yet) has not: the
    # first master answers ASK, and the second, asked, TRYAGAIN (a multi-key script with a key it
    # does not hold) until the slot is its own.
    await asyncio.to_thread(migrate_slot, slot, first, second, nodes.masters, [lease.lock_key.encode()])
    try_agains = _error_replies(second, "TRYAGAIN")
    committing = asyncio.ensure_future(guard.commit(lease, b"result"))
    for _ in range(600):
        if committing.done() or _error_replies(second, "TRYAGAIN") > try_agains:
            break
        await asyncio.sleep(0.05)
    await asyncio.to_thread(migrate_slot, slot, first, second, nodes.masters)  # the migration ends
    committed = (await asyncio.gather(committing, return_exceptions=True))[0]
    with redis.Redis(*second) as owner:
        owner.delete(lease.lock_key)  # its TTL runs out, had the commit left it
    # The next invocation, by a guard that does not wait for replicas (the second master has none):
    # it fast-forwards to the stored result, or dispatches again if the commit was lost.
    later = FireOnceGuard(cluster, GuardOptions(key_prefix=guard.keys.prefix, replica_sync=False))
    if isinstance(await later.acquire(lease.target), Acquired):
        dispatched += 1
    assert dispatched == 1
    assert not isinstance(committed, BaseException) and (committed.ours, committed.stored) == (True, True), committed


async def test_a_commit_answered_tryagain_until_the_store_timeout_nears_fails_saying_the_slot_is_moving(
    cluster: RedisCluster, guard: FireOnceGuard, nodes: SpawnedCluster
) -> None:
    lease = await _lease_on_first(cluster, guard, nodes)
    slot = cluster.keyslot(lease.lock_key)
    first, second = nodes.masters[0], nodes.masters[1]
    await asyncio.to_thread(migrate_slot, slot, first, second, nodes.masters, [lease.lock_key.encode()])  # never ends
    try:
        with pytest.raises(FireOnceStoreUnavailable) as caught:
            await guard.commit(lease, b"result")
        assert caught.value.retryable
        assert "is moving (TRYAGAIN Multiple keys request during rehashing of slot): the write did not run where its WAIT could count it" in caught.value.message
    finally:
        await asyncio.to_thread(migrate_slot, slot, first, second, nodes.masters)
