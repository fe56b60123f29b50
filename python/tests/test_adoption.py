"""Adopting the plugin on a fleet with an open workflow, on the Python side, as
``test/temporal-features/adoption.test.ts`` runs it on the TypeScript side: a run that started on
a worker without the plugin (its activities plain, the ``set_dispatch_scope`` call dropped with a
warning) goes on, after a signal, on a worker with it. Each job counts its dispatches in its body."""

from __future__ import annotations

import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio import activity
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin

from .conftest import collect_garbage, until
from .pyactivities import counter_key, make_activities
from .pyworkflows import TwoStepCall
from .test_features import WORKFLOWS, _waiting_for_go, count, result


def _plain_activities(redis: Redis, prefix: str) -> list[Any]:
    """``crossJob`` and ``reportJob`` as before adoption: not marked, counting as the marked ones do."""

    @activity.defn(name="crossJob")
    async def cross_job(counter_id: str, ms: int) -> dict[str, Any]:
        await redis.incr(counter_key(prefix, counter_id))
        return {"counterId": counter_id, "nonce": str(uuid.uuid4()), "by": "python, before adoption"}

    @activity.defn(name="reportJob")
    async def report_job(counter_id: str, ms: int) -> dict[str, Any]:
        return await cross_job(counter_id, ms)

    return [cross_job, report_job]


async def test_an_open_workflow_adopted_mid_flight_what_it_schedules_after_adoption_is_guarded(temporal_env: Any, client: Redis, prefix: str) -> None:
    queue, args = f"py-{uuid.uuid4().hex[:8]}", ["s-adopted", "adopted"]
    start = temporal_env.client.start_workflow
    collect_garbage()
    before = Worker(temporal_env.client, task_queue=queue, workflows=[TwoStepCall], activities=_plain_activities(client, prefix))
    async with before:
        adopted = await start(TwoStepCall.run, args=args, id=f"{queue}-adopted", task_queue=queue)
        # Stopped only once the run waits for `go`: a workflow task cut short would hold it up for its timeout.
        await until(lambda: _waiting_for_go(adopted), "the first job to complete before adoption")
    collect_garbage()
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    after = Worker(temporal_env.client, task_queue=queue, workflows=WORKFLOWS, activities=make_activities(client, prefix), plugins=[plugin])
    async with after:
        await adopted.signal(TwoStepCall.go)  # replays the history on this worker, then schedules reportJob
        first = await result(adopted)
        fresh = await start(TwoStepCall.run, args=args, id=f"{queue}-fresh", task_queue=queue)
        await fresh.signal(TwoStepCall.go)
        second = await result(fresh)
    assert first[1] == second[1]  # reportJob: dispatched once, after adoption, and fast-forwarded by the fresh run
    assert first[0]["by"] == "python, before adoption" and second[0]["by"] == "python"
    # crossJob ran before adoption and left no result, so the fresh run's guarded call dispatched it again.
    assert (await count(client, prefix, "adopted"), await count(client, prefix, "adopted-report")) == (2, 1)
