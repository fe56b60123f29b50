"""Temporal features on the Python side, on a real dev server and a real Redis, as
``test/temporal-features/*.test.ts`` runs them on the TypeScript side: update-with-start, reset,
worker versioning, Nexus and cron. Each counts the job's dispatches in the job body."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Awaitable, Callable

import pytest
from redis.asyncio import Redis
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin

from .conftest import collect_garbage
from .pyactivities import counter_key, gate_key, make_activities
from .pyworkflows import GuardedCall, UpdateScopeInInit, UpdateScopeInRun

WORKFLOWS = [GuardedCall, UpdateScopeInInit, UpdateScopeInRun]


async def until(done: Callable[[], Awaitable[bool]], what: str, seconds: float = 30) -> None:
    """Poll ``done`` until it holds; fail naming ``what`` if it never does (a bound, not a timing claim)."""
    for _ in range(int(seconds / 0.05)):
        if await done():
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"never happened: {what}")


def _worker(env: Any, client: Redis, prefix: str, queue: str | None = None, **options: Any) -> tuple[Worker, str]:
    collect_garbage()
    queue = queue or f"py-{uuid.uuid4().hex[:8]}"
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    return Worker(env.client, task_queue=queue, workflows=WORKFLOWS, activities=make_activities(client, prefix), plugins=[plugin], **options), queue


async def count(client: Redis, prefix: str, counter: str) -> int:
    return int(await client.get(counter_key(prefix, counter)) or 0)


async def first_task_completed(handle: WorkflowHandle[Any, Any]) -> int:
    """The event ID of the run's first WorkflowTaskCompleted event."""
    history = await handle.fetch_history()
    return next(e.event_id for e in history.events if e.HasField("workflow_task_completed_event_attributes"))


async def accepted_in_first_task(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether an update was accepted in the run's first workflow task: its completion is followed by the acceptance."""
    events = list((await handle.fetch_history()).events)
    first = next(i for i, e in enumerate(events) if e.HasField("workflow_task_completed_event_attributes"))
    return events[first + 1].HasField("workflow_execution_update_accepted_event_attributes")


async def reset_to_first_task(client: Client, handle: WorkflowHandle[Any, Any]) -> WorkflowHandle[Any, Any]:
    """Reset the run to its first workflow task, as ``resetToFirstWorkflowTask`` in test/support/features.ts; the new run's handle."""
    first_run = (await handle.describe()).run_id
    reply = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=handle.id, run_id=first_run),
            workflow_task_finish_event_id=await first_task_completed(handle),
            request_id=str(uuid.uuid4()),
            reason="temporal-fire-once reset test",
        )
    )
    assert reply.run_id and reply.run_id != first_run
    return client.get_workflow_handle(handle.id, run_id=reply.run_id)


# Update-with-start delivers the update in the run's first workflow task, whose handlers the
# Python SDK runs before ``run`` (and after ``__init__``): the scope must be set in ``__init__``.


async def test_update_with_start_with_the_scope_set_in_init_racing_calls_on_one_id_and_new_ids_share_one_dispatch(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    scope, shared = "s-uws", f"{queue}-shared"
    ids = [shared, shared, shared, f"{queue}-a", f"{queue}-b"]

    async def update_with_start(workflow_id: str) -> Any:
        start = WithStartWorkflowOperation(
            UpdateScopeInInit.run, scope, id=workflow_id, task_queue=queue, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING
        )
        return await temporal_env.client.execute_update_with_start_workflow(UpdateScopeInInit.dispatch, args=["crossJob", ["uws", 300]], start_workflow_operation=start)

    async def finish(workflow_id: str) -> None:
        handle = temporal_env.client.get_workflow_handle(workflow_id)
        assert await accepted_in_first_task(handle)
        await handle.signal(UpdateScopeInInit.finish)
        await handle.result()

    async with worker:
        results = await asyncio.gather(*(update_with_start(i) for i in ids))
        for workflow_id in dict.fromkeys(ids):
            await finish(workflow_id)
        results.append(await update_with_start(shared))  # the first ID's run has closed: a new run
        await finish(shared)
    assert all(r == results[0] for r in results) and results[0]["counterId"] == "uws"
    assert await count(client, prefix, "uws") == 1


async def test_update_with_start_whose_scope_is_set_in_run_fails_with_missing_scope_and_dispatches_nothing(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The handler of the start's update runs before ``run`` sets the scope: never an unguarded
    dispatch. An update in a later workflow task runs under the scope."""
    worker, queue = _worker(temporal_env, client, prefix)
    async with worker:
        start = WithStartWorkflowOperation(UpdateScopeInRun.run, "s-uws-late", id=queue, task_queue=queue, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await temporal_env.client.execute_update_with_start_workflow(UpdateScopeInRun.dispatch, args=["crossJob", ["uws-late", 0]], start_workflow_operation=start)
        cause = caught.value.cause
        assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
        assert (cause.cause.type, cause.cause.non_retryable, await count(client, prefix, "uws-late")) == ("FireOnceMissingScope", True, 0)
        handle = temporal_env.client.get_workflow_handle(queue)
        assert await accepted_in_first_task(handle)
        later = await handle.execute_update(UpdateScopeInRun.dispatch, args=["crossJob", ["uws-late", 0]])
        await handle.signal(UpdateScopeInRun.finish)
        await handle.result()
    assert later["counterId"] == "uws-late" and await count(client, prefix, "uws-late") == 1


# Reset re-executes a workflow from its first workflow task in a new run, which schedules the
# guarded job again: a fast-forward after completion, a wait for the first run's job mid-flight.


async def test_reset_after_completion_the_reset_run_fast_forwards_without_dispatching(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    async with worker:
        handle = await temporal_env.client.start_workflow(GuardedCall.run, args=["s-reset-done", "crossJob", ["reset-done", 0]], id=queue, task_queue=queue)
        before = await handle.result()
        after = await (await reset_to_first_task(temporal_env.client, handle)).result()
    assert after == before and await count(client, prefix, "reset-done") == 1


async def test_reset_mid_flight_the_reset_run_waits_for_the_first_runs_job_and_gets_its_result(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    args = ["s-reset-mid", "gatedJob", ["reset-mid"]]
    async with worker:
        handle = await temporal_env.client.start_workflow(GuardedCall.run, args=args, id=queue, task_queue=queue)
        await until(lambda: _is(count(client, prefix, "reset-mid"), 1), "the first run's job to start")
        reset = await reset_to_first_task(temporal_env.client, handle)  # terminates the first run; its job runs on
        await until(lambda: _activity_started(reset), "the reset run's activity to wait in its slot")
        assert await count(client, prefix, "reset-mid-finished") == 0  # still in flight
        await client.set(gate_key(prefix, "reset-mid"), "open")
        after = await reset.result()
        later = await temporal_env.client.execute_workflow(GuardedCall.run, args=args, id=f"{queue}-later", task_queue=queue)
    assert later == after and after["counterId"] == "reset-mid"
    assert (await count(client, prefix, "reset-mid"), await count(client, prefix, "reset-mid-finished")) == (1, 1)


async def _is(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


async def _activity_started(handle: WorkflowHandle[Any, Any]) -> bool:
    pending = (await handle.describe()).raw_description.pending_activities
    return len(pending) == 1 and pending[0].state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
