"""One Redis Sentinel spawned for a test (``test/support/sentinel.ts``): ``redis-server <conf>
--sentinel``, which is all the ``redis-sentinel`` binary is, monitoring one master. For tests that
give a sentinel's address where a data node's belongs."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from .conftest import Spawn, spawn_on_free_ports, stop_servers


@contextmanager
def spawn_sentinel(master_host: str, master_port: int, name: str = "orders") -> Iterator[str]:
    """A sentinel monitoring ``master_host:master_port`` as master group ``name``: its own URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server not found: install it (apt-get install -y redis-server)")
    workdir = Path(tempfile.mkdtemp(prefix="fire-once-py-sentinel-"))
    conf = workdir / "sentinel.conf"  # a sentinel rewrites its config file: one of its own

    def command(free: list[int]) -> list[Spawn]:
        conf.write_text(f"port {free[0]}\nbind 127.0.0.1\ndir {workdir}\nsentinel monitor {name} {master_host} {master_port} 1\n")
        return [([binary, str(conf), "--sentinel"], free[0])]

    procs: list[subprocess.Popen[bytes]] = []
    try:
        (port,), procs = spawn_on_free_ports(1, command, "redis-server --sentinel")
        yield f"redis://127.0.0.1:{port}"
    finally:
        stop_servers(procs)
        shutil.rmtree(workdir, ignore_errors=True)
