"""``replica_sync`` on a real primary with one replica, both spawned here (the Python side of
``test/core/replica-sync.test.ts``). The replica is frozen with SIGSTOP, as a hung or partitioned
replica would be: the primary still counts it as attached, but it acknowledges nothing, so every
``WAIT`` falls short. Nothing is mocked; no assertion reads a clock."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest
import redis
from redis.asyncio import Redis

from temporal_fire_once.core import (
    Acquired,
    DispatchTarget,
    FastForward,
    FireOnceConfigError,
    FireOnceGuard,
    FireOnceStoreUnavailable,
    GuardOptions,
    Lease,
)
from temporal_fire_once.core.options import ReplicaSyncSetting
from temporal_fire_once.worker import FireOncePlugin

from .conftest import redis_server, until


@dataclass(frozen=True)
class ReplicaSet:
    primary: str
    replica: str
    replica_pid: int


def _until(check: Callable[[], bool], what: str, tries: int = 400) -> None:
    """Poll ``check`` (a blocking call each time) until it holds; fail naming ``what``."""
    for _ in range(tries):
        if check():
            return
        time.sleep(0.05)
    pytest.fail(f"gave up waiting for {what}")


def _acknowledged(primary: redis.Redis) -> bool:
    return int(primary.wait(1, 200)) == 1


@pytest.fixture(scope="module")
def replica_set() -> Iterator[ReplicaSet]:
    with ExitStack() as stack:
        primary_url, replica_url = stack.enter_context(redis_server()), stack.enter_context(redis_server())
        primary, replica = redis.Redis.from_url(primary_url), redis.Redis.from_url(replica_url)
        stack.callback(primary.close)
        stack.callback(replica.close)
        replica.replicaof("127.0.0.1", primary.connection_pool.connection_kwargs["port"])
        _until(lambda: _acknowledged(primary), "the replica to acknowledge")
        yield ReplicaSet(primary_url, replica_url, int(replica.info("server")["process_id"]))


@pytest.fixture
def frozen(replica_set: ReplicaSet) -> Iterator[None]:
    """The replica stopped (SIGSTOP) for the test, resumed after it even if it fails."""
    os.kill(replica_set.replica_pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(replica_set.replica_pid, signal.SIGCONT)
        with redis.Redis.from_url(replica_set.primary) as primary:
            _until(lambda: _acknowledged(primary), "the resumed replica to acknowledge")


@pytest.fixture
async def primary(replica_set: ReplicaSet) -> AsyncIterator[Redis]:
    conn: Redis = Redis.from_url(replica_set.primary)
    yield conn
    await conn.aclose()


@pytest.fixture
def client(primary: Redis) -> Redis:
    """The replica set's primary, for the suite's ``prefix`` fixture to clean up on."""
    return primary


def _target(scope: str) -> DispatchTarget:
    return DispatchTarget(scope, "dispatch", "job")


async def _wait_calls(conn: Redis) -> int:
    stats = await conn.info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


async def _lease(guard: FireOnceGuard, scope: str) -> Lease:
    outcome = await guard.acquire(_target(scope))
    assert isinstance(outcome, Acquired), outcome
    return outcome.lease


async def test_auto_the_default_waits_for_the_attached_replica(primary: Redis, prefix: str, replica_set: ReplicaSet) -> None:
    assert GuardOptions().replica_sync == "auto"
    assert GuardOptions().replica_sync_setting == ReplicaSyncSetting("auto", 200)
    # Room for a loaded machine's replica to answer.
    guard = FireOnceGuard(primary, GuardOptions(key_prefix=prefix, replica_sync={"replicas": "auto", "timeout_ms": 4_000}))
    # A node runs a script by EVAL the first time, one more round trip with its own WAIT: count after.
    assert (await guard.commit(await _lease(guard, "warm-up"), b"done")).ours
    before = await _wait_calls(primary)
    lease = await _lease(guard, "synced")
    assert await _wait_calls(primary) == before + 1
    replica: Redis = Redis.from_url(replica_set.replica)
    try:
        assert await replica.get(lease.lock_key) == await primary.get(lease.lock_key) is not None
    finally:
        await replica.aclose()
    assert (await guard.commit(lease, b"done")).ours
    assert await _wait_calls(primary) == before + 2


async def test_with_the_replica_frozen_an_acquire_fails_closed_and_undoes_its_lock(primary: Redis, prefix: str, frozen: None) -> None:
    guard = FireOnceGuard(primary, GuardOptions(key_prefix=prefix))  # the defaults: 'auto', 200 ms
    with pytest.raises(FireOnceStoreUnavailable) as caught:
        await guard.acquire(_target("cut-off"))
    assert caught.value.retryable
    assert caught.value.message == "only 0 of 1 replica(s) acknowledged the lock within 200 ms (replica_sync)"
    lock_key = guard.keys.lock("cut-off", "dispatch")
    await until(lambda: _gone(primary, lock_key), "the unreplicated lock to be undone")


async def test_a_lock_lost_before_its_confirm_is_reported_as_lost_not_as_a_replica_shortfall(
    primary: Redis, prefix: str, replica_set: ReplicaSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    guard = FireOnceGuard(primary, GuardOptions(key_prefix=prefix, replica_sync={"replicas": 1, "timeout_ms": 4_000}))
    confirm = guard._replicas.confirm

    async def lost_first(lock_key: str, *rest: Any) -> Any:
        await primary.delete(lock_key)  # between the acquire and its confirm, as an expiry or a forced release
        return await confirm(lock_key, *rest)

    monkeypatch.setattr(guard._replicas, "confirm", lost_first)
    with pytest.raises(FireOnceStoreUnavailable) as caught:
        await guard.acquire(_target("lost"))
    assert caught.value.retryable
    assert caught.value.message == (
        "the lock was lost before the replicas acknowledged it (it expired, or was released or taken, "
        "between the acquire and its confirm): nothing was dispatched"
    )


async def test_auto_under_a_user_that_may_not_run_info_fails_the_acquire_closed_and_a_fixed_count_works(primary: Redis, prefix: str, replica_set: ReplicaSet) -> None:
    """A user denied INFO (the start check reads the eviction policy with CONFIG GET instead):
    ``'auto'`` cannot count the replicas, and writing without a ``WAIT`` could lose the lock in a
    failover. Each write counts again, and fails the same way."""
    await primary.acl_setuser("no-info", enabled=True, reset=True, passwords=["+pw"], keys=["*"], channels=["*"], commands=["+@all", "-info"])
    port = primary.connection_pool.connection_kwargs["port"]
    restricted: Redis = Redis(port=port, username="no-info", password="pw")
    try:
        guard = FireOnceGuard(restricted, GuardOptions(key_prefix=prefix))
        for scope in ("uncounted-1", "uncounted-2"):
            with pytest.raises(FireOnceStoreUnavailable, match=r"replica_sync 'auto' could not count the primary's replicas with INFO replication .*grant the Redis user \+info"):
                await guard.acquire(DispatchTarget(scope, "step", "job"))

            async def undone(scope: str = scope) -> bool:  # the acquire's lock, undone behind the failed count
                return await primary.exists(guard.keys.lock(scope, "step")) == 0

            await until(undone, "the lock to be undone")
        fixed = FireOnceGuard(restricted, GuardOptions(key_prefix=prefix, replica_sync={"replicas": 1, "timeout_ms": 4_000}))
        assert isinstance(await fixed.acquire(DispatchTarget("uncounted-1", "step", "job")), Acquired)
    finally:
        await restricted.aclose()


async def test_a_first_count_turned_away_by_the_client_is_tried_again_and_a_refusal_is_not(
    primary: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py's per-node connection limit can turn the count's INFO away during a burst of writes
    (MaxConnectionsError, seen on a Cluster in CI): the count is tried again, three times in all,
    50 ms apart. A refusal by Redis (NOPERM, above) is not."""
    import temporal_fire_once.core.replica_sync as replica_sync
    from redis.exceptions import MaxConnectionsError

    real = replica_sync.count_replicas
    failures: list[Exception] = []

    async def turned_away(redis: Any) -> replica_sync.ReplicaCounts:
        if failures:
            raise failures.pop()
        return await real(redis)

    monkeypatch.setattr(replica_sync, "count_replicas", turned_away)
    failures[:] = [MaxConnectionsError(), MaxConnectionsError()]
    guard = FireOnceGuard(primary, GuardOptions(key_prefix=prefix))
    assert isinstance(await guard.acquire(DispatchTarget("turned-away", "step", "job")), Acquired)
    failures[:] = [MaxConnectionsError()] * 3
    with pytest.raises(FireOnceStoreUnavailable, match=r"could not count the primary's replicas with INFO replication \(MaxConnectionsError"):
        await FireOnceGuard(primary, GuardOptions(key_prefix=prefix)).acquire(DispatchTarget("turned-away-3", "step", "job"))


async def test_replica_sync_false_dispatches_on_an_unreplicated_lock(primary: Redis, prefix: str, frozen: None) -> None:
    # The old asynchronous behaviour: the hazard docs/production-redis.md describes.
    unsynced = FireOnceGuard(primary, GuardOptions(key_prefix=prefix, replica_sync=False))
    assert isinstance(await unsynced.acquire(_target("unsynced")), Acquired)
    plugin = FireOncePlugin(primary, key_prefix=prefix, replica_sync=False)
    assert plugin.guard.options.replica_sync_setting == ReplicaSyncSetting(0, 200)


async def test_a_commit_or_release_whose_wait_falls_short_still_reports_what_the_script_did(
    primary: Redis, prefix: str, replica_set: ReplicaSet
) -> None:
    # Taken while the replica is attached, with room for it to answer on a loaded machine.
    patient = FireOnceGuard(primary, GuardOptions(key_prefix=prefix, replica_sync={"replicas": 1, "timeout_ms": 4_000}))
    committing, releasing, keeping = await _lease(patient, "commit"), await _lease(patient, "release"), await _lease(patient, "keep")
    guard = FireOnceGuard(primary, GuardOptions(key_prefix=prefix, replica_sync={"replicas": 1, "timeout_ms": 100}))
    os.kill(replica_set.replica_pid, signal.SIGSTOP)
    try:
        before = await _wait_calls(primary)
        committed = await guard.commit(committing, b"result")
        assert (committed.ours, committed.stored) == (True, True)
        assert (await guard.release(releasing)).ours
        assert (await guard.keep(keeping, 60_000)).ours
        assert await _wait_calls(primary) >= before + 3  # each waited, and fell short
    finally:
        os.kill(replica_set.replica_pid, signal.SIGCONT)
    found = await guard.acquire(_target("commit"))
    assert isinstance(found, FastForward) and found.artifact == b"result"
    assert not await primary.exists(releasing.lock_key)


async def test_a_renewal_the_replica_does_not_acknowledge_fails(primary: Redis, prefix: str, replica_set: ReplicaSet) -> None:
    patient = FireOnceGuard(primary, GuardOptions(key_prefix=prefix, replica_sync={"replicas": 1, "timeout_ms": 4_000}))
    lease = await _lease(patient, "renewed")
    guard = FireOnceGuard(primary, GuardOptions(key_prefix=prefix, replica_sync={"replicas": 1, "timeout_ms": 100}))
    os.kill(replica_set.replica_pid, signal.SIGSTOP)
    try:
        with pytest.raises(FireOnceStoreUnavailable) as caught:
            await guard.extend(lease, 60_000)
        # The lock was lost to nobody: a renewal without replicas is what fails.
        assert await primary.pttl(lease.lock_key) > 0
    finally:
        os.kill(replica_set.replica_pid, signal.SIGCONT)
    assert caught.value.message == "only 0 of 1 replica(s) acknowledged the lease renewal within 100 ms (replica_sync)"


async def test_a_wait_the_user_may_not_send_fails_the_acquire_and_the_renewal_but_not_a_commit_or_release(
    primary: Redis, prefix: str, replica_set: ReplicaSet
) -> None:
    await primary.acl_setuser("no-wait", enabled=True, reset=True, passwords=["+pw"], keys=["*"], channels=["*"], commands=["+@all", "-wait"])
    restricted: Redis = Redis.from_url(replica_set.primary, username="no-wait", password="pw")
    try:
        guard = FireOnceGuard(restricted, GuardOptions(key_prefix=prefix))
        # The reply as Redis sent it, as in the TypeScript package's message: redis-py drops the code.
        with pytest.raises(FireOnceStoreUnavailable, match=r"NOPERM .*'wait'"):
            await guard.acquire(_target("no-wait"))
        await until(lambda: _gone(primary, guard.keys.lock("no-wait", "dispatch")), "the lock to be undone")

        full = FireOnceGuard(primary, GuardOptions(key_prefix=prefix, replica_sync=False))  # the set-up needs no replica
        refused = FireOnceGuard(restricted, GuardOptions(key_prefix=prefix, replica_sync={"replicas": 1, "timeout_ms": 100}))
        committed = await refused.commit(await _lease(full, "commit"), b"result")
        assert (committed.ours, committed.stored) == (True, True)
        assert (await refused.release(await _lease(full, "release"))).ours
        kept_lease = await _lease(full, "keep")
        await primary.rpush(kept_lease.waiters_key, b"waiter-of-keep")
        kept = await refused.keep(kept_lease, 60_000)
        assert (kept.ours, kept.waiters) == (True, (b"waiter-of-keep",))
        with pytest.raises(FireOnceStoreUnavailable, match=r"lease renewal.*WAIT failed"):
            await refused.extend(await _lease(full, "extend"), 60_000)
    finally:
        await restricted.aclose()


async def test_a_guard_given_the_replica_fails_closed_naming_readonly_as_redis_sent_it(primary: Redis, prefix: str, replica_set: ReplicaSet) -> None:
    replica: Redis = Redis.from_url(replica_set.replica)
    try:
        guard = FireOnceGuard(replica, GuardOptions(key_prefix=prefix, replica_sync=False))
        with pytest.raises(FireOnceStoreUnavailable, match=r"^Redis call failed: READONLY You can't write against a read only replica"):
            await guard.acquire(_target("read-only"))
    finally:
        await replica.aclose()
    assert await primary.exists(guard.keys.lock("read-only", "dispatch")) == 0


async def test_auto_sends_no_wait_when_no_replica_is_attached() -> None:
    with redis_server() as url:
        lone: Redis = Redis.from_url(url)
        try:
            guard = FireOnceGuard(lone, GuardOptions(key_prefix="alone"))
            lease = await _lease(guard, "alone")
            assert (await guard.commit(lease, b"done")).ours
            assert "cmdstat_wait" not in await lone.info("commandstats")
        finally:
            await lone.aclose()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yes", "replica_sync must be 'auto', False or {'replicas': n or 'auto', 'timeout_ms': ms} (got 'yes')"),
        (True, "replica_sync must be 'auto', False or {'replicas': n or 'auto', 'timeout_ms': ms} (got True)"),
        ({"replicas": "all"}, "replica_sync.replicas must be a positive integer (got 'all')"),
        ({"replicas": 0}, "replica_sync.replicas must be a positive integer (got 0)"),
        ({"replicas": 1, "timeout_ms": 120_000}, "replica_sync.timeout_ms must be at most 60000 ms (got 120000)"),
        ({"replicas": 1, "timeout": 5}, "replica_sync: unknown option 'timeout'"),
        (
            {"replicas": 1, "timeout_ms": 5_000},
            "replica_sync.timeout_ms (5000 ms) must be below store_timeout_ms (5000 ms), which bounds each write and its WAIT together",
        ),
    ],
)
def test_a_bad_replica_sync_is_refused_naming_it(value: object, message: str) -> None:
    with pytest.raises(FireOnceConfigError) as caught:
        GuardOptions(replica_sync=value)  # type: ignore[arg-type]
    assert caught.value.message == message


def test_the_wait_is_half_a_store_timeout_shorter_than_400_ms_unless_told() -> None:
    assert GuardOptions(store_timeout_ms=150).replica_sync_setting == ReplicaSyncSetting("auto", 75)
    assert GuardOptions(store_timeout_ms=150, replica_sync={"replicas": 2}).replica_sync_setting == ReplicaSyncSetting(2, 75)
    told = GuardOptions(store_timeout_ms=150, replica_sync={"replicas": 1, "timeout_ms": 100})
    assert told.replica_sync_setting == ReplicaSyncSetting(1, 100)
    assert GuardOptions(store_timeout_ms=1_000).replica_sync_setting == ReplicaSyncSetting("auto", 200)
    # docs/production-redis.md: "200 ms, or half of storeTimeoutMs when that is shorter than 400
    # ms", so that the write keeps at least half of the store timeout besides its WAIT.
    assert GuardOptions(store_timeout_ms=300).replica_sync_setting == ReplicaSyncSetting("auto", 150)
    assert GuardOptions(store_timeout_ms=399, replica_sync={"replicas": 2}).replica_sync_setting == ReplicaSyncSetting(2, 199)
    assert GuardOptions(store_timeout_ms=400).replica_sync_setting == ReplicaSyncSetting("auto", 200)
    told_longer = GuardOptions(store_timeout_ms=300, replica_sync={"replicas": 1, "timeout_ms": 250})
    assert told_longer.replica_sync_setting == ReplicaSyncSetting(1, 250)
    with pytest.raises(FireOnceConfigError, match=r"replica_sync.timeout_ms \(150 ms\) must be below store_timeout_ms \(150 ms\)"):
        GuardOptions(store_timeout_ms=150, replica_sync={"replicas": 1, "timeout_ms": 150})


async def _gone(conn: Redis, key: str) -> bool:
    return int(await conn.exists(key)) == 0


async def test_auto_counts_only_the_replicas_online_so_one_in_its_first_sync_blocks_no_acquire(prefix: str) -> None:
    """A replica still waiting for its first full sync cannot acknowledge a ``WAIT``: counted, it
    would fail every acquire for as long as it resyncs (``count_replicas``: ``state=online``)."""
    with redis_server() as primary_url, redis_server() as replica_url:
        blocking, replica = redis.Redis.from_url(primary_url), redis.Redis.from_url(replica_url)
        conn: Redis = Redis.from_url(primary_url)
        try:
            # Diskless sync, delayed a minute: the replica waits for its snapshot (wait_bgsave) all along.
            blocking.config_set("repl-diskless-sync", "yes")
            blocking.config_set("repl-diskless-sync-delay", 60)
            replica.replicaof("127.0.0.1", blocking.connection_pool.connection_kwargs["port"])

            def waiting() -> bool:
                return any(isinstance(v, dict) and v.get("state") == "wait_bgsave" for k, v in blocking.info("replication").items() if k.startswith("slave"))

            _until(waiting, "the replica to wait for its first sync")
            guard = FireOnceGuard(conn, GuardOptions(key_prefix=prefix))
            assert isinstance(await guard.acquire(DispatchTarget("first-sync", "step", "job")), Acquired)
            assert "cmdstat_wait" not in blocking.info("commandstats")
        finally:
            await conn.aclose()
            blocking.close()
            replica.close()
