"""A worker of whichever ``temporal_fire_once`` its process imports, for ``test_compat_fleet.py``,
which starts it with an earlier release's package first on its path (``release_package.py``):

- ``python -m tests.compat_worker serve <temporal> <redis> <prefix> <release> <queue>...``: one
  worker per task queue, with the plugin and ``compat_activities``; prints ``READY <package dir>``
  once they poll, and stops on SIGTERM.
- ``python -m tests.compat_worker replay <redis> <histories.json>``: replays each ``{"name", "history"}``
  with the plugin's workflow interceptor; prints the failures as JSON, by name.

Imports nothing from ``tests`` but the compat modules, which import nothing from it either."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, Worker

import temporal_fire_once
from temporal_fire_once import FireOncePlugin

from .compat_activities import compat_activities
from .compat_workflows import WORKFLOWS


async def serve(target: str, redis_url: str, prefix: str, release: str, queues: list[str]) -> None:
    redis: Redis = Redis.from_url(redis_url)
    client = await Client.connect(target)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    workers = [
        Worker(
            client,
            task_queue=queue,
            workflows=WORKFLOWS,
            activities=compat_activities(redis, prefix, release),
            plugins=[FireOncePlugin(redis, key_prefix=prefix, poll_interval_ms=50)],
        )
        for queue in queues
    ]
    for worker in workers:
        await worker.__aenter__()
    print(f"READY {Path(temporal_fire_once.__file__).resolve().parent}", flush=True)
    await stop.wait()
    for worker in workers:
        await worker.__aexit__(None, None, None)
    await redis.aclose()


async def replay(redis_url: str, path: str) -> None:
    redis: Redis = Redis.from_url(redis_url)
    replayer = Replayer(workflows=WORKFLOWS, plugins=[FireOncePlugin(redis, key_prefix="compat-replay")])
    failures: dict[str, str] = {}
    for item in json.loads(Path(path).read_text()):
        history: dict[str, Any] = item["history"]
        workflow_id = history["events"][0]["workflowExecutionStartedEventAttributes"]["workflowId"]
        result = await replayer.replay_workflow(WorkflowHistory.from_json(workflow_id, history), raise_on_replay_failure=False)
        if result.replay_failure is not None:
            failures[item["name"]] = type(result.replay_failure).__name__
    print(json.dumps({"package": str(Path(temporal_fire_once.__file__).resolve().parent), "failures": failures}), flush=True)
    await redis.aclose()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        asyncio.run(serve(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]))
    else:
        asyncio.run(replay(sys.argv[2], sys.argv[3]))
    sys.stdout.flush()
    os._exit(0)  # past the SDK runtime's threads, which can abort the interpreter's finalization
