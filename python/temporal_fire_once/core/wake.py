"""Wake-ups by pub/sub (PROTOCOL.md section 8, ``src/core/wake.ts``): one subscription
connection per worker, shared by every waiter; a commit or release published on a scope's wake
channel sets the events of the waiters that joined it, so they re-run ``acquire`` at once
instead of at their next poll. Polling stays the fallback: a lost message costs one poll."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .options import check_redis_client
from .scripts import RedisClient
from .store_calls import cancel_and_wait

_logger = logging.getLogger("temporal_fire_once")


class WakeHub:
    """Shared subscriptions. ``join`` returns an event set on every message of the channel;
    ``leave`` gives it back. ``close`` ends the subscription connection.

    >>> import redis.asyncio
    >>> hub = WakeHub(redis.asyncio.Redis())
    """

    def __init__(self, redis: RedisClient) -> None:
        check_redis_client(redis, "WakeHub")
        self._redis = redis
        self._pubsub: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._events: dict[bytes, set[asyncio.Event]] = {}
        self._leaving: set[asyncio.Task[None]] = set()  # unsubscribes under way, kept from the GC
        self._connecting = asyncio.Lock()  # the first SUBSCRIBE, which connects the pubsub, goes alone
        self._closing = False

    async def join(self, channel: str) -> asyncio.Event:
        event = asyncio.Event()
        key = channel.encode()
        events = self._events.setdefault(key, set())
        events.add(event)
        if len(events) == 1:
            try:
                if self._pubsub is None:
                    self._pubsub = self._redis.pubsub()
                await self._subscribe(self._pubsub, channel)
            except BaseException:
                await self.leave(channel, event)
                raise
            if self._reader is None or self._reader.done():
                self._reader = asyncio.get_running_loop().create_task(self._read())
        return event

    async def _subscribe(self, pubsub: Any, channel: str) -> None:
        """Subscribe on the pubsub's one connection. Until it has one, a SUBSCRIBE takes it from
        the pool, waiting for the connect: one sent meanwhile would take another, subscribed for
        good and never read nor given back (docs/reliability.md, 150). So the first goes alone."""
        if pubsub.connection is not None:
            await pubsub.subscribe(channel)
            return
        async with self._connecting:
            await pubsub.subscribe(channel)

    async def leave(self, channel: str, event: asyncio.Event) -> None:
        """Give the event back. Never suspends: the last one's unsubscribe runs in the background,
        so a caller that leaves while it holds a lock cannot be cancelled there and lose it."""
        key = channel.encode()
        events = self._events.get(key)
        if events is None:
            return
        events.discard(event)
        if not events:
            del self._events[key]
            task = asyncio.get_running_loop().create_task(self._unsubscribe(self._pubsub, channel))
            self._leaving.add(task)
            task.add_done_callback(self._leaving.discard)

    async def _unsubscribe(self, pubsub: Any, channel: str) -> None:
        if channel.encode() in self._events or pubsub is not self._pubsub:
            return  # joined again meanwhile (its SUBSCRIBE may be sent already), or closed
        try:
            await pubsub.unsubscribe(channel)
        except Exception as err:  # a dead connection unsubscribes by itself
            _logger.debug("fire-once: unsubscribe from %s failed: %s", channel, err)

    async def close(self) -> None:
        if self._reader is not None:
            self._closing = True  # the reader ends at its next turn should its cancellation be swallowed
            try:
                await cancel_and_wait(self._reader)
            finally:
                self._closing = False
        if self._pubsub is not None:
            await self._pubsub.aclose()
        # A later join starts over with a new connection.
        self._pubsub, self._reader = None, None
        self._events.clear()

    async def _read(self) -> None:
        """Read while a waiter is joined, then end: redis-py reconnects and resubscribes at every
        read, so a reader with no one to wake would keep a connection up after its client was
        closed, or retry for ever once Redis is gone. The next ``join`` starts a reader again."""
        while self._events and not self._closing:
            try:
                message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # redis-py reconnects and resubscribes on the next read
                if not self._events:
                    return
                _logger.debug("fire-once: wake subscription read failed: %s", err)
                await asyncio.sleep(0.5)
                continue
            if message is not None and message.get("type") == "message":
                for event in self._events.get(message["channel"], ()):
                    event.set()
