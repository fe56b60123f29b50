"""Every Redis call of the guard (``src/core/store-calls.ts``): bounded by ``store_timeout_ms`` and
failing closed, with the context its errors carry; and the calls nobody waits for, such as the undo
of an acquire that timed out."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any, Awaitable, Callable, TypeVar

from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterCrossSlotError,
    ClusterDownError,
    ExecAbortError,
    MasterDownError,
    MovedError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import FireOnceProtocolError, FireOnceStoreUnavailable
from .outcomes import DispatchTarget

T = TypeVar("T")
# Redis before 7.0 wraps a script's error: "Error running script (...): @user_script:18: WRONGTYPE ...".
_WRONGTYPE = re.compile(r"(^|: )WRONGTYPE\b")
# The error codes redis-py strips from a reply's message when it picks the exception's class, for
# a redis-py that does not record the code on the exception (``status_code``, from 8.0 on).
_CODES: dict[type[RedisError], str] = {
    NoPermissionError: "NOPERM",
    ReadOnlyError: "READONLY",
    OutOfMemoryError: "OOM",
    BusyLoadingError: "LOADING",
    NoScriptError: "NOSCRIPT",
    MovedError: "MOVED",
    AskError: "ASK",
    TryAgainError: "TRYAGAIN",
    MasterDownError: "MASTERDOWN",
    ClusterDownError: "CLUSTERDOWN",
    ClusterCrossSlotError: "CROSSSLOT",
    ExecAbortError: "EXECABORT",
}


def replied(err: BaseException) -> str:
    """An error reply as Redis sent it, code first (``NOPERM …``, ``READONLY …``), as ioredis's
    messages read: redis-py drops the code of the replies it has a class for."""
    text = str(err).strip()
    code = getattr(err, "status_code", None) or next((_CODES[kind] for kind in type(err).__mro__ if kind in _CODES), None)
    return f"{code} {text}" if isinstance(code, str) and not text.startswith(code) else text


async def store_call(timeout_ms: int, context: dict[str, str], call: Callable[[], Awaitable[T]]) -> T:
    """One store call, failing closed: no answer in ``store_timeout_ms`` or a connection error
    is ``FireOnceStoreUnavailable``; ``context`` goes into the error."""
    try:
        # asyncio.timeout bounds the call in this task: no extra task per call, as wait_for makes
        async with asyncio.timeout(timeout_ms / 1000):
            return await call()
    except (asyncio.TimeoutError, RedisTimeoutError) as err:
        raise FireOnceStoreUnavailable(f"Redis did not answer within {timeout_ms} ms", context) from err
    except RedisConnectionError as err:
        raise FireOnceStoreUnavailable(f"Redis is unavailable: {replied(err)}", context) from err
    except ResponseError as err:
        if _WRONGTYPE.search(str(err)) is None:
            raise FireOnceStoreUnavailable(f"Redis call failed: {replied(err)}", context) from err
        # Data of a type this library never writes does not change on a retry: fail, do not stall.
        raise FireOnceProtocolError(f"a key of this step holds a Redis type this library never writes there ({err})", context) from err
    except (RedisError, RedisClusterException) as err:  # the latter: a slot no node serves, mid-resharding
        raise FireOnceStoreUnavailable(f"Redis call failed: {replied(err)}", context) from err


_background_tasks: set[asyncio.Task[Any]] = set()


def background(call: Awaitable[Any]) -> None:
    async def quiet() -> None:
        try:
            await call
        except Exception:
            pass

    task = asyncio.ensure_future(quiet())
    _background_tasks.add(task)
    task.add_done_callback(_background_tasks.discard)


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has ended, cancelling it again every 50 ms: code under it
    that swallows a cancellation (a client library, or ``asyncio.timeout`` on Python 3.11 when the
    cancellation meets its own timeout) would otherwise keep it running, and this wait with it."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.05)
    if not task.cancelled():
        task.exception()  # retrieved, so that asyncio does not log it as never retrieved


def holder_id(token: str) -> str:
    """A short hash of a lock token, safe to log (PROTOCOL.md section 9)."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def error_context(target: DispatchTarget, key: str, token: str | None = None) -> dict[str, str]:
    context = {"key": key, "scope": target.scope, "step": target.step, "jobType": target.job_type}
    if token is not None:
        context["holder"] = holder_id(token)
    return context
