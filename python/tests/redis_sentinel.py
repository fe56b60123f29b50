"""One Redis Sentinel spawned for a test (``test/support/sentinel.ts``): ``redis-server <conf>
--sentinel``, which is all the ``redis-sentinel`` binary is, monitoring one master. For tests that
give a sentinel's address where a data node's belongs."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
import redis

from .conftest import free_port


@contextmanager
def spawn_sentinel(master_host: str, master_port: int, name: str = "orders") -> Iterator[str]:
    """A sentinel monitoring ``master_host:master_port`` as master group ``name``: its own URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server not found: install it (apt-get install -y redis-server)")
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="fire-once-py-sentinel-"))
    conf = workdir / "sentinel.conf"  # a sentinel rewrites its config file: one of its own
    conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {workdir}\nsentinel monitor {name} {master_host} {master_port} 1\n")
    proc = subprocess.Popen([binary, str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis(port=port, socket_timeout=1) as probe:
                    if probe.ping():
                        break
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"redis-server --sentinel did not start on port {port}")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
