"""A slow link to Redis: a TCP proxy on a free port that forwards each command at once and hands
each reply back ``reply_delay_s`` late, in order. Closing it cuts every connection through it, so
nothing sent through it can land after the ``async with``."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator
from urllib.parse import urlsplit


@asynccontextmanager
async def slow_link(redis_url: str, reply_delay_s: float) -> AsyncIterator[str]:
    """The URL of a proxy to ``redis_url`` whose replies come ``reply_delay_s`` late."""
    upstream = urlsplit(redis_url)
    writers: list[asyncio.StreamWriter] = []
    pipes: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(upstream.hostname, upstream.port)
        writers.extend((writer, up_writer))
        for pipe in (_forward(reader, up_writer), _delay(up_reader, writer, reply_delay_s)):
            task = asyncio.ensure_future(pipe)
            pipes.add(task)
            task.add_done_callback(pipes.discard)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"redis://127.0.0.1:{port}"
    finally:
        server.close()
        for task in list(pipes):
            task.cancel()
        for writer in writers:
            writer.close()
        await asyncio.gather(*pipes, return_exceptions=True)
        await server.wait_closed()


async def _forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Commands, at once; the client's close closes the connection to Redis."""
    try:
        while chunk := await reader.read(65_536):
            writer.write(chunk)
            await writer.drain()
    except ConnectionError:
        pass
    writer.close()


async def _delay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    """Replies, each ``delay_s`` after it came, in the order they came (a reader never waits for a write)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def read() -> None:
        while chunk := await reader.read(65_536):
            queue.put_nowait((loop.time() + delay_s, chunk))
        queue.put_nowait((loop.time() + delay_s, b""))

    reading = asyncio.ensure_future(read())
    try:
        while True:
            due, chunk = await queue.get()
            await asyncio.sleep(max(0.0, due - loop.time()))
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        reading.cancel()
        writer.close()
