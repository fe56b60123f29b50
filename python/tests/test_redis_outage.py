"""The guard's Redis goes away mid-run, on a Python worker, as ``test/faults/redis-outage.fault.ts``
runs it on the TypeScript side (its AOF case). The guard's Redis is a redis-server of the test's own
(AOF, ``appendfsync always``), killed with SIGKILL while three scopes' jobs are in flight with two
runs waiting on each, and started again on the same port and dir. The jobs count their dispatches
on the session's Redis, which stays up. Runs started during the outage, and the waiting ones, fail
with the retryable ``FireOnceStoreUnavailable`` and dispatch nothing; after the restart the locks
are back, every run completes, and each scope dispatched exactly once."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio.client import WorkflowHandle

from temporal_fire_once.core import FireOnceKeys

from .conftest import equals, spawn_on_free_ports, stop_servers, until
from .pyactivities import counter_key, gate_key
from .pyworkflows import GuardedCall
from .test_features import _activity_started, _pending, _subscribed, result
from .test_worker import run_worker

LEASE_MS = 300_000
"""Longer than the outage on any machine: a holder that cannot renew for a whole lease gives its
lock up (by design), and the test asserts that the locks outlive the outage."""


async def _answers(url: str) -> bool:
    probe: Redis = Redis.from_url(url, socket_connect_timeout=0.5)
    try:
        return bool(await probe.ping())
    except Exception:
        return False
    finally:
        await probe.aclose()


async def _failed_closed(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether an attempt of the run's activity has failed with the retryable FireOnceStoreUnavailable."""
    pending = await _pending(handle)
    if pending is None or not pending.HasField("last_failure"):
        return False
    failure = pending.last_failure.application_failure_info
    return bool(failure.type == "FireOnceStoreUnavailable" and not failure.non_retryable)


async def test_a_redis_killed_mid_run_and_restarted_with_aof_loses_no_lock_and_each_scope_dispatches_once(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server not found: install it (apt-get install -y redis-server)"
    workdir = tempfile.mkdtemp(prefix="fire-once-py-outage-")
    options = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", workdir]
    (port,), procs = spawn_on_free_ports(1, lambda free: [([binary, "--port", str(free[0]), *options], free[0])], "redis-server")
    url = f"redis://127.0.0.1:{port}"
    guard_redis: Redis = Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    keys = FireOnceKeys(prefix)
    env = temporal_env.client
    try:
        worker, queue = await run_worker(temporal_env, client, prefix, guard_redis=guard_redis, lease_ms=LEASE_MS, store_timeout_ms=1_000)

        def start(scope: str, name: str) -> Any:
            # Attempts enough to outlast the outage, a second apart at most.
            return env.start_workflow(
                GuardedCall.run, args=[scope, "gatedJob", [scope], None, 100], id=f"{queue}-{scope}-{name}", task_queue=queue
            )

        scopes = [f"s-{uuid.uuid4().hex[:6]}" for _ in range(3)]
        late = [f"s-{uuid.uuid4().hex[:6]}" for _ in range(3)]
        async with worker:
            runs = []
            for scope in scopes:
                runs.append(await start(scope, "holder"))
                await until(lambda: equals(client.get(counter_key(prefix, scope)), b"1"), f"the holder of {scope} to dispatch")
                waiters = [await start(scope, f"waiter-{n}") for n in (1, 2)]
                runs += waiters
                for waiter in waiters:
                    await until(lambda: _activity_started(waiter), f"{waiter.id}'s activity to start")
                # The worker's one subscriber connection listens for both.
                channel = keys.wake_channel(scope)
                await until(lambda: _subscribed(guard_redis, channel), f"the runs to wait on {scope}")
            locks = {scope: await guard_redis.get(keys.lock(scope, "gatedJob")) for scope in scopes}

            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait()
            outage_runs = [await start(scope, "during-outage") for scope in late]
            for run in [*runs[1::3], *runs[2::3], *outage_runs]:  # the waiters, and the runs started during the outage
                await until(lambda: _failed_closed(run), f"{run.id} to fail closed, retryably")
            assert [await client.get(counter_key(prefix, scope)) for scope in [*scopes, *late]] == [b"1"] * 3 + [None] * 3

            procs[0] = subprocess.Popen([binary, "--port", str(port), *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await until(lambda: _answers(url), "the guard's Redis to be back, on the same port and dir")
            assert {scope: await guard_redis.get(keys.lock(scope, "gatedJob")) for scope in scopes} == locks  # the AOF kept them

            for scope in [*scopes, *late]:
                await client.set(gate_key(prefix, scope), "open")
            results = [await result(run) for run in [*runs, *outage_runs]]
        for i, scope in enumerate(scopes):
            assert results[3 * i] == results[3 * i + 1] == results[3 * i + 2]  # the waiters got the holder's result
        assert [await client.get(counter_key(prefix, scope)) for scope in [*scopes, *late]] == [b"1"] * 6
    finally:
        await guard_redis.aclose()
        stop_servers(procs)
        shutil.rmtree(workdir, ignore_errors=True)
