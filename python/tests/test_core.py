"""The core guard on a real Redis, with no Temporal: keys, records, the protocol marker, and the
guard's decisions."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Awaitable, Callable, TypeVar

import pytest
from redis.asyncio import Redis

from temporal_fire_once.core import (
    Acquired,
    DispatchTarget,
    FastForward,
    FireOnceConfigError,
    FireOnceGuard,
    FireOnceInvalidId,
    FireOnceKeyConflict,
    FireOnceKeys,
    FireOnceProtocolError,
    FireOnceProtocolMismatch,
    FireOnceStoreUnavailable,
    GuardOptions,
    Held,
    Settled,
    ParsedKey,
    encode_id,
    parse_artifact,
)

T = TypeVar("T")



def test_keys_match_the_typescript_layout() -> None:
    keys = FireOnceKeys("fire-once")
    assert keys.lock("session-42", "dispatch-summary") == "fire-once:v3:{default/session-42}:l:dispatch-summary"
    assert keys.artifact("chat:7", "summary") == "fire-once:v3:{default/chat%3A7}:a:summary"
    assert FireOnceKeys("fire-once", "tenant-b").log() == "fire-once:v3:tenant-b:log"
    assert encode_id("scope", "é*/{x} %") == "%C3%A9%2A%2F%7Bx%7D%20%25"
    assert keys.protocol_marker() == "fire-once:protocol"
    tenant = keys.for_namespace("tenant b")
    assert keys.parse(tenant.external("chat:7", "summary")) == ParsedKey("tenant b", "chat:7", "external", "summary")
    assert keys.parse(keys.wake_channel("s")) == ParsedKey("default", "s", "wake")
    assert [keys.parse(k) for k in (keys.log(), keys.protocol_marker(), "other:v3:{default/s}:l:x", f"{keys.scope_base('s')}:l:%FF")] == [None] * 4


def test_a_key_whose_ids_encode_id_never_writes_parses_to_none_as_in_typescript() -> None:
    """The rows of ``test/core/keys.test.ts`` "parses its own keys back, ... and nothing else": a bare
    ``%``, a lone byte, a bad escape. An external key such as ``...:a:100%`` is then the job's own in
    both languages, not one the guard writes."""
    keys = FireOnceKeys("fire-once")
    foreign = ["fire-once:v3:{default/ab}:x:100%", "fire-once:v3:{default/ab}:l:%E9", "fire-once:v3:{%ZZ/ab}:a:job", "fire-once:v3:{default/ab}:a:100%"]
    assert [keys.parse(k) for k in foreign] == [None] * len(foreign)


@pytest.mark.parametrize("bad", ["", "   ", "\ufeff", "x" * 513, "\ud800", 7])
def test_ids_the_typescript_side_refuses_are_refused(bad: object) -> None:
    with pytest.raises(FireOnceInvalidId):
        encode_id("scope", bad)


@pytest.mark.parametrize("prefix", ["a{b}", "fire-once*", "", "has space", "x" * 65, 7])
def test_a_prefix_the_guard_refuses_is_refused_by_fire_once_keys_too(prefix: object) -> None:
    # FireOnceKeys is public: a brace would move every key's Cluster slot to the prefix's hash tag.
    with pytest.raises(FireOnceConfigError, match=r"^prefix must be 1-64 characters .* \(got " + re.escape(repr(prefix)) + r"\)$"):
        FireOnceKeys(prefix)  # type: ignore[arg-type]


def test_an_id_of_512_bytes_and_one_of_unicode_control_spaces_are_accepted() -> None:
    assert encode_id("scope", "é" * 256).count("%") == 512
    assert encode_id("scope", "\x1c") == "%1C"  # Python strips it as whitespace; JavaScript does not


def test_option_errors_name_the_field() -> None:
    from temporal_fire_once import ExternalArtifact, FireOncePlugin, fire_once

    with pytest.raises(FireOnceConfigError, match="lock_ttl_ms must be a positive integer"):
        GuardOptions(lock_ttl_ms=-5)
    with pytest.raises(FireOnceConfigError, match="key_prefix"):
        GuardOptions(key_prefix="{bad}")
    with pytest.raises(FireOnceConfigError, match=r"known_artifacts must be 0 \(off\) or a positive integer \(got -1\)"):
        GuardOptions(known_artifacts=-1)
    with pytest.raises(FireOnceConfigError, match="known_artifacts must be at most 1000000 keys"):
        GuardOptions(known_artifacts=2_000_000)
    with pytest.raises(FireOnceConfigError, match="lease_ms must be at most 600000"):
        fire_once(lease_ms=600_001)
    for short in (1, 30, 999):  # a "30 seconds" typed as 30: renewals cannot keep such a lease
        with pytest.raises(FireOnceConfigError, match=rf"^lease_ms must be at least 1000 ms \(got {short}\): the lock is renewed"):
            fire_once(lease_ms=short)
        with pytest.raises(FireOnceConfigError, match=rf"^lease_ms must be at least 1000 ms \(got {short}\)"):
            FireOncePlugin(Redis(), lease_ms=short)
    with pytest.raises(FireOnceConfigError, match=r"artifact.external must be a function \(ids\) -> key \(got 'a-key'\)"):
        fire_once(artifact=ExternalArtifact(external="a-key"))  # type: ignore[arg-type]
    with pytest.raises(FireOnceConfigError, match=r"on_in_flight must be one of wait, fail \(got 'later'\)"):
        FireOncePlugin(Redis(), on_in_flight="later")  # type: ignore[arg-type]
    # The Python option, not the protocol's ID kind (jobType) that encode_id names.
    with pytest.raises(FireOnceConfigError, match=r"^job_type must not be empty or whitespace only \(got \"\"\)"):
        fire_once(job_type="")
    with pytest.raises(FireOnceConfigError, match=r"^job_type must be a string \(got int\)"):
        fire_once(job_type=5)  # type: ignore[arg-type]
    with pytest.raises(FireOnceConfigError, match=r"^step must not be empty"):
        fire_once(step=" ")
    with pytest.raises(FireOnceConfigError, match=r"^conflict_key must be a function \(args\) -> value \(got 'id'\)"):
        fire_once(conflict_key="id")  # type: ignore[arg-type]
    with pytest.raises(FireOnceConfigError, match=r"^scope must be a function \(args, info\) -> str \(got 'session-1'\)"):
        fire_once(scope="session-1")  # type: ignore[arg-type]
    # python/README.md: durations are ints, None is the default, a misspelt keyword is Python's own error.
    with pytest.raises(FireOnceConfigError, match=r"^lease_ms must be a positive integer \(got 30000\.0\)"):
        FireOncePlugin(Redis(), lease_ms=30e3)  # type: ignore[arg-type]
    assert FireOncePlugin(Redis(), lock_ttl_ms=None).guard.options.lock_ttl_ms == GuardOptions().lock_ttl_ms
    with pytest.raises(TypeError, match="lease_mss"):
        FireOncePlugin(Redis(), lease_mss=30_000)  # type: ignore[call-arg]


def test_the_plugin_warns_of_ttls_that_redo_the_work_or_lapse_a_lease_as_typescript_does() -> None:
    import warnings

    from temporal_fire_once import FireOncePlugin

    with pytest.warns(UserWarning) as caught:
        FireOncePlugin(Redis(), artifact_ttl_ms=10_000, lease_ms=20_000)
        FireOncePlugin(Redis(), lease_ms=6_000, store_timeout_ms=5_000)
        FireOncePlugin(Redis(), lock_mode="fixed", lock_ttl_ms=60_000, artifact_ttl_ms=30_000)
        FireOncePlugin(Redis(), lock_mode="fixed", lock_ttl_ms=1)
    assert [str(w.message) for w in caught] == [
        "fire-once: artifact_ttl_ms (10000) is shorter than lease_ms (20000): artifacts can expire while their lock still stands, "
        "and later invocations then redo the work",
        "fire-once: lease_ms (6000) leaves a renewal sent at a third of it less than store_timeout_ms (5000) to land before the lock "
        "expires: a slow Redis can let the lock lapse mid-job; make lease_ms at least 1.5 times store_timeout_ms",
        "fire-once: artifact_ttl_ms (30000) is shorter than lock_ttl_ms (60000): artifacts can expire while their lock still stands, "
        "and later invocations then redo the work",
        "fire-once: lock_ttl_ms (1) in 'fixed' mode is shorter than store_timeout_ms (5000): the lock can expire before the job has "
        "even started, and the next invocation then dispatches it again; make lock_ttl_ms longer than the longest job",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FireOncePlugin(Redis())  # the defaults warn of nothing


def test_fire_once_twice_on_one_function_is_refused_not_half_applied() -> None:
    from temporal_fire_once import fire_once

    async def summarise() -> str:
        return "s"

    inner = fire_once(job_type="inner", step="inner-step")(summarise)
    with pytest.raises(FireOnceConfigError, match=r"^fire_once: summarise is already decorated with @fire_once; give every option in one"):
        fire_once(job_type="outer")(inner)


def test_a_worker_wide_skip_is_refused_and_per_activity_it_stays_allowed() -> None:
    """``'skip'`` returns ``None`` without running: worker-wide it would reach every guarded
    activity, and hand ``None`` to workflows awaiting a value. It is set per activity."""
    from temporal_fire_once import FireOncePlugin, fire_once
    from temporal_fire_once.worker import WorkerDefaults

    message = r"on_in_flight 'skip' returns None.*set it per activity, @fire_once\(on_in_flight='skip'\)"
    with pytest.raises(FireOnceConfigError, match=message):
        FireOncePlugin(Redis(), on_in_flight="skip")  # type: ignore[arg-type]
    with pytest.raises(FireOnceConfigError, match=message):
        WorkerDefaults(on_in_flight="skip")  # type: ignore[arg-type]  # a FireOnceInterceptor wired by hand
    assert fire_once(on_in_flight="skip") is not None


@pytest.mark.parametrize("value", ["false", 0, 1, None])
def test_every_boolean_option_refuses_a_value_that_is_no_boolean(value: object) -> None:
    """``dispatch_log="false"`` (a value read from an environment variable) would switch the log
    on, being truthy, and ``0`` off: each flag of the plugin and of ``@fire_once`` refuses anything
    but ``True`` or ``False``, as TypeScript's ``flag()`` does."""
    from temporal_fire_once import FireOncePlugin, fire_once
    from temporal_fire_once.worker import WorkerDefaults

    for name in ("publish_wake_ups", "dispatch_log", "allow_evicting_redis"):
        if value is not None:  # None is the plugin's "not given"
            with pytest.raises(FireOnceConfigError, match=rf"^{name} must be a boolean \(got {value!r}\)"):
                FireOncePlugin(Redis(), **{name: value})  # type: ignore[arg-type]
    for name in ("dispatch_log", "allow_evicting_redis"):
        with pytest.raises(FireOnceConfigError, match=rf"^{name} must be a boolean \(got {value!r}\)"):
            WorkerDefaults(**{name: value})  # type: ignore[arg-type]
    if value is not None:
        with pytest.raises(FireOnceConfigError, match=rf"^observe_only must be a boolean \(got {value!r}\)"):
            fire_once(observe_only=value)  # type: ignore[arg-type]


def test_a_hand_wired_interceptor_refuses_what_it_cannot_use_when_it_is_built() -> None:
    """``FireOnceInterceptor`` is what a worker wired by hand is given, as TypeScript's
    ``createFireOnceActivityInterceptor`` (defect 1): defaults as a dict were ignored when empty
    and failed untyped otherwise, and options listed in ``activities`` as a dict were accepted and
    failed every call of that activity with an ``AttributeError``, which Temporal retries for ever.
    Each is ``FireOnceConfigError`` naming it, when the interceptor is built."""
    from temporal_fire_once import FireOnceInterceptor
    from temporal_fire_once.worker import FireOnceOptions, WorkerDefaults

    guard = FireOnceGuard(Redis())
    refused: list[tuple[str, Callable[[], object]]] = [
        (r"guard must be a FireOnceGuard \(got Redis\)", lambda: FireOnceInterceptor(Redis())),  # type: ignore[arg-type]
        (r"defaults must be a WorkerDefaults.*\(got dict\)", lambda: FireOnceInterceptor(guard, {})),  # type: ignore[arg-type]
        (r"defaults must be a WorkerDefaults.*\(got dict\)", lambda: FireOnceInterceptor(guard, {"lease_ms": 5_000})),  # type: ignore[arg-type]
        (r"payload_codec must be a PayloadCodec \(got str\)", lambda: FireOnceInterceptor(guard, None, "codec")),  # type: ignore[arg-type]
        (r"activities must map activity types to FireOnceOptions \(got list\)", lambda: FireOnceInterceptor(guard, activities=["a"])),  # type: ignore[arg-type]
        (
            r"activities\['summarise'\] must be a FireOnceOptions.*\(got dict\)",
            lambda: FireOnceInterceptor(guard, activities={"summarise": {"job_type": "summary"}}),  # type: ignore[dict-item]
        ),
        (r"activities must map activity types to FireOnceOptions.*\(got a key 5\)", lambda: FireOnceInterceptor(guard, activities={5: FireOnceOptions()})),  # type: ignore[dict-item]
        (r"wake must be a WakeHub or None \(got Redis\)", lambda: FireOnceInterceptor(guard, wake=Redis())),  # type: ignore[arg-type]
        (r"client must be a temporalio Client or None \(got Redis\)", lambda: FireOnceInterceptor(guard, client=Redis())),  # type: ignore[arg-type]
    ]
    for message, build in refused:
        with pytest.raises(FireOnceConfigError, match=message):
            build()
    wired = FireOnceInterceptor(guard, WorkerDefaults(poll_interval_ms=50), activities={"summarise": FireOnceOptions(job_type="summary")})
    assert wired.activities["summarise"].job_type == "summary"


def test_fire_once_context_outside_a_dispatch_is_a_config_error_as_in_typescript() -> None:
    """Outside a guarded dispatch (an unguarded activity, a fast-forward, ``observe_only``, or no
    activity at all) there is no lock to describe: ``FireOnceConfigError``, as TypeScript's
    ``fireOnceContext()`` throws, so the activity ends with the same failure type in both."""
    from temporal_fire_once import fire_once_context

    with pytest.raises(FireOnceConfigError, match=r"fire_once_context\(\) is only available inside a guarded activity"):
        fire_once_context()


async def test_options_that_are_not_guard_options_are_refused_with_a_config_error(redis_url: str) -> None:
    """A dict of options (a JavaScript habit) is neither used nor ignored: ``FireOnceConfigError``
    naming the type, as the TypeScript guard refuses options that are not an object."""
    client = Redis.from_url(redis_url)
    for options in ({"lock_ttl_ms": 5_000}, {}, "fire-once", 7):
        with pytest.raises(FireOnceConfigError, match=r"options must be a GuardOptions"):
            FireOnceGuard(client, options)  # type: ignore[arg-type]
    await client.aclose()


async def test_log_append_refuses_a_cap_that_is_no_positive_integer_and_writes_nothing(client: Redis, prefix: str) -> None:
    """``log_append`` sends its cap to every ``XADD ... MAXLEN ~``: 0 trims the stream to nothing,
    and Redis refuses a float or a negative, as ``new DispatchLog(redis, keys, maxLen)`` in TypeScript
    (defect 70)."""
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    entry = [[("decision", "dispatched"), ("scope", "s")]]
    for max_len in (0, -5, 1.5, float("nan"), True):
        with pytest.raises(FireOnceConfigError, match=r"max_len must be a positive integer"):
            await guard.log_append(None, max_len, entry)  # type: ignore[arg-type]
    assert await client.exists(guard.keys.log()) == 0
    assert await guard.log_append(None, 10, entry) == 1


async def test_a_client_that_decodes_responses_is_refused_at_construction(redis_url: str) -> None:
    from redis.asyncio import RedisCluster

    from temporal_fire_once import FireOncePlugin

    decoding = Redis.from_url(redis_url, decode_responses=True)
    cluster = RedisCluster(host="127.0.0.1", port=7000, decode_responses=True)  # never connected
    for make in (lambda: FireOnceGuard(decoding), lambda: FireOncePlugin(decoding), lambda: FireOnceGuard(cluster)):
        with pytest.raises(FireOnceConfigError, match=r"decode_responses=True.*decode_responses=False"):
            make()
    await decoding.aclose()
    await cluster.aclose()


async def test_the_eviction_check_reads_info_first_and_refuses_a_policy_it_cannot_read() -> None:
    from temporal_fire_once.core import FireOnceStoreUnavailable, check_eviction_policy

    from .conftest import free_port, redis_server

    with redis_server() as url:  # its own server: the test adds ACL users
        admin: Redis = Redis.from_url(url)
        await admin.acl_setuser("info-only", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-config"])
        await admin.acl_setuser("blind", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info", "-config"])
        info_only = Redis.from_url(url, username="info-only", password="pw")
        blind = Redis.from_url(url, username="blind", password="pw")
        [policy] = await check_eviction_policy(info_only)
        assert (policy.policy, policy.source, policy.safe) == ("noeviction", "INFO", True)
        assert await admin.acl_log() == []  # CONFIG was never asked, so never denied
        with pytest.raises(FireOnceConfigError, match=r"maxmemory-policy of Redis at 127\.0\.0\.1:\d+ could not be read \(INFO memory: NOPERM .*; CONFIG GET maxmemory-policy: NOPERM .*; grant the user \+info\): Redis may evict"):
            await check_eviction_policy(blind)
        await admin.config_set("maxmemory-policy", "volatile-lru")
        with pytest.raises(FireOnceConfigError, match="has maxmemory-policy volatile-lru"):
            await check_eviction_policy(info_only)
        [allowed] = await check_eviction_policy(info_only, allow_evicting_redis=True)
        assert (allowed.policy, allowed.safe) == ("volatile-lru", False)
        for conn in (admin, info_only, blind):
            await conn.aclose()
    await dead_redis_is_named(check_eviction_policy, "its eviction policy was read")


async def test_every_start_check_that_times_out_names_the_node_it_asked() -> None:
    from temporal_fire_once.core.sentinel import refuse_sentinel_client
    from temporal_fire_once.core.worker_check import check_selected_database

    await dead_redis_is_named(refuse_sentinel_client, "the start checks asked whether it is a Sentinel")
    await dead_redis_is_named(check_selected_database, "database 3 was selected", db=3)


async def dead_redis_is_named(check: Callable[..., Awaitable[object]], while_: str, db: int = 0) -> None:
    """``check`` of a Redis that never answers names its address, not only "Redis"."""
    from temporal_fire_once.core import FireOnceStoreUnavailable

    from .conftest import free_port

    port = free_port()
    dead = Redis(port=port, db=db, socket_connect_timeout=0.5)
    with pytest.raises(FireOnceStoreUnavailable, match=rf"^Redis at localhost:{port} did not answer within 1000 ms while {re.escape(while_)}$"):
        await check(dead, timeout_ms=1_000)
    await dead.aclose()


async def test_the_marker_is_claimed_once_and_another_version_is_refused(client: Redis, prefix: str) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    await guard.claim_protocol()
    assert await client.get(f"{prefix}:protocol") == b"3"
    await guard.claim_protocol()
    await client.set(f"{prefix}:protocol", "4")
    with pytest.raises(FireOnceProtocolMismatch) as caught:
        await guard.claim_protocol()
    assert caught.value.found == "4" and caught.value.type == "FireOnceConfigError"


async def test_100_concurrent_acquires_make_one_owner(client: Redis, prefix: str) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    target = DispatchTarget("s", "step", "job")
    outcomes = await asyncio.gather(*(guard.acquire(target) for _ in range(100)))
    assert sum(isinstance(o, Acquired) for o in outcomes) == 1
    assert sum(isinstance(o, Held) for o in outcomes) == 99


async def test_commit_fast_forwards_and_release_refuses_a_stale_token(client: Redis, prefix: str) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    target = DispatchTarget("s", "step", "job", args_hash="h1")
    first = await guard.acquire(target)
    assert isinstance(first, Acquired)
    assert (await guard.release(first.lease)).ours
    second = await guard.acquire(target)
    assert isinstance(second, Acquired) and second.lease.fencing_token > first.lease.fencing_token
    assert not (await guard.release(first.lease)).ours  # the first holder's token no longer holds it
    assert (await guard.commit(second.lease, b"\x00payload\xff")).ours
    again = await guard.acquire(target)
    assert isinstance(again, FastForward) and again.artifact == b"\x00payload\xff"
    record = await client.get(guard.keys.artifact("s", "job"))
    assert isinstance(record, bytes) and parse_artifact(record) is not None
    with pytest.raises(FireOnceKeyConflict):
        await guard.acquire(DispatchTarget("s", "step", "job", args_hash="h2"))


async def test_other_arguments_meeting_a_held_lock_are_a_key_conflict_in_both_artifact_modes(client: Redis, prefix: str) -> None:
    """The conflict is found on the lock in flight, not only once the holder has stored its
    result: in the external mode an existing key is only tested for existence, so the lock's args
    hash is the only one there is to check (``found_by_acquire``)."""
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    for target in (
        DispatchTarget("held-r", "step", "job", args_hash="h1"),
        DispatchTarget("held-x", "step", "job", args_hash="h1", external_artifact_key=guard.keys.external("held-x", "job")),
    ):
        assert isinstance(await guard.acquire(target), Acquired)
        with pytest.raises(FireOnceKeyConflict, match="other arguments than the dispatch in flight was started with"):
            await guard.acquire(dataclasses.replace(target, args_hash="h2"))
        assert isinstance(await guard.acquire(target), Held)  # the same arguments wait for it


async def test_a_lease_whose_keys_are_not_the_guards_own_is_refused_and_nothing_written(client: Redis, prefix: str) -> None:
    # A lease names the keys commit, release and extend write, as in TypeScript (reliability.md 90).
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    held = await guard.acquire(DispatchTarget("lease-owner", "step", "job"))
    assert isinstance(held, Acquired)
    elsewhere = FireOnceGuard(client, GuardOptions(key_prefix=f"{prefix}-other"))
    message = (
        "{}: the lease's keys are not this guard's for its target (key_prefix '" + prefix + "-other'): "
        "pass the lease acquire() returned, unchanged, to a guard with the key_prefix that acquired it"
    )
    for what, call in (
        ("commit", lambda: elsewhere.commit(held.lease, b"r")),
        ("release", lambda: elsewhere.release(held.lease)),
        ("extend", lambda: elsewhere.extend(held.lease, 5_000)),
        ("keep", lambda: elsewhere.keep(held.lease, 5_000)),
    ):
        with pytest.raises(FireOnceConfigError) as refused:
            await call()
        assert str(refused.value) == message.format(what)
    victim = guard.keys.artifact("victim", "job")
    with pytest.raises(FireOnceConfigError):
        await guard.commit(dataclasses.replace(held.lease, artifact_key=victim), b"not the victim's result")
    assert await client.exists(victim, held.lease.artifact_key) == 0
    lock = await client.get(held.lease.lock_key)
    assert isinstance(lock, bytes) and lock.startswith(held.lease.token.encode())
    same = FireOnceGuard(client, GuardOptions(key_prefix=prefix))  # another guard of the lease's prefix takes it
    assert (await same.commit(held.lease, b"r")).stored


async def test_a_late_holder_never_replaces_the_newer_holders_result(client: Redis, prefix: str) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    target = DispatchTarget("s", "step", "job")
    first = await guard.acquire(target)
    assert isinstance(first, Acquired)
    await client.delete(first.lease.lock_key)  # what `fire-once release --force` does
    second = await guard.acquire(target)
    assert isinstance(second, Acquired)
    refused = await guard.commit(first.lease, b"stale")  # while the newer holder's lock stands
    assert not refused.stored and not refused.ours and await client.exists(first.lease.artifact_key) == 0
    assert (await guard.commit(second.lease, b"newer")).stored
    assert not (await guard.commit(first.lease, b"stale")).stored  # and after its commit
    after = await guard.acquire(target)
    assert isinstance(after, FastForward) and after.artifact == b"newer"


async def test_a_known_artifact_is_read_with_a_get_and_a_gone_one_is_left_to_the_script(client: Redis, prefix: str) -> None:
    async def counted(call: Callable[[], Awaitable[T]]) -> tuple[T, int, int]:
        """``call``'s result, and how many scripts and GETs Redis ran meanwhile."""
        await client.config_resetstat()
        value = await call()
        stats = await client.info("commandstats")

        def calls(*names: str) -> int:
            return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in names)

        return value, calls("evalsha", "eval"), calls("get")

    async def scripts_run(call: Callable[[], Awaitable[T]]) -> tuple[T, int]:
        """``call``'s result, and how many scripts Redis ran meanwhile (a GET runs none)."""
        value, scripts, _ = await counted(call)
        return value, scripts

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    target = DispatchTarget("known", "step", "job")
    first = await guard.acquire(target)
    assert isinstance(first, Acquired)
    await guard.commit(first.lease, b"result")
    again, scripts = await scripts_run(lambda: guard.acquire(target))
    assert isinstance(again, FastForward) and again.artifact == b"result" and scripts == 0
    other = FireOnceGuard(client, GuardOptions(key_prefix=prefix))  # another process: it has seen nothing
    seen, scripts = await scripts_run(lambda: other.acquire(target))
    assert isinstance(seen, FastForward) and scripts == 1
    await other.invalidate("known", "job")
    after, scripts = await scripts_run(lambda: guard.acquire(target))  # the GET finds nothing: the script decides
    assert isinstance(after, Acquired) and scripts == 1
    await guard.release(after.lease)
    # The key is forgotten: the next acquire costs what it costs a guard that never knew it (the
    # script alone, no GET first).
    fresh, *cost = await counted(lambda: guard.acquire(target))
    assert isinstance(fresh, Acquired)
    await guard.release(fresh.lease)
    taken, *cost_unknown = await counted(lambda: other.acquire(target))
    assert isinstance(taken, Acquired) and cost == cost_unknown
    await other.commit(taken.lease, b"result 2")
    off = FireOnceGuard(client, GuardOptions(key_prefix=prefix, known_artifacts=0))
    assert isinstance(await off.acquire(target), FastForward)
    _, scripts = await scripts_run(lambda: off.acquire(target))
    assert scripts == 1


def test_a_top_level_none_hashes_as_typescript_null() -> None:
    """PROTOCOL.md section 5: a binary/null payload (Python's None) counts as JSON null, so a
    TypeScript workflow's null argument hashes alike on a Python and a TypeScript worker. The hash
    is TypeScript's argsHash of [null], and of [undefined] (default payload converter)."""
    from temporalio.converter import PayloadConverter

    from temporal_fire_once.worker import args_hash

    assert args_hash([None], PayloadConverter.default) == "uCHBWjLWnZIgVJNa5NGVDUcL3QMKNDy1kSFHvz69XNs"


async def test_a_commit_or_release_rings_the_waiters_of_its_scope_and_no_other(client: Redis, prefix: str) -> None:
    from temporal_fire_once.core.wake import WakeHub

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    hub = WakeHub(client)
    channels = [guard.keys.wake_channel("s"), guard.keys.wake_channel("t")]
    s_bell, t_bell = [await hub.join(channel) for channel in channels]
    while [n for _, n in await client.pubsub_numsub(*channels)] != [1, 1]:  # SUBSCRIBE is not acknowledged
        await asyncio.sleep(0.01)
    committed = await guard.acquire(DispatchTarget("s", "step", "job"))
    assert isinstance(committed, Acquired)
    await guard.commit(committed.lease, b"r")
    await asyncio.wait_for(s_bell.wait(), 10)  # the bound only keeps a broken hub from hanging the suite
    assert not t_bell.is_set()
    released = await guard.acquire(DispatchTarget("t", "step", "job"))
    assert isinstance(released, Acquired)
    await guard.release(released.lease)
    await asyncio.wait_for(t_bell.wait(), 10)
    await hub.leave(channels[0], s_bell)
    await hub.leave(channels[1], t_bell)
    await hub.close()


async def test_a_lock_or_waiters_key_of_another_type_is_a_protocol_error_not_a_store_outage(client: Redis, prefix: str) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    keys = FireOnceKeys(prefix)
    for key in (keys.lock("s-lock", "dispatch"), keys.waiters("s-waiters", "dispatch")):
        await client.hset(key, "f", "v")
    acquired = await guard.acquire(DispatchTarget("s-waiters", "dispatch", "job"))
    assert isinstance(acquired, Acquired)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: guard.acquire(DispatchTarget("s-lock", "dispatch", "job")),
        lambda: guard.commit(acquired.lease, b"done"),
    ]
    for call in calls:
        with pytest.raises(FireOnceProtocolError, match=r"holds a Redis type this library never writes there \(.*WRONGTYPE"):
            await call()
    assert await client.hgetall(keys.lock("s-lock", "dispatch")) == {b"f": b"v"}


async def test_a_python_holder_leaves_waiters_parked_by_a_typescript_worker_to_its_reap(client: Redis, prefix: str) -> None:
    """PROTOCOL.md section 7: commit and release hand the parked waiters over; this package cannot
    complete another worker's activities, so it puts them back for the parking worker's reap."""
    from temporal_fire_once.core.scripts import PARK, REAP

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    target = DispatchTarget("s", "step", "job")
    held = await guard.acquire(target)
    assert isinstance(held, Acquired)
    lease = held.lease
    spot = [lease.artifact_key, lease.lock_key, lease.waiters_key]
    parked = await PARK(client, spot, ["r", b"task-token-of-a-ts-waiter", 60_000])
    assert parked[0] == 2  # PARKED
    settled = await guard.commit(lease, b"result")
    assert settled.ours and settled.waiters == (b"task-token-of-a-ts-waiter",)
    assert await client.lrange(lease.waiters_key, 0, -1) == [b"task-token-of-a-ts-waiter"]
    assert 0 < await client.pttl(lease.waiters_key) <= 60_000
    reaped = await REAP(client, spot, ["r"])
    assert reaped[0] == 1 and reaped[2:] == [b"task-token-of-a-ts-waiter"]  # DONE: the artifact, then the waiters


async def test_keep_holds_the_lock_and_takes_the_waiters_parked_on_it(client: Redis, prefix: str) -> None:
    """PROTOCOL.md section 6 step 3: a result in hand but not stored keeps the lock with ``extend
    ... take``, and the waiters it takes are the holder's to hand that result to."""
    from temporal_fire_once.core.scripts import PARK

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    held = await guard.acquire(DispatchTarget("s", "step", "job"), 60_000)
    assert isinstance(held, Acquired)
    lease = held.lease
    spot = [lease.artifact_key, lease.lock_key, lease.waiters_key]
    await PARK(client, spot, ["r", b"w::token-1", 60_000])
    kept = await guard.keep(lease, None)  # 'fixed' mode: the lock's TTL is left as it is
    assert kept == Settled(True, (b"w::token-1",))
    assert await client.exists(lease.waiters_key) == 0 and 50_000 < await client.pttl(lease.lock_key) <= 60_000
    assert await guard.keep(lease, 5_000) == Settled(True)  # nothing parked: nothing taken; the TTL set
    assert 0 < await client.pttl(lease.lock_key) <= 5_000
    await PARK(client, spot, ["r", b"w::token-2", 60_000])
    await client.delete(lease.lock_key)  # lost: nothing is taken
    assert await guard.keep(lease, 5_000) == Settled(False)
    assert await client.lrange(lease.waiters_key, 0, -1) == [b"w::token-2"]


def _slow_acquire(monkeypatch: pytest.MonkeyPatch, lands_after: float, answers_after: float, on_landing: Callable[[], Awaitable[object]] | None = None) -> None:
    """Make every acquire reach Redis ``lands_after`` seconds late, run ``on_landing`` (if any) right
    after it ran, and answer ``answers_after`` seconds later still: an acquire whose bytes are on the
    wire when its caller gives up, which Redis runs whatever the caller does."""
    from temporal_fire_once.core.scripts import ACQUIRE

    async def slow(redis: Redis, keys: list[str], args: list[object]) -> object:
        async def land() -> object:
            await asyncio.sleep(lands_after)
            reply = await ACQUIRE(redis, keys, args)  # type: ignore[arg-type]
            if on_landing is not None:
                await on_landing()
            await asyncio.sleep(answers_after)
            return reply

        return await asyncio.shield(asyncio.ensure_future(land()))

    monkeypatch.setattr("temporal_fire_once.core.guard.ACQUIRE", slow)


async def test_a_timed_out_acquire_that_lands_later_is_undone_after_it_lands(client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compare-and-delete that undoes a timed-out acquire must not overtake it: sent at once,
    on another connection, it could run first, and the late lock would keep everyone out."""
    _slow_acquire(monkeypatch, lands_after=0.3, answers_after=0)  # the caller gives up at 0.1 s
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix, store_timeout_ms=100))
    with pytest.raises(FireOnceStoreUnavailable):
        await guard.acquire(DispatchTarget("s-late", "step", "job"))
    await asyncio.sleep(0.5)
    assert await client.exists(guard.keys.lock("s-late", "step")) == 0


async def test_the_undo_of_a_timed_out_acquire_puts_back_the_waiters_parked_on_its_lock(
    client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TypeScript worker can park on the late lock before the undo takes it with its list: the
    entries go back on the list, for that worker's reap (PROTOCOL.md section 7)."""
    keys = FireOnceKeys(prefix)
    waiters = keys.scope_base("s-undo") + ":w:step"
    entry = b"w::a task token"
    _slow_acquire(monkeypatch, lands_after=0, answers_after=0.3, on_landing=lambda: client.rpush(waiters, entry))
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix, store_timeout_ms=100))
    with pytest.raises(FireOnceStoreUnavailable):
        await guard.acquire(DispatchTarget("s-undo", "step", "job"))
    await asyncio.sleep(0.5)
    assert await client.exists(keys.lock("s-undo", "step")) == 0
    assert await client.lrange(waiters, 0, -1) == [entry]


async def test_a_cluster_clients_own_error_fails_closed_as_store_unavailable(client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """redis-py raises some cluster errors (a slot no node serves, mid-resharding) from outside
    ``RedisError``; they must reach the activity as the retryable ``FireOnceStoreUnavailable``."""
    from redis.exceptions import SlotNotCoveredError

    async def uncovered(*args: object) -> object:
        raise SlotNotCoveredError("slot 1234 is not covered by the cluster")

    monkeypatch.setattr(client, "evalsha", uncovered)
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    with pytest.raises(FireOnceStoreUnavailable, match="not covered"):
        await guard.acquire(DispatchTarget("s-slot", "step", "job"))


async def test_a_user_that_may_not_write_the_unset_marker_gets_a_config_error_saying_what_to_run() -> None:
    """A namespace-confined ACL user may read the protocol marker but not write it (PROTOCOL.md
    section 1): on a fresh prefix it must say what an admin runs, not fail as an outage."""
    from .conftest import redis_server

    with redis_server() as url:
        admin = Redis.from_url(url)
        await admin.acl_setuser("tenant", enabled=True, passwords=["+pw"], keys=["~t:*", "%R~fire-once:protocol"], commands=["+@all"])
        tenant = Redis.from_url(url, username="tenant", password="pw")
        try:
            with pytest.raises(FireOnceConfigError, match="may not write it: have an admin run SET fire-once:protocol 3 once"):
                await FireOnceGuard(tenant).claim_protocol()
        finally:
            await tenant.aclose()
            await admin.aclose()


@pytest.mark.parametrize("args_hash", ["h" * 65, "a:b", "a b", 7])
async def test_an_args_hash_the_records_cannot_carry_is_refused_before_redis_is_asked(client: Redis, prefix: str, args_hash: object) -> None:
    """The args hash sits between separators in the lock and artifact records: a colon, a space or
    more than 64 characters would write a result the guard cannot read back, or a self-conflict."""
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    with pytest.raises(FireOnceInvalidId, match=r"args_hash must be base64url, at most 64 characters"):
        await guard.acquire(DispatchTarget("s-hash", "step", "job", args_hash=args_hash))  # type: ignore[arg-type]
    assert await client.keys(f"{prefix}*") == []


def test_an_error_reply_is_quoted_as_redis_sent_it_code_first() -> None:
    """redis-py drops the code of the replies it has a class for; ``status_code`` (redis-py 8)
    or, before it, the class gives it back, and a code already in the message is not doubled."""
    from redis.exceptions import MasterDownError, MovedError, NoPermissionError, ResponseError

    from temporal_fire_once.core.store_calls import replied

    assert replied(ResponseError("DB index is out of range", status_code="ERR")) == "ERR DB index is out of range"
    assert replied(NoPermissionError("this user has no permissions to run the 'wait' command")).startswith("NOPERM this user")
    assert replied(MovedError("3999 127.0.0.1:6381")) == "MOVED 3999 127.0.0.1:6381"  # a subclass of AskError
    assert replied(MasterDownError("Link with MASTER is down")) == "MASTERDOWN Link with MASTER is down"  # of ClusterDownError
    assert replied(ResponseError("WRONGTYPE Operation against a key", status_code="WRONGTYPE")) == "WRONGTYPE Operation against a key"
    assert replied(ResponseError("a reply redis-py left whole")) == "a reply redis-py left whole"
