"""Odd but plausible Python inputs on a real Redis: an ID given as a ``str`` subclass (a string
enum), and integer arguments past what a double carries. Dispatches are counted by the test,
never by the guard."""

from __future__ import annotations

import enum

import pytest
from redis.asyncio import Redis
from temporalio.client import WorkflowFailureError
from temporalio.converter import PayloadConverter

from typing import Any

from temporal_fire_once.core import (
    Acquired,
    DispatchTarget,
    FastForward,
    FireOnceConfigError,
    FireOnceGuard,
    FireOnceKeyConflict,
    FireOnceKeys,
    GuardOptions,
    Held,
    WakeHub,
    claim_protocol,
    format_artifact,
    parse_artifact,
)
from temporal_fire_once.core.keys import check_key_prefix
from temporal_fire_once.worker import args_hash
from temporal_fire_once.worker.args_hash import args_hashes

from .pyactivities import counter_key
from .pyworkflows import GuardedCall
from .test_worker import run_worker


class Jobs(str, enum.Enum):
    """A string enum written the pre-3.11 way: ``format()`` gives ``Jobs.SUMMARY``, not its value."""

    SUMMARY = "summary"
    STEP = "dispatch-summary"


class Disguised(str):
    """A string whose ``format()`` names another scope than its value."""

    def __format__(self, spec: str) -> str:
        return "victim"


def test_an_id_or_prefix_given_as_a_str_subclass_names_the_keys_of_its_value() -> None:
    """Keys are built with f-strings: ``encode_id`` returned a plain ID as the object it was given,
    so a ``(str, Enum)`` member put ``Jobs.SUMMARY`` in the key where its value and the TypeScript
    package put ``summary``, and a subclass's ``__format__`` could name another scope's keys."""
    keys = FireOnceKeys("fire-once")
    assert keys.artifact("s", Jobs.SUMMARY) == keys.artifact("s", "summary") == "fire-once:v3:{default/s}:a:summary"
    assert keys.lock(Disguised("mine"), Jobs.STEP) == keys.lock("mine", "dispatch-summary")
    assert FireOnceKeys("fire-once", Disguised("tenant-b")).log() == "fire-once:v3:tenant-b:log"
    assert type(check_key_prefix("prefix", Disguised("app"))) is str
    assert FireOnceKeys(Disguised("app")).lock("s", "x") == "app:v3:{default/s}:l:x"


async def test_a_step_given_as_a_string_enum_on_one_worker_and_as_its_value_on_another_dispatches_once(client: Redis, prefix: str) -> None:
    """Two workers of one deployment name the step and job type, one with the enum, one with its
    value (a rolling refactor): the second must fast-forward to the first's result, not run again."""
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    dispatched: list[str] = []  # a counter the guard does not own
    for step in (Jobs.STEP, "dispatch-summary"):
        job_type = Jobs.SUMMARY if isinstance(step, Jobs) else "summary"
        outcome = await guard.acquire(DispatchTarget("session-1", step, job_type))
        if isinstance(outcome, Acquired):
            dispatched.append(str(step))
            await guard.commit(outcome.lease, b"result")
        else:
            assert isinstance(outcome, FastForward), outcome
    assert len(dispatched) == 1, dispatched
    assert await client.exists(FireOnceKeys(prefix).artifact("session-1", "summary")) == 1


async def test_integer_arguments_a_double_cannot_tell_apart_still_conflict(client: Redis, prefix: str) -> None:
    """Two 64-bit IDs (a snowflake, a Discord ID) 1 apart round to one double: hashed through it,
    the second call got the result made for the first instead of ``FireOnceKeyConflict``."""
    first, second = 1234567890123456789, 1234567890123456788
    converter = PayloadConverter.default
    assert args_hash([first], converter) != args_hash([second], converter)
    assert args_hash([{"id": first}], converter) != args_hash([{"id": second}], converter)
    # What a double carries exactly, or a number TypeScript wrote, still hashes as TypeScript hashes it.
    assert args_hash([2**53], converter) == args_hash([float(2**53)], converter)
    assert args_hash([1234567890123456800], converter) == args_hash([1.2345678901234568e18], converter)

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    dispatched: list[int] = []
    outcome = await guard.acquire(DispatchTarget("s", "fetch", "fetch", args_hash=args_hash([first], converter)))
    assert isinstance(outcome, Acquired)
    dispatched.append(first)
    await guard.commit(outcome.lease, b"made for the first")
    try:
        later = await guard.acquire(DispatchTarget("s", "fetch", "fetch", args_hash=args_hash([second], converter)))
    except FireOnceKeyConflict:
        later = None
    assert later is None, f"the call with {second} got {later!r}"
    assert dispatched == [first]


# The hash 0.7.0's args_hash.py took of [1234567890123456789], through the nearest double: the
# hash its locks, results and parked waiters carry.
HASHED_BY_0_7 = "5XzZPFLFbidBiPt-KL2QUFjv8d_Mpv1HxRc3SN08V10"


async def test_a_lock_or_result_stored_by_0_7_for_such_an_integer_still_serves_the_same_call(client: Redis, prefix: str) -> None:
    """Records 0.7 wrote carry its hash until they expire (results: 7 days by default). Read as
    another call's, every re-run of a completed step with a snowflake ID in its arguments would fail
    with ``FireOnceKeyConflict`` after the upgrade; they are the call's former hash instead."""
    first, second = 1234567890123456789, 1234567890123456788
    converter = PayloadConverter.default
    exact, former = args_hashes([first], converter)
    assert former == HASHED_BY_0_7 != exact
    assert args_hashes([2**53], converter)[1] == args_hashes([{"id": "x" * 20}], converter)[1] == ""  # nothing else has one

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    held = await guard.acquire(DispatchTarget("s", "fetch", "fetch", args_hash=HASHED_BY_0_7, holder="0.7 worker"))
    assert isinstance(held, Acquired)
    call = DispatchTarget("s", "fetch", "fetch", args_hash=exact, former_args_hash=former, holder="0.8 worker")
    assert isinstance(await guard.acquire(call), Held)  # waits for 0.7's dispatch, no conflict
    await guard.commit(held.lease, b"made for the first by 0.7")
    again = await guard.acquire(call)
    assert isinstance(again, FastForward) and again.artifact == b"made for the first by 0.7"
    # 0.7's records cannot tell the two integers apart: they serve either, as 0.7 did. Records
    # written from 0.8 on can (test_integer_arguments_a_double_cannot_tell_apart_still_conflict).
    assert args_hashes([second], converter)[1] == HASHED_BY_0_7


async def test_a_python_worker_fast_forwards_to_a_result_0_7_stored_for_a_snowflake_id(temporal_env: Any, client: Redis, prefix: str) -> None:
    """End to end: the result of a call with a snowflake ID, its record rewritten with the hash 0.7
    took, serves the same call again (1 dispatch) instead of failing it with a key conflict."""
    args = ["big-id", 1234567890123456789]
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        first = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-big", "bigIdJob", args], id=f"{queue}-1", task_queue=queue)
        key = FireOnceKeys(prefix).artifact("s-big", "bigIdJob")
        raw = await client.get(key)
        assert isinstance(raw, bytes)
        stored = parse_artifact(raw)
        assert stored is not None and stored.args_hash == args_hashes(args, PayloadConverter.default)[0]
        await client.set(key, format_artifact(args_hashes(args, PayloadConverter.default)[1], stored.payload), keepttl=True)
        again = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-big", "bigIdJob", args], id=f"{queue}-2", task_queue=queue)
    assert again == first == {"counterId": "big-id", "id": "1234567890123456789"}
    assert await client.get(counter_key(prefix, "big-id")) == b"1"


async def test_a_result_stored_for_an_integer_a_double_carries_serves_the_other_integers_of_its_double(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """What the former hash costs, pinned so the docs cannot claim more: a result stored from 0.8 on
    for 2**53, which a double carries, has the hash 0.7 took of 2**53 + 1 (its former hash), so it
    serves a later call with 2**53 + 1 as 0.7 did, for as long as it is kept. The converse conflicts."""
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        calls = [(2**53, "s-carried"), (2**53 + 1, "s-carried"), (2**53 + 1, "s-rounded"), (2**53, "s-rounded")]
        outcomes: list[Any] = []
        for n, (big_id, scope) in enumerate(calls):
            try:
                outcomes.append(
                    await temporal_env.client.execute_workflow(
                        GuardedCall.run, args=[scope, "bigIdJob", [scope, big_id]], id=f"{queue}-{n}", task_queue=queue
                    )
                )
            except WorkflowFailureError as err:
                outcomes.append(getattr(getattr(err.cause, "cause", None), "type", None))
    assert [outcome if isinstance(outcome, str) else outcome["id"] for outcome in outcomes] == [
        "9007199254740992",
        "9007199254740992",  # made for 2**53
        "9007199254740993",
        "FireOnceKeyConflict",
    ]
    assert [await client.get(counter_key(prefix, scope)) for scope in ("s-carried", "s-rounded")] == [b"1", b"1"]


@pytest.mark.parametrize("redis", [None, "redis://localhost:6379", object()])
async def test_the_core_building_blocks_refuse_what_is_no_redis_client_naming_themselves(redis: object, client: Redis, prefix: str) -> None:
    """``WakeHub`` took any argument and failed at its first join; ``claim_protocol`` failed with a
    bare ``AttributeError`` (TypeScript's ``WakeHub``, ``claimProtocol`` and ``DispatchLog`` alike;
    defect 167 in docs/reliability.md). Both are ``FireOnceConfigError`` naming the call now, and
    nothing is written."""
    keys = FireOnceKeys(prefix)
    with pytest.raises(FireOnceConfigError, match=r"^WakeHub: redis must be a redis.asyncio Redis or RedisCluster"):
        WakeHub(redis)  # type: ignore[arg-type]
    with pytest.raises(FireOnceConfigError, match=r"^claim_protocol: redis must be a redis.asyncio Redis or RedisCluster"):
        await claim_protocol(redis, keys)  # type: ignore[arg-type]
    assert await client.keys(f"{prefix}*") == []
