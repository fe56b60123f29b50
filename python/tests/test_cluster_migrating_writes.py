"""The guard's writes while their slot stays migrating for longer than the client follows it
(``test/cluster/migrating-writes.cluster-test.ts``): a slot with many keys, or a slow
``redis-cli --cluster reshard``. Mid-migration a script whose keys are split between the two
masters, or missing where it was asked, is answered ``TRYAGAIN``, and one whose keys all moved
``ASK``; redis-py sends one command at most 16 times, then raises. A commit that gives up so loses
the job's result, and once the lock is gone the next invocation dispatches the job again. Three
masters, the first with a replica, and a spare master with no slot, which no client knows yet.
Nothing is mocked; no assertion reads a clock."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest
import redis
from redis.asyncio import RedisCluster

from temporal_fire_once.core import Acquired, Committed, DispatchTarget, FireOnceGuard, FireOnceStoreUnavailable, GuardOptions, Lease

from .conftest import until
from .redis_cluster import Address, SpawnedCluster, cluster_client, migrate_slot, spawn_cluster

SYNC = {"replicas": 1, "timeout_ms": 200}


@pytest.fixture(scope="module")
def nodes() -> Iterator[SpawnedCluster]:
    with spawn_cluster(replicas_of_first=1, spare=True) as spawned:
        yield spawned


@pytest.fixture
async def cluster(nodes: SpawnedCluster) -> AsyncIterator[RedisCluster]:
    async with cluster_client(nodes) as client:  # the slot map, read before the first command
        yield client


def _guard(cluster: RedisCluster, prefix: str | None = None, replica_sync: Any = False) -> FireOnceGuard:
    # Locks outlive every wait of these tests: a lock left behind must not pass by expiring.
    options = GuardOptions(key_prefix=prefix or f"pym-{uuid.uuid4().hex[:8]}", lock_ttl_ms=600_000, store_timeout_ms=10_000, replica_sync=replica_sync)
    return FireOnceGuard(cluster, options)


def _scope_on(cluster: RedisCluster, guard: FireOnceGuard, master: Address) -> DispatchTarget:
    for _ in range(10_000):
        scope = f"s-{uuid.uuid4().hex[:12]}"
        node = cluster.get_node_from_key(guard.keys.lock(scope, "step"))
        if node is not None and (node.host, node.port) == master:
            return DispatchTarget(scope, "step", "job")
    raise AssertionError(f"no scope hashes to {master}")


async def _lease(guard: FireOnceGuard, target: DispatchTarget) -> Lease:
    outcome = await guard.acquire(target)
    assert isinstance(outcome, Acquired), outcome
    return outcome.lease


def _detours(nodes: SpawnedCluster) -> int:
    """ASK, TRYAGAIN and MOVED replies of every master (the spare too) so far."""
    total = 0
    for address in [*nodes.masters, nodes.spare]:
        assert address is not None
        with redis.Redis(*address) as node:
            stats = node.info("errorstats")
            total += sum(int(stats.get(f"errorstat_{kind}", {}).get("count", 0)) for kind in ("ASK", "TRYAGAIN", "MOVED"))
    return total


async def _outlast(call: Awaitable[Any], nodes: SpawnedCluster, replies: int) -> asyncio.Future[Any]:
    """``call`` running; returned once it has settled or more than ``replies`` detours were answered:
    more than a client that gave up would have drawn."""
    running = asyncio.ensure_future(call)
    before = _detours(nodes)
    await until(lambda: running.done() or _detours(nodes) > before + replies, f"the call to settle or draw {replies} detours")
    return running


def _holds(address: Address, slot: int, key: str) -> bool:
    """Whether the node has ``key``, read by slot: a plain EXISTS on an importing master is answered MOVED."""
    with redis.Redis(*address) as node:
        keys = node.execute_command("CLUSTER GETKEYSINSLOT", slot, 100)  # str or bytes, by the redis-py version
        return key in [k if isinstance(k, str) else k.decode() for k in keys]


async def _next_invocation(cluster: RedisCluster, guard: FireOnceGuard, lease: Lease, owner: Address) -> int:
    """The next invocation, once the lock is gone (its TTL ran out, had the commit left it): 1 if it dispatches again."""
    with redis.Redis(*owner) as node:
        node.delete(lease.lock_key)
    return int(isinstance(await _guard(cluster, guard.keys.prefix).acquire(lease.target), Acquired))


async def _committed(running: asyncio.Future[Any]) -> Any:
    outcome = (await asyncio.gather(running, return_exceptions=True))[0]
    return outcome if isinstance(outcome, BaseException) else (outcome.ours, outcome.stored)


async def test_a_commit_answered_tryagain_past_the_clients_redirections_is_sent_again_until_the_slot_has_moved(
    cluster: RedisCluster, nodes: SpawnedCluster
) -> None:
    first, second = nodes.masters[0], nodes.masters[1]
    guard = _guard(cluster)
    lease = await _lease(guard, _scope_on(cluster, guard, first))
    slot = cluster.keyslot(lease.lock_key)
    # The slot opens with nothing moved: the first master holds the lock but not the artifact key,
    # and answers the commit TRYAGAIN until the lock has moved and the slot is the second's.
    await asyncio.to_thread(migrate_slot, slot, first, second, nodes.masters, [])
    running = await _outlast(guard.commit(lease, b"result"), nodes, 24)  # redis-py sends one command 16 times
    await asyncio.to_thread(migrate_slot, slot, first, second, nodes.masters)
    committed = await _committed(running)
    dispatches = 1 + await _next_invocation(cluster, guard, lease, second)
    assert (dispatches, committed) == (1, (True, True))


async def test_writes_whose_slot_migrates_to_a_master_the_client_does_not_know_yet_fail_retryably_then_land(
    cluster: RedisCluster, nodes: SpawnedCluster
) -> None:
    first, spare = nodes.masters[0], nodes.spare
    assert spare is not None
    guard = _guard(cluster)
    lease = await _lease(guard, _scope_on(cluster, guard, first))
    slot = cluster.keyslot(lease.lock_key)
    # The lock moves to the spare mid-migration: the first master answers ASK for the step's keys,
    # naming a node this client has none of (redis-py then failed with a bare AttributeError).
    await asyncio.to_thread(migrate_slot, slot, first, spare, nodes.masters + [spare], [lease.lock_key.encode()])
    assert cluster.get_node(*spare) is None
    other = DispatchTarget(lease.target.scope, "another-step", "another-job")
    with pytest.raises(FireOnceStoreUnavailable):
        await guard.acquire(other)  # its keys are on no node: the first answers ASK, and nothing is locked
    running = await _outlast(guard.commit(lease, b"result"), nodes, 8)
    await asyncio.to_thread(migrate_slot, slot, first, spare, nodes.masters + [spare])
    committed = await _committed(running)
    dispatches = 1 + await _next_invocation(cluster, guard, lease, spare)
    assert (dispatches, committed) == (1, (True, True))
    assert isinstance(await guard.acquire(other), Acquired)
    # The slot goes back, so that the spare has none and the next test's client knows it not.
    await asyncio.to_thread(migrate_slot, slot, spare, first, nodes.masters + [spare])


async def test_a_commit_with_replica_sync_whose_slot_migrates_to_a_master_the_client_does_not_know_lands_once_it_has_moved(
    cluster: RedisCluster, nodes: SpawnedCluster
) -> None:
    first, spare = nodes.masters[0], nodes.spare
    assert spare is not None
    guard = _guard(cluster, replica_sync=SYNC)
    lease = await _lease(guard, _scope_on(cluster, guard, first))
    slot = cluster.keyslot(lease.lock_key)
    assert cluster.get_node(*spare) is None
    await asyncio.to_thread(migrate_slot, slot, first, spare, nodes.masters + [spare], [lease.lock_key.encode()])
    running = await _outlast(guard.commit(lease, b"result"), nodes, 4)  # the guard follows 2 redirects of a write it waits for
    await asyncio.to_thread(migrate_slot, slot, first, spare, nodes.masters + [spare])
    committed = await _committed(running)
    dispatches = 1 + await _next_invocation(cluster, guard, lease, spare)
    assert (dispatches, committed) == (1, (True, True))


def _lock_moving_before_confirm(cluster: RedisCluster, nodes: SpawnedCluster, monkeypatch: pytest.MonkeyPatch) -> tuple[FireOnceGuard, DispatchTarget, int]:
    """A guard that waits for 1 replica, and a target of the second master (which has none): its
    acquire takes the lock there, then, before its confirm, the slot starts moving to the first
    master (which has one) with the lock. The confirm is answered ASK, then TRYAGAIN where the lock
    went (the waiters key is missing there), and sent again while the slot moves."""
    first, second = nodes.masters[0], nodes.masters[1]
    guard = _guard(cluster, replica_sync=SYNC)
    target = _scope_on(cluster, guard, second)
    lock_key = guard.keys.lock(target.scope, target.step)
    slot = cluster.keyslot(lock_key)
    confirm = guard._replicas.confirm

    async def moving_first(*args: Any) -> Any:
        await asyncio.to_thread(migrate_slot, slot, second, first, nodes.masters, [lock_key.encode()])
        return await confirm(*args)

    monkeypatch.setattr(guard._replicas, "confirm", moving_first)
    return guard, target, slot


def _error_replies(address: Address, kind: str) -> int:
    with redis.Redis(*address) as node:
        return int(node.info("errorstats").get(f"errorstat_{kind}", {}).get("count", 0))


async def test_an_acquire_whose_lock_moves_before_its_confirm_is_acknowledged_where_it_went_once_the_slot_has_moved(
    cluster: RedisCluster, nodes: SpawnedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = nodes.masters[0], nodes.masters[1]
    guard, target, slot = _lock_moving_before_confirm(cluster, nodes, monkeypatch)
    try_agains = _error_replies(first, "TRYAGAIN")
    acquiring = asyncio.ensure_future(guard.acquire(target))
    await until(lambda: acquiring.done() or _error_replies(first, "TRYAGAIN") > try_agains, "the confirm to be answered TRYAGAIN where the lock went")
    await asyncio.to_thread(migrate_slot, slot, second, first, nodes.masters)  # the migration ends while the confirm is sent again
    outcome = await acquiring
    assert isinstance(outcome, Acquired), outcome  # 1 dispatch: its lock re-armed on the first master, whose replica acknowledged it
    with redis.Redis(*first) as owner:
        assert owner.pttl(outcome.lease.lock_key) > 0


async def test_an_acquire_undone_mid_migration_leaves_no_lock_once_the_slot_has_moved(
    cluster: RedisCluster, nodes: SpawnedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The migration goes on until the confirm's tries run out: the lock is undone.
    first, second = nodes.masters[0], nodes.masters[1]
    guard, target, slot = _lock_moving_before_confirm(cluster, nodes, monkeypatch)
    lock_key = guard.keys.lock(target.scope, target.step)
    with pytest.raises(FireOnceStoreUnavailable, match=r"is moving \(TRYAGAIN"):
        await guard.acquire(target)
    before = _detours(nodes)
    await until(lambda: not _holds(first, slot, lock_key) or _detours(nodes) > before + 24, "the undo to outlast the client's redirections")
    await asyncio.to_thread(migrate_slot, slot, second, first, nodes.masters)
    await until(lambda: not _holds(first, slot, lock_key), "the undone lock to be gone where it moved")
