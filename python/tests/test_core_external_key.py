"""The core guard takes an external artifact key only where the interceptor would: a key under its
prefix must be one of the target's scope and namespace that the guard does not write itself. A
``DispatchTarget`` is public input: its key is what ``acquire`` tests for and what a ``commit`` of
its lease writes, so another scope's key there read and replaced that scope's result."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from redis.asyncio import Redis

from temporal_fire_once.core import Acquired, DispatchTarget, FireOnceConfigError, FireOnceGuard, FireOnceKeys, GuardOptions

KeyOf = Callable[[FireOnceKeys], Any]

REFUSED: list[tuple[str, KeyOf]] = [
    ("another scope's result", lambda keys: keys.artifact("victim", "job")),
    ("another scope's external key", lambda keys: keys.external("victim", "job")),
    ("another namespace's external key", lambda keys: keys.for_namespace("elsewhere").external("mine", "job")),
    ("its own result key", lambda keys: keys.artifact("mine", "job")),
    ("its own lock", lambda keys: keys.lock("mine", "job")),
    ("an empty key", lambda keys: ""),
    ("no string", lambda keys: 42),
]


@pytest.mark.parametrize(("row", "key_of"), REFUSED, ids=[row for row, _ in REFUSED])
async def test_acquire_refuses_an_external_key_the_interceptor_would_refuse_and_touches_nothing(
    client: Redis, prefix: str, row: str, key_of: KeyOf
) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    victim = await guard.acquire(DispatchTarget("victim", "job", "job"))
    assert isinstance(victim, Acquired)
    await guard.commit(victim.lease, b"the victim's result")
    before = sorted([key async for key in client.scan_iter(match=f"{prefix}:*")])
    target = DispatchTarget("mine", "job", "job", external_artifact_key=key_of(guard.keys))
    with pytest.raises(FireOnceConfigError, match="external artifact key"):
        outcome = await guard.acquire(target)
        if isinstance(outcome, Acquired):  # what a caller does with the lock: the job's result goes there
            await guard.commit(outcome.lease, b"forged")
    assert sorted([key async for key in client.scan_iter(match=f"{prefix}:*")]) == before
    assert await client.get(guard.keys.artifact("victim", "job")) == await client.get(victim.lease.artifact_key)
    stored: Any = await client.get(victim.lease.artifact_key)
    assert stored.endswith(b"the victim's result")


@pytest.mark.parametrize(
    "key_of", [lambda keys: keys.external("mine", "job"), lambda keys: "elsewhere:jobs:mine"], ids=["its own external key", "outside the prefix"]
)
async def test_acquire_takes_its_own_external_key_and_one_outside_the_prefix(client: Redis, prefix: str, key_of: KeyOf) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    outcome = await guard.acquire(DispatchTarget("mine", "job", "job", external_artifact_key=key_of(guard.keys)))
    assert isinstance(outcome, Acquired)
    await guard.release(outcome.lease)
