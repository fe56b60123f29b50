"""The least-privilege worker user of docs/reliability.md on a real Redis Cluster (its two lines, read
from the file): a Python worker's start check and guard work under it, and keep working while a slot
migrates (``ASK``, then ``ASKING`` on the importing node), by redis-py's redirects and by the guard's
own (replica sync); and each command of the Cluster line that redis-py sends is needed
(``cluster|info`` is ioredis's: ``test/cluster/acl.cluster-test.ts`` pins it)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Iterator

import pytest
import redis
from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterNode

from temporal_fire_once.core import Acquired, DispatchTarget, FastForward, FireOnceGuard, GuardOptions
from temporal_fire_once.core.eviction import check_eviction_policy

from .conftest import REPO
from .redis_cluster import SpawnedCluster, migrate_slot, spawn_cluster

USER, PASSWORD = "fire-once-worker", "acl-cluster-password"
IOREDIS_ONLY = {"cluster|info"}


def _documented(start: str) -> list[str]:
    lines = [line for line in (REPO / "docs" / "reliability.md").read_text().splitlines() if line.startswith(start)]
    assert len(lines) == 1, f'docs/reliability.md must contain exactly one "{start}…" line'
    return lines[0].split(" ")[3:]


def _cluster_grants() -> list[str]:
    return [rule[1:] for rule in _documented(f"ACL SETUSER {USER} +")]


def _rules(prefix: str, cluster_grants: list[str]) -> list[str]:
    substitutes = {">CHANGE-ME": f">{PASSWORD}", "~fire-once:*": f"~{prefix}:*", "&fire-once:*": f"&{prefix}:*"}
    main = [substitutes.get(rule, rule) for rule in _documented(f"ACL SETUSER {USER} reset ")]
    return [*main, "+wait", *(f"+{grant}" for grant in cluster_grants)]


@pytest.fixture(scope="module")
def nodes() -> Iterator[SpawnedCluster]:
    with spawn_cluster(replicas_of_first=1) as spawned:
        yield spawned


def _grant(nodes: SpawnedCluster, prefix: str, cluster_grants: list[str]) -> None:
    """The documented user on every node (ACL rules are per node); ACL LOG emptied."""
    for address in nodes.masters + nodes.replicas:
        with redis.Redis(*address) as node:
            node.execute_command("ACL", "SETUSER", USER, *_rules(prefix, cluster_grants))
            node.execute_command("ACL", "LOG", "RESET")


def _denied(nodes: SpawnedCluster) -> set[str]:
    objects: set[str] = set()
    for address in nodes.masters + nodes.replicas:
        with redis.Redis(*address, decode_responses=True) as node:
            objects.update(entry["object"] for entry in node.execute_command("ACL", "LOG") if entry["username"] == USER)
    return objects


async def _scenario(nodes: SpawnedCluster, prefix: str) -> dict[str, Any]:
    """The start check, an acquire, two renewals sent while the scope's slot migrates from the
    second master to the first (with the replica), one by redis-py's ASK handling and one by the
    guard's (replica sync), a commit once the slot has moved, and a second invocation. Dispatches
    are counted here."""
    startup = [ClusterNode(h, p) for h, p in nodes.masters]
    cluster = RedisCluster(startup_nodes=startup, username=USER, password=PASSWORD)
    admin = RedisCluster(startup_nodes=startup)
    try:
        await check_eviction_policy(cluster)
        guard = FireOnceGuard(cluster, GuardOptions(key_prefix=prefix, replica_sync=False, store_timeout_ms=3_000))
        synced = FireOnceGuard(cluster, GuardOptions(key_prefix=prefix, replica_sync={"replicas": 1, "timeout_ms": 1_000}, store_timeout_ms=3_000))
        await guard.claim_protocol()
        target = next(
            DispatchTarget(scope, "step", "job")
            for scope in (f"s-{uuid.uuid4().hex}" for _ in range(10_000))
            if (node := cluster.get_node_from_key(guard.keys.lock(scope, "step"))) is not None and (node.host, node.port) == nodes.masters[1]
        )
        dispatches = 0
        outcome = await guard.acquire(target)
        assert isinstance(outcome, Acquired), outcome
        dispatches += 1
        lease = outcome.lease
        await admin.rpush(lease.waiters_key, b"a parked waiter")  # both keys exist, so both move
        slot = cluster.keyslot(lease.lock_key)
        await asyncio.to_thread(migrate_slot, slot, nodes.masters[1], nodes.masters[0], nodes.masters, [lease.lock_key.encode(), lease.waiters_key.encode()])
        renewed: list[Any] = []
        try:
            for renewer in (guard, synced):
                try:
                    renewed.append(await renewer.extend(lease, 60_000))
                except Exception as err:
                    renewed.append(str(err))
        finally:
            await asyncio.to_thread(migrate_slot, slot, nodes.masters[1], nodes.masters[0], nodes.masters)
        committed = await guard.commit(lease, b"result")
        again = await guard.acquire(target)
        if isinstance(again, Acquired):
            dispatches += 1
        return {"renewed": renewed, "stored": committed.stored, "next": isinstance(again, FastForward), "dispatches": dispatches}
    finally:
        await cluster.aclose()
        await admin.aclose()


async def test_a_worker_as_the_documented_user_with_the_cluster_line_keeps_guarding_while_a_slot_migrates(nodes: SpawnedCluster) -> None:
    prefix = f"pyacl-{uuid.uuid4().hex[:8]}"
    _grant(nodes, prefix, _cluster_grants())
    assert await _scenario(nodes, prefix) == {"renewed": [True, True], "stored": True, "next": True, "dispatches": 1}
    assert _denied(nodes) == set()


@pytest.mark.parametrize("command", [grant for grant in _cluster_grants() if grant not in IOREDIS_ONLY])
async def test_every_command_of_the_cluster_line_that_redis_py_sends_is_needed(nodes: SpawnedCluster, command: str) -> None:
    prefix = f"pyacl-{uuid.uuid4().hex[:8]}"
    _grant(nodes, prefix, [grant for grant in _cluster_grants() if grant != command])
    try:
        await _scenario(nodes, prefix)
    except Exception:
        pass
    assert command in _denied(nodes)
