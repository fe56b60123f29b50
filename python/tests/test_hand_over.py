"""``worker/hand_over.py`` against a stand-in for the Temporal client: which waiters a hold's
outcome reaches, and that a waiter that cannot be completed never stops the others."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Sequence, cast

from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from temporal_fire_once.core import DispatchTarget
from temporal_fire_once.worker.hand_over import complete_waiters, settle_waiters


class Handles:
    """Records what each task token was given; ``gone`` tokens answer NOT_FOUND, ``down`` ones a connection error."""

    def __init__(self, gone: Sequence[bytes] = (), down: Sequence[bytes] = ()) -> None:
        self.given: dict[bytes, Any] = {}
        self.gone, self.down = set(gone), set(down)

    def get_async_activity_handle(self, *, task_token: bytes) -> Any:
        handles = self

        class Handle:
            async def _give(self, what: Any) -> None:
                if task_token in handles.gone:
                    raise RPCError("workflow execution already completed", RPCStatusCode.NOT_FOUND, b"")
                if task_token in handles.down:
                    raise RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")
                handles.given[task_token] = what

            async def complete(self, result: Any) -> None:
                await self._give(result)

            async def fail(self, error: Exception) -> None:
                await self._give(error)

        return Handle()


async def test_the_result_reaches_the_waiters_of_the_same_arguments_and_the_others_retry_at_once() -> None:
    handles = Handles()
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"r"')
    # h0: the hash an older release took of the same arguments (an integer past 2**53 in them).
    entries = [b"w:h1:same", b"w::unchecked", b"bare-token", b"w:h0:former", b"w:h2:other"]

    async def settle(client: Client, tokens: Sequence[bytes]) -> None:
        await complete_waiters(client, tokens, payload)

    target = DispatchTarget("s", "step", "step", args_hash="h1", former_args_hash="h0")
    await settle_waiters(cast(Client, handles), entries, target, settle)
    for token in (b"same", b"unchecked", b"bare-token", b"former"):
        given = handles.given[token]
        assert isinstance(given, RawValue) and given.payload == payload
    retry = handles.given[b"other"]
    assert isinstance(retry, ApplicationError)
    assert (retry.type, retry.non_retryable, retry.next_retry_delay) == ("FireOnceInFlight", False, timedelta(milliseconds=1))


async def test_a_waiter_that_is_gone_or_unreachable_does_not_stop_the_others() -> None:
    handles = Handles(gone=[b"gone"], down=[b"down"])
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"r"')
    await complete_waiters(cast(Client, handles), [b"gone", b"down", b"here"], payload)
    assert list(handles.given) == [b"here"]
