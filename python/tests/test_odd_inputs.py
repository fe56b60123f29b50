"""Odd but plausible Python inputs on a real Redis: an ID given as a ``str`` subclass (a string
enum), and integer arguments past what a double carries. Dispatches are counted by the test,
never by the guard."""

from __future__ import annotations

import enum

from redis.asyncio import Redis
from temporalio.converter import PayloadConverter

from temporal_fire_once.core import Acquired, DispatchTarget, FastForward, FireOnceGuard, FireOnceKeyConflict, FireOnceKeys, GuardOptions
from temporal_fire_once.core.keys import check_key_prefix
from temporal_fire_once.worker import args_hash


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
