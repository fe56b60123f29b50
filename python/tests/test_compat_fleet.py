"""Python workers of 0.8.0 and of HEAD on one Redis and one task queue, as a fleet upgraded one
worker at a time runs for a while: they race on the same steps, wait for each other both ways,
write one dispatch log, and leave histories that both replay. The 0.8.0 workers run in a process
of their own that imports the release's package, taken from its commit (``release_package.py``);
dispatches are counted by the jobs themselves (``compat_activities.py``), never by the guard."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import uuid
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from redis.asyncio import Redis
from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer, Worker

from temporal_fire_once import FireOnceKeys, FireOncePlugin

from .compat_activities import compat_activities, counter_key, dispatched_by_key, gate_key
from .compat_workflows import WORKFLOWS
from .conftest import collect_garbage, equals, until
from .release_package import RELEASE_0_8_0, Release, release_env, release_package, release_unavailable
from .ts_cli import fire_once

RELEASE = RELEASE_0_8_0
UNAVAILABLE = release_unavailable(RELEASE)
PREFIX = f"pyfleet-{uuid.uuid4().hex[:8]}"
SHARED = f"pyfleet-{uuid.uuid4().hex[:8]}"
KEYS = FireOnceKeys(PREFIX)


def own(side: str) -> str:
    """A task queue only one release's worker polls, so that a test can choose the release of a run."""
    return f"{SHARED}-{side}"


def version_of(side: str) -> str:
    return RELEASE.version if side == "old" else "HEAD"


class Fleet:
    """0.8.0's workers (a process) and HEAD's (this one), on the shared task queue and each on its own."""

    def __init__(self, env: Any, redis: Redis, redis_url: str) -> None:
        self.env, self.redis, self.redis_url = env, redis, redis_url
        self.started: list[WorkflowHandle[Any, Any]] = []
        self._stack = AsyncExitStack()
        self._old: asyncio.subprocess.Process | None = None

    async def start(self, workflow: str, args: list[Any], queue: str) -> WorkflowHandle[Any, Any]:
        handle: WorkflowHandle[Any, Any] = await self.env.client.start_workflow(workflow, args=args, id=f"{workflow}-{uuid.uuid4().hex[:8]}", task_queue=queue)
        self.started.append(handle)
        return handle

    async def up(self) -> None:
        self._old = await old_workers(self.env, self.redis_url, SHARED, own("old"))
        for queue in (SHARED, own("head")):
            await self._stack.enter_async_context(head_worker(self.env, self.redis, queue))

    async def down(self) -> None:
        """Stop every worker, which sends their dispatch logs' last entries. Idempotent."""
        await self._stack.aclose()
        if self._old is not None:
            self._old.terminate()
            await self._old.wait()
            self._old = None


def head_worker(env: Any, redis: Redis, queue: str, **options: Any) -> Worker:
    collect_garbage()
    plugin = FireOncePlugin(redis, key_prefix=PREFIX, poll_interval_ms=50)
    return Worker(env.client, task_queue=queue, workflows=WORKFLOWS, activities=compat_activities(redis, PREFIX, "HEAD"), plugins=[plugin], **options)


async def old_workers(env: Any, redis_url: str, *queues: str, release: Release = RELEASE, prefix: str = PREFIX) -> asyncio.subprocess.Process:
    """A process of ``release``'s workers (0.8.0's) on ``queues``, once they poll. It runs outside
    ``python/``, so that the release's package comes first on its path, and says which package it
    imported."""
    target = env.client.service_client.config.target_host
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "tests.compat_worker", "serve", target, redis_url, prefix, release.version, *queues],
        cwd=str(release_package(release).parent),
        env=release_env(release),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    async with asyncio.timeout(60):
        line = (await process.stdout.readline()).decode()
    assert line.startswith("READY "), f"the {release.version} worker process exited before READY ({line!r})"
    assert Path(line.split(" ", 1)[1].strip()).is_relative_to(release_package(release)), line
    return process


@pytest.fixture(scope="module")
async def fleet(temporal_env: Any, redis_url: str) -> AsyncIterator[Fleet]:
    redis: Redis = Redis.from_url(redis_url)
    fleet = Fleet(temporal_env, redis, redis_url)
    try:
        await fleet.up()
        yield fleet
    finally:
        await fleet.down()
        keys = [key async for key in redis.scan_iter(match=f"{PREFIX}:*")]
        if keys:
            await redis.delete(*keys)
        await redis.aclose()


async def count(redis: Redis, job: str, scope: str) -> int:
    return int(await redis.get(counter_key(PREFIX, job, scope)) or 0)


async def subscribers(redis: Redis, scope: str) -> int:
    """Connections on the scope's wake channel: a waiter in its slot listens there (the holder does not)."""
    return int((await redis.pubsub_numsub(KEYS.wake_channel(scope)))[0][1])


async def outcome(redis: Redis, scope: str, step: str, results: list[Any]) -> dict[str, Any]:
    """What the guarantee leaves: distinct results, dispatches and by which release, the guard's keys still there."""
    dispatched_by: list[bytes] = await redis.lrange(dispatched_by_key(PREFIX, scope), 0, -1)  # type: ignore[assignment]
    return {
        "results": len({(r["scope"], r["nonce"]) for r in results}),
        "dispatches": await count(redis, step, scope),
        "dispatched_by": [v.decode() for v in dispatched_by],
        "left": await redis.exists(KEYS.lock(scope, step), KEYS.waiters(scope, step)),
    }


async def holder_and_waiter(fleet: Fleet, scope: str, holder_side: str, waiter_side: str, local: bool) -> list[WorkflowHandle[Any, Any]]:
    """A holder of ``gatedJob`` in ``scope`` on ``holder_side``'s release, and a waiter on
    ``waiter_side``'s, waiting in its slot (Python's ``'wait'``) until the test opens the gate."""
    holder = await fleet.start("CompatQueuedRun", [scope, own(holder_side), False], own(holder_side))
    await until(lambda: equals(count(fleet.redis, "gatedJob", scope), 1), "the holder to dispatch")
    waiter = await fleet.start("CompatQueuedRun", [scope, own(waiter_side), local], own(waiter_side))
    await until(lambda: equals(subscribers(fleet.redis, scope), 1), "the waiter to wait in its slot")
    return [holder, waiter]


async def results(handles: list[WorkflowHandle[Any, Any]]) -> list[Any]:
    return list(await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60))


async def test_racing_on_the_same_steps_on_the_shared_task_queue_and_on_each_releases_own_one_dispatch_per_step(fleet: Fleet) -> None:
    scopes = ["race-1", "race-2", "race-3"]
    queues = [SHARED, SHARED, own("old"), own("head")]
    runs = [
        [*[await fleet.start("CompatGuardedRun", [scope, 200], q) for q in queues], *[await fleet.start("CompatLocalRun", [scope, 200], q) for q in queues]]
        for scope in scopes
    ]
    for scope, handles in zip(scopes, runs):
        found = await outcome(fleet.redis, scope, "dispatchJob", await results(handles))
        assert len(found.pop("dispatched_by")) == 1
        assert found == {"results": 1, "dispatches": 1, "left": 0}


@pytest.mark.parametrize("local", [False, True], ids=["activity", "local activity"])
@pytest.mark.parametrize("holder_side,waiter_side", [("old", "head"), ("head", "old")])
async def test_a_waiter_on_one_release_gets_the_result_of_a_holder_on_the_other(fleet: Fleet, holder_side: str, waiter_side: str, local: bool) -> None:
    scope = f"{holder_side}-holds-{'local' if local else 'activity'}"
    holder, waiter = await holder_and_waiter(fleet, scope, holder_side, waiter_side, local)
    await fleet.redis.set(gate_key(PREFIX, scope), "open")
    found = await outcome(fleet.redis, scope, "gatedJob", await results([holder, waiter]))
    assert found == {"results": 1, "dispatches": 1, "dispatched_by": [f"{version_of(holder_side)}:gatedJob"], "left": 0}


@pytest.mark.parametrize("holder_side,waiter_side", [("old", "head"), ("head", "old")])
async def test_a_holder_whose_dispatch_fails_on_one_release_leaves_the_step_to_a_waiter_on_the_other(fleet: Fleet, holder_side: str, waiter_side: str) -> None:
    scope = f"{holder_side}-fails"
    holder, waiter = await holder_and_waiter(fleet, scope, holder_side, waiter_side, False)
    await fleet.redis.set(gate_key(PREFIX, scope), "fail-first")
    found = await outcome(fleet.redis, scope, "gatedJob", await results([holder, waiter]))
    assert found.pop("dispatched_by")[0] == f"{version_of(holder_side)}:gatedJob"  # the one that failed
    assert found == {"results": 1, "dispatches": 2, "left": 0}


handed_over: list[str] = []


async def test_a_local_wait_a_head_worker_hands_over_as_it_stops_fails_the_next_task_on_a_0_8_0_worker_until_a_head_worker_takes_it(fleet: Fleet) -> None:
    """docs/upgrading.md: a history with a hand-off replays only with 0.9.0's workflow interceptor."""
    scope, queue = "handed-over", f"{SHARED}-hand-over"
    holder = await fleet.start("CompatQueuedRun", [scope, own("old"), False], own("old"))
    await until(lambda: equals(count(fleet.redis, "gatedJob", scope), 1), "the holder to dispatch")
    async with head_worker(fleet.env, fleet.redis, queue, graceful_shutdown_timeout=timedelta(milliseconds=200)):
        waiter = await fleet.start("CompatQueuedRun", [scope, queue, True], queue)
        await until(lambda: equals(subscribers(fleet.redis, scope), 1), "the local activity to wait in its slot")
    events = (await waiter.fetch_history()).events
    assert any(e.HasField("timer_started_event_attributes") for e in events)  # the hand-off's timer
    old = await old_workers(fleet.env, fleet.redis_url, queue)
    try:
        await until(lambda: _task_failed(waiter), f"the {RELEASE.version} worker to fail the workflow task", seconds=60)  # a workflow task of a loaded dev server: a bound, not a timing claim
    finally:
        old.terminate()
        await old.wait()
    failed = next(e for e in (await waiter.fetch_history()).events if e.HasField("workflow_task_failed_event_attributes"))
    assert "Nondeterminism" in failed.workflow_task_failed_event_attributes.failure.message
    async with head_worker(fleet.env, fleet.redis, queue):
        await until(lambda: equals(subscribers(fleet.redis, scope), 1), "the local activity to wait again, on a HEAD worker")
        await fleet.redis.set(gate_key(PREFIX, scope), "open")
        found = await outcome(fleet.redis, scope, "gatedJob", await results([holder, waiter]))
    assert found == {"results": 1, "dispatches": 1, "dispatched_by": [f"{RELEASE.version}:gatedJob"], "left": 0}
    handed_over.append(waiter.id)


async def test_fire_once_report_reads_the_entries_of_both_releases(fleet: Fleet) -> None:
    await fleet.down()  # the workers send their logs' last entries as they stop
    code, out, err = await fire_once("report", "--prefix", PREFIX, "--redis", fleet.redis_url, "--json")
    assert (code, err) == (1, "")  # 1: the steps whose first dispatch failed
    report = json.loads(out)
    assert report["events"] == await fleet.redis.xlen(KEYS.log())
    counts = {s["scope"]: s["counts"] for s in report["byScope"]}
    for scope in ["race-1", "race-2", "race-3", "handed-over", *(f"{side}-holds-{kind}" for side in ("old", "head") for kind in ("local", "activity"))]:
        assert counts[scope]["dispatched"] == 1, (scope, counts[scope])
    for side in ("old", "head"):  # the dispatch by one release, the waits by the other
        assert {"dispatched": 1, "committed": 1, "in-flight-waited": 1}.items() <= counts[f"{side}-holds-activity"].items()
    assert [(d["scope"], [x.get("outcome") for x in d["dispatches"]]) for d in report["duplicates"]] == [
        ("head-fails", ["released-on-failure", "committed"]),
        ("old-fails", ["released-on-failure", "committed"]),
    ]


async def test_every_history_the_fleet_left_replays_on_head_and_on_0_8_0_all_but_the_hand_offs(fleet: Fleet) -> None:
    assert len(fleet.started) > 30
    histories = [{"name": h.id, "history": json.loads((await h.fetch_history()).to_json())} for h in fleet.started]
    replayer = Replayer(workflows=WORKFLOWS, plugins=[FireOncePlugin(fleet.redis, key_prefix=PREFIX)])
    on_head = {}
    for item in histories:
        result = await replayer.replay_workflow(WorkflowHistory.from_json(item["name"], item["history"]), raise_on_replay_failure=False)
        if result.replay_failure is not None:
            on_head[item["name"]] = type(result.replay_failure).__name__
    assert on_head == {}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
        json.dump(histories, file)
        file.flush()
        process = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "tests.compat_worker", "replay", fleet.redis_url, file.name],
            cwd=str(release_package(RELEASE).parent),
            env=release_env(RELEASE),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
    replayed = json.loads(out.decode().strip().splitlines()[-1])  # after the SDK's own log lines
    assert Path(replayed["package"]).is_relative_to(release_package(RELEASE))
    assert replayed["failures"] == {name: "NondeterminismError" for name in handed_over}


async def _task_failed(handle: WorkflowHandle[Any, Any]) -> bool:
    return any(e.HasField("workflow_task_failed_event_attributes") for e in (await handle.fetch_history()).events)


pytestmark = [pytest.mark.asyncio, pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")]
