"""``check_worker_redis``: the plugin's start checks for a worker wired by hand with the core guard
(``test/core/deployment/worker-check.test.ts``), on real redis-servers and a real sentinel. Each
test starts a hand-wired worker as documented, ``check_worker_redis`` first, then one guarded
dispatch, counted here."""

from __future__ import annotations

import logging
import uuid
from typing import AsyncIterator, Awaitable, Callable, Iterator
from urllib.parse import urlparse

import pytest
import redis
from redis.asyncio import Redis, RedisCluster

from temporal_fire_once.core import (
    Acquired,
    DispatchTarget,
    EvictionPolicy,
    FireOnceConfigError,
    FireOnceGuard,
    GuardOptions,
    check_eviction_policy,
    check_worker_redis,
)

from .conftest import REPO, redis_server
from .redis_sentinel import spawn_sentinel

# Either start check, called as a test calls it: with arguments of any kind.
_Check = Callable[..., Awaitable[list[EvictionPolicy]]]


@pytest.fixture(scope="module")
def evicting_url() -> Iterator[str]:
    """A redis-server of its own that evicts under memory pressure."""
    with redis_server() as url:
        with redis.Redis.from_url(url) as admin:
            admin.config_set("maxmemory-policy", "allkeys-lru")
        yield url


@pytest.fixture
async def connect() -> AsyncIterator[list[Redis]]:
    clients: list[Redis] = []
    yield clients
    for client in clients:
        await client.aclose()


async def _start(url: str, clients: list[Redis], allow_evicting_redis: bool = False, prefix: str = "") -> tuple[BaseException | None, int]:
    """A hand-wired worker's start, then one invocation: the error that stopped it, and its dispatches."""
    redis: Redis = Redis.from_url(url)
    clients.append(redis)
    dispatches = 0
    try:
        await check_worker_redis(redis, allow_evicting_redis=allow_evicting_redis)
        guard = FireOnceGuard(redis, GuardOptions(key_prefix=prefix or f"hand-wired-{uuid.uuid4().hex[:8]}"))
        if isinstance(await guard.acquire(DispatchTarget("s", "send", "send")), Acquired):
            dispatches += 1
        return None, dispatches
    except Exception as err:
        return err, dispatches


async def test_a_data_node_that_cannot_evict_in_the_database_it_names_starts_and_dispatches(redis_url: str, connect: list[Redis]) -> None:
    assert await _start(f"{redis_url}/3", connect) == (None, 1)


async def test_a_client_naming_a_database_the_server_lacks_is_refused_naming_it(redis_url: str, connect: list[Redis]) -> None:
    error, dispatches = await _start(f"{redis_url}/16", connect, allow_evicting_redis=True)
    assert dispatches == 0 and isinstance(error, FireOnceConfigError)
    assert error.message.startswith(f"the Redis client names database 16, which Redis at {urlparse(redis_url).netloc} refused (ERR DB index is out of range)")


async def test_the_documented_worker_user_granted_select_starts_in_its_database_and_dispatches(redis_url: str, connect: list[Redis]) -> None:
    # The least-privilege line of docs/reliability.md, plus the +select the refusal asks for; it has
    # no +ping, which the guard never sends.
    prefix, user = f"hand-wired-{uuid.uuid4().hex[:8]}", f"worker-{uuid.uuid4().hex[:8]}"
    line = next(line for line in (REPO / "docs" / "reliability.md").read_text().splitlines() if line.startswith("ACL SETUSER fire-once-worker reset "))
    substitutes = {">CHANGE-ME": ">pw", "~fire-once:*": f"~{prefix}:*", "&fire-once:*": f"&{prefix}:*"}
    with redis.Redis.from_url(redis_url) as admin:
        admin.execute_command("ACL", "SETUSER", user, *(substitutes.get(rule, rule) for rule in line.split(" ")[3:]), "+select")
    url = urlparse(redis_url)
    assert await _start(f"redis://{user}:pw@{url.netloc}/3", connect, prefix=prefix) == (None, 1)


async def test_a_cluster_client_of_a_server_not_in_cluster_mode_is_refused_typed_naming_it(redis_url: str) -> None:
    client: RedisCluster = RedisCluster.from_url(redis_url)
    try:
        with pytest.raises(FireOnceConfigError) as refused:
            await check_worker_redis(client, allow_evicting_redis=True)
    finally:
        await client.aclose()
    assert refused.value.message == (
        f"the client is a RedisCluster, but Redis at {urlparse(redis_url).netloc} refuses CLUSTER SLOTS: it is not in cluster mode (give the plugin a "
        "redis.asyncio.Redis), or the user may not run it (grant +cluster|slots, as docs/reliability.md's Cluster line does)"
    )


@pytest.mark.parametrize("allow_evicting_redis", [False, True])
async def test_a_client_of_a_sentinels_address_is_refused_naming_its_masters(redis_url: str, connect: list[Redis], allow_evicting_redis: bool) -> None:
    master = urlparse(redis_url)
    with spawn_sentinel(str(master.hostname), int(master.port or 0)) as url:
        error, dispatches = await _start(url, connect, allow_evicting_redis)
    assert dispatches == 0 and isinstance(error, FireOnceConfigError)
    assert error.message.startswith(f"Redis at 127.0.0.1:{urlparse(url).port} is a Sentinel, ")
    assert error.message.endswith(f"it monitors orders at {master.hostname}:{master.port}")


async def test_an_evicting_redis_is_refused_and_with_allow_evicting_redis_logged_and_started(
    evicting_url: str, connect: list[Redis], caplog: pytest.LogCaptureFixture
) -> None:
    error, dispatches = await _start(evicting_url, connect)
    assert dispatches == 0 and isinstance(error, FireOnceConfigError)
    assert "has maxmemory-policy allkeys-lru" in error.message
    with caplog.at_level(logging.WARNING, logger="temporal_fire_once"):
        assert await _start(evicting_url, connect, allow_evicting_redis=True) == (None, 1)
    assert [r.getMessage() for r in caplog.records if "allkeys-lru" in r.getMessage() and "allow_evicting_redis is True" in r.getMessage()]


@pytest.mark.parametrize(
    "given, named",
    [
        ({"allow_evicting_redis": "false"}, "allow_evicting_redis must be a boolean (got 'false')"),  # read from an environment variable
        ({"allow_evicting_redis": 1}, "allow_evicting_redis must be a boolean (got 1)"),
        ({"timeout_ms": 0}, "timeout_ms must be a positive integer (got 0)"),
        ({"timeout_ms": -5}, "timeout_ms must be a positive integer (got -5)"),
        ({"timeout_ms": "5000"}, "timeout_ms must be a positive integer (got '5000')"),
        ({"timeout_ms": 10**9}, "timeout_ms must be at most 60000 ms (got 1000000000)"),
    ],
)
@pytest.mark.parametrize("check", [check_worker_redis, check_eviction_policy], ids=["check_worker_redis", "check_eviction_policy"])
async def test_an_argument_it_cannot_use_is_refused_naming_it_before_redis_is_read(
    evicting_url: str, connect: list[Redis], given: dict[str, object], named: str, check: _Check
) -> None:
    # As the plugin's options: a string flag would be truthy and let an evicting Redis through, and
    # a timeout of 0 would blame Redis for not answering. check_eviction_policy, which
    # docs/production-redis.md names beside it for the eviction check alone, takes the same options.
    redis: Redis = Redis.from_url(evicting_url)
    connect.append(redis)
    dispatches = 0
    with pytest.raises(FireOnceConfigError) as refused:
        await check(redis, **given)
        guard = FireOnceGuard(redis, GuardOptions(key_prefix=f"hand-wired-{uuid.uuid4().hex[:8]}"))
        dispatches += isinstance(await guard.acquire(DispatchTarget("s", "send", "send")), Acquired)
    assert refused.value.message == named and dispatches == 0


@pytest.mark.parametrize("check", [check_worker_redis, check_eviction_policy], ids=["check_worker_redis", "check_eviction_policy"])
@pytest.mark.parametrize("given", [redis.Redis(), "redis://127.0.0.1:6379", None])
async def test_a_client_that_is_no_redis_asyncio_client_is_refused_typed(given: object, check: _Check) -> None:
    # A sync client failed untyped ("object dict can't be used in 'await' expression"), as did a URL.
    with pytest.raises(FireOnceConfigError, match=r"^redis must be a redis.asyncio Redis or RedisCluster \(got "):
        await check(given)
