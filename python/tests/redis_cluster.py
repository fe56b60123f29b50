"""A Redis Cluster of nodes spawned for a test module: three masters, and when asked a replica of
the first and a spare master with no slot, made with ``redis-cli --cluster``; plus moving a slot
between masters by hand, as ``redis-cli --cluster reshard`` does, for tests that need a slot to
change owner under a client."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Iterator

import pytest
import redis
from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterNode

from .conftest import Spawn, spawn_on_free_ports, stop_servers

Address = tuple[str, int]


@dataclass(frozen=True)
class SpawnedCluster:
    masters: list[Address]
    replicas: list[Address]
    """Replicas of ``masters[0]`` (none unless asked)."""
    spare: Address | None = None
    """A fourth master joined with no slot, as a node added to grow a cluster is (when asked): no
    client learns of it from ``CLUSTER SLOTS`` until a slot moves to it."""


@contextmanager
def spawn_cluster(replicas_of_first: int = 0, spare: bool = False) -> Iterator[SpawnedCluster]:
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        pytest.fail("redis-server and redis-cli are needed (apt-get install -y redis-server), or set REDIS_CLUSTER_NODES")
    nodes_count = 3 + replicas_of_first + int(spare)
    dirs: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []

    def commands(free: list[int]) -> list[Spawn]:
        # The bus ports are chosen too: the default, port + 10000, may be taken or above 65535.
        ports, bus_ports = free[:nodes_count], free[nodes_count:]
        # Directories of the attempt's own: a node that exited may have written its nodes.conf.
        node_dirs = [tempfile.mkdtemp(prefix="fire-once-py-cluster-") for _ in ports]
        dirs.extend(node_dirs)
        return [
            (
                [server, "--port", str(port), "--cluster-port", str(bus), "--bind", "127.0.0.1", "--cluster-enabled", "yes"]
                # A master whose last slot moves away stays a master (by default it turns replica):
                # the spare gives back the slot a test moved to it and stays unknown to clients.
                + ["--cluster-allow-replica-migration", "no"]
                + ["--save", "", "--appendonly", "no", "--dir", d],
                port,
            )
            for port, bus, d in zip(ports, bus_ports, node_dirs)
        ]

    def run(*args: str) -> bytes:
        return subprocess.run([cli, *args], check=True, capture_output=True).stdout.strip()

    try:
        free, procs = spawn_on_free_ports(2 * nodes_count, commands, "a redis-server of the cluster")
        ports = free[:nodes_count]
        nodes = [f"127.0.0.1:{port}" for port in ports]
        run("--cluster", "create", *nodes[:3], "--cluster-replicas", "0", "--cluster-yes")
        first_id = run("-p", str(ports[0]), "cluster", "myid").decode()
        for node in nodes[3 : 3 + replicas_of_first]:
            run("--cluster", "add-node", node, nodes[0], "--cluster-slave", "--cluster-master-id", first_id)
        if spare:
            run("--cluster", "add-node", nodes[-1], nodes[0])
        for port in ports:
            _wait_for(lambda: b"cluster_state:ok" in run("-p", str(port), "cluster", "info"))
        with redis.Redis(port=ports[0]) as first:
            _wait_for(lambda: int(first.wait(replicas_of_first, 100)) == replicas_of_first)
        addresses = [("127.0.0.1", port) for port in ports]
        yield SpawnedCluster(addresses[:3], addresses[3 : 3 + replicas_of_first], addresses[-1] if spare else None)
    finally:
        stop_servers(procs)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


@asynccontextmanager
async def cluster_client(spawned: SpawnedCluster) -> AsyncIterator[RedisCluster]:
    """A ``redis.asyncio`` client of the masters that has read the slot map, as a client in use a while has."""
    client = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in spawned.masters])
    await client.initialize()
    try:
        yield client
    finally:
        await client.aclose()


def migrate_slot(slot: int, source: Address, target: Address, masters: list[Address], keys: list[bytes] | None = None) -> None:
    """Move ``slot`` from ``source`` to ``target``. With ``keys``, stop half-way: the slot is left
    migrating, with those of its keys moved (the source then answers ASK for them); without,
    every key moves and every master is told the new owner (a client with the old map gets MOVED)."""
    with redis.Redis(*source) as src, redis.Redis(*target) as dst:
        src_id, dst_id = src.execute_command("CLUSTER MYID"), dst.execute_command("CLUSTER MYID")
        dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
        src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
        moving = src.execute_command("CLUSTER GETKEYSINSLOT", slot, 1000) if keys is None else keys
        if moving:
            src.execute_command("MIGRATE", target[0], target[1], "", 0, 5000, "KEYS", *moving)
        if keys is not None:
            return
    for address in masters:
        with redis.Redis(*address) as node:
            node.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)


def _wait_for(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the cluster did not come up")
        time.sleep(0.1)
