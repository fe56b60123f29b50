"""The lease renewal of a running dispatch (``Renewal`` in ``worker/dispatch.py``) stops when its
dispatch settles, even when code under a renewal swallows the cancellation that stops it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from temporal_fire_once import FireOnceStoreUnavailable
from temporal_fire_once.worker.dispatch import Renewal


class Swallowing:
    """A call that sleeps, swallows the cancellation that interrupts it, as misbehaving code under
    a call may do, then fails with ``error``; ``calls`` counts the calls begun."""

    def __init__(self, error: Exception) -> None:
        self.error, self.calls = error, 0

    async def __call__(self, *args: object, **kwargs: object) -> bool:
        self.calls += 1
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass
        raise self.error

    async def begun(self) -> None:
        while self.calls == 0:
            await asyncio.sleep(0.005)


async def test_a_renewal_stops_even_when_the_call_it_is_in_swallows_the_cancellation() -> None:
    """A cancellation swallowed under ``extend`` (by a client library, or a wrapper around the
    guard) left the renewal task looping for ever, and the dispatch waiting for it to stop: a
    worker that could not shut down (seen in CI). The stop is sent again until the task ends."""
    extend = Swallowing(FireOnceStoreUnavailable("Redis did not answer in time"))
    call = SimpleNamespace(guard=SimpleNamespace(extend=extend), decision=lambda *args, **kwargs: None)
    renewal = Renewal(cast(Any, call), cast(Any, SimpleNamespace(lock_key="k")), 30, asyncio.Event())
    renewal.start()
    try:
        await extend.begun()
        await asyncio.wait_for(renewal.stop(), 5)
        assert renewal.task is not None and renewal.task.done()
    finally:
        if renewal.task is not None and not renewal.task.done():
            renewal.task.cancel()


pytestmark = pytest.mark.asyncio
