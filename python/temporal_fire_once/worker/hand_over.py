"""Complete or fail the parked waiters a hold handed over, through the Temporal client
(``src/worker/hand-over.ts``; PROTOCOL.md section 7). Only a hold hands them over here: after a
commit or release this package puts them back for the reap of the worker that parked them, which
completes them with the stored artifact, but a result that is not stored can reach them only from
the holder, which has it in hand."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from typing import Awaitable, Callable, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.client import AsyncActivityHandle, Client
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ..core.outcomes import DispatchTarget
from ..core.records import parse_waiter

_logger = logging.getLogger("temporal_fire_once")

PARKED_RETRY_DELAY = timedelta(milliseconds=1)
"""The retry delay of a waiter failed so that it retries: as good as none, so one of them acquires at once."""

HandOver = Callable[[Client, Sequence[bytes]], Awaitable[None]]
"""What the waiters a hold took are given (their task tokens): a result or a failure."""


async def complete_waiters(client: Client, tokens: Sequence[bytes], payload: Payload) -> None:
    """Complete the waiters with ``payload``, the result as the worker's payload converter made
    it: the client runs the worker's codec over it, exactly as over the holder's own result."""
    await asyncio.gather(*(_settle(client, token, "complete", lambda handle: handle.complete(RawValue(payload))) for token in tokens))


async def fail_waiters_with(client: Client, tokens: Sequence[bytes], error: Exception) -> None:
    """Fail the waiters with ``error`` as it is: the holder's own non-retryable error, say."""
    await asyncio.gather(*(_settle(client, token, "fail", lambda handle: handle.fail(error)) for token in tokens))


async def settle_waiters(client: Client, entries: Sequence[bytes], target: DispatchTarget, settle: HandOver) -> None:
    """Hand the waiters of ``entries`` the outcome of a dispatch of ``target`` (its args hash, or
    its former one: ``DispatchTarget.former_args_hash``):
    ``settle`` gets the task tokens of those parked with the same arguments (or with none
    checked); those parked with other arguments (on the lock of a holder that died before this one
    took the step over) are failed so that they retry, and their retry decides for itself."""
    same: list[bytes] = []
    other: list[bytes] = []
    for entry in entries:
        waiter = parse_waiter(entry)
        mine = target.args_hash
        (other if mine != "" and waiter.args_hash not in ("", mine, target.former_args_hash) else same).append(waiter.token)
    if other:
        _logger.warning("fire-once: parked waiters of other arguments than the dispatch that settled; failing them so they retry (step %r)", target.step)
        retry = ApplicationError(
            f"step {json.dumps(target.step)} was dispatched with other arguments than this call's; retry",
            type="FireOnceInFlight",
            non_retryable=False,
            next_retry_delay=PARKED_RETRY_DELAY,
        )
        await fail_waiters_with(client, other, retry)
    if same:
        await settle(client, same)


async def _settle(client: Client, token: bytes, what: str, call: Callable[[AsyncActivityHandle], Awaitable[None]]) -> None:
    """One completion or failure; never raises. Temporal answers NOT_FOUND for a waiter that is
    gone (cancelled, terminated, timed out): nothing to do. Anything else (Temporal unreachable
    past the client's retries) leaves the waiter to its heartbeat or start-to-close timeout, and
    its retry checks the guard again."""
    try:
        await call(client.get_async_activity_handle(task_token=token))
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            _logger.debug("fire-once: could not %s a parked waiter (gone: cancelled, terminated or timed out): %s", what, err)
            return
        _logger.warning("fire-once: could not %s a parked waiter; its heartbeat or start-to-close timeout will end it: %s", what, err)
    except Exception as err:
        _logger.warning("fire-once: could not %s a parked waiter; its heartbeat or start-to-close timeout will end it: %s", what, err)
