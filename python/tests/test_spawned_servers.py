"""The servers the tests spawn on free ports start even when a port is taken between its pick and
the server's bind: a CI run failed when a cluster node's port went to another process first, and
the spawn waited 20 s for a PONG from a server that had exited. Nor do they take another server's
answer on the port for their own."""

from __future__ import annotations

import socket
from typing import Iterator

import pytest
from redis import Redis

from . import conftest
from .conftest import redis_server
from .redis_cluster import spawn_cluster


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def hand_out(monkeypatch: pytest.MonkeyPatch, taken: int, at: int) -> list[int]:
    """Make ``free_port`` give ``taken`` as its ``at``-th port; every port it gives, in order."""
    given: list[int] = []
    real = conftest.free_port

    def free_port() -> int:
        given.append(taken if len(given) == at else real())
        return given[-1]

    monkeypatch.setattr(conftest, "free_port", free_port)
    return given


def answers(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_redis_server_starts_on_a_new_port_when_its_first_is_taken(monkeypatch: pytest.MonkeyPatch, taken_port: int) -> None:
    given = hand_out(monkeypatch, taken_port, at=0)
    with redis_server() as url:
        assert given[0] == taken_port
        assert url == f"redis://127.0.0.1:{given[1]}"
        with Redis.from_url(url) as client:
            assert client.ping()


def test_a_cluster_starts_on_new_ports_when_a_bus_port_is_taken_and_stops_the_nodes_it_started_first(
    monkeypatch: pytest.MonkeyPatch, taken_port: int
) -> None:
    # Three masters: three ports, then three bus ports; the last bus port is taken.
    given = hand_out(monkeypatch, taken_port, at=5)
    with spawn_cluster() as spawned:
        first_attempt, second_attempt = given[:6], given[6:12]
        assert [port for _, port in spawned.masters] == second_attempt[:3]
        assert [port for port in first_attempt[:3] if answers(port)] == []
        with Redis(port=spawned.masters[0][1]) as node:
            assert b"cluster_state:ok" in node.execute_command("CLUSTER", "INFO")


def test_redis_server_never_takes_another_servers_answer_for_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # The other lane of CI spawns servers at the same time: one may bind the port first and answer PING.
    with redis_server() as other_url:
        other = int(other_url.rsplit(":", 1)[1])
        given = hand_out(monkeypatch, other, at=0)
        with redis_server() as url:
            assert given[0] == other
            assert url == f"redis://127.0.0.1:{given[1]}"
