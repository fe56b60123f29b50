"""Two instances of one workflow run in one process: a ``Replayer`` replaying the history of a run
that a live worker of the same process holds in its cache. Each instance must keep its own scope:
the replay must neither take the live instance's scope nor leave it without one. A real dev server
and a real Redis."""

from __future__ import annotations

import dataclasses
import gc
import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio import workflow
from temporalio import worker as temporal_worker
from temporalio.worker import Replayer, Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import FireOnceKeys

from .conftest import collect_garbage
from .pyactivities import counter_key, make_activities
from .pyworkflows import RescopedCall


async def _rescope(env: Any, client: Redis, prefix: str, worker: Worker, queue: str, replay: bool) -> dict[str, Any]:
    """Runs ``RescopedCall`` from ``s-first`` to ``s-second``, replaying it so far in this process
    with a ``Replayer`` first if ``replay``; what the run read and where its job was dispatched."""
    async with worker:
        handle = await env.client.start_workflow(RescopedCall.run, args=["s-first", "crossJob", ["rescoped", 0]], id=queue, task_queue=queue)
        assert await handle.query(RescopedCall.scope) == "s-first"  # its first task is done: the live worker holds the run
        if replay:
            replayer = Replayer(workflows=[RescopedCall], plugins=[FireOncePlugin(client, key_prefix=prefix)])
            replayed = await replayer.replay_workflow(await handle.fetch_history(), raise_on_replay_failure=False)
            assert replayed.replay_failure is None
            del replayer, replayed
            gc.collect()  # the replay's instance is gone, as it would be some time after any replay
        read_before_signal = await handle.query(RescopedCall.scope)
        await handle.signal(RescopedCall.rescope, "s-second")
        read_at_end = await handle.result()
    keys = FireOnceKeys(prefix)
    dispatched_under = [scope for scope in ("s-first", "s-second") if await client.exists(keys.artifact(scope, "crossJob"))]
    assert await client.get(counter_key(prefix, "rescoped")) == b"1"
    return {"read before the signal": read_before_signal, "read at the end": read_at_end, "dispatched under": dispatched_under}


EXPECTED = {"read before the signal": "s-first", "read at the end": "s-second", "dispatched under": ["s-second"]}


def _worker(env: Any, client: Redis, prefix: str, **options: Any) -> tuple[Worker, str]:
    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    return Worker(env.client, task_queue=queue, workflows=[RescopedCall], activities=make_activities(client, prefix), plugins=[plugin], **options), queue


async def test_a_replay_of_a_run_a_live_worker_holds_leaves_the_live_runs_scope_alone(temporal_env: Any, client: Redis, prefix: str) -> None:
    """The live run sets ``s-first``; a ``Replayer`` in the same process replays its history so far
    (a deploy check or a test that replays recent histories does this), which sets ``s-first`` in
    an instance of its own. Then the live run's signal handler sets ``s-second``: its activity
    must run under ``s-second``, and the run read ``s-second`` back."""
    worker, queue = _worker(temporal_env, client, prefix)
    assert await _rescope(temporal_env, client, prefix, worker, queue, replay=True) == EXPECTED


class _CopyInfo(temporal_worker.Interceptor):
    """Another workflow interceptor whose ``info()`` gives a new copy of the run's info each time."""

    def workflow_interceptor_class(self, input: temporal_worker.WorkflowInterceptorClassInput) -> type[temporal_worker.WorkflowInboundInterceptor]:
        class _Outbound(temporal_worker.WorkflowOutboundInterceptor):
            def info(self) -> workflow.Info:
                return dataclasses.replace(super().info())

        class _Inbound(temporal_worker.WorkflowInboundInterceptor):
            def init(self, outbound: temporal_worker.WorkflowOutboundInterceptor) -> None:
                super().init(_Outbound(outbound))

        return _Inbound


async def test_behind_an_interceptor_that_copies_the_runs_info_the_run_still_finds_its_scope(temporal_env: Any, client: Redis, prefix: str) -> None:
    """The scope is filed under the instance's info object; an interceptor whose ``info()`` copies
    it hands the workflow another object each time, and the run ID must find the scope instead."""
    worker, queue = _worker(temporal_env, client, prefix, interceptors=[_CopyInfo()])
    assert await _rescope(temporal_env, client, prefix, worker, queue, replay=False) == EXPECTED
