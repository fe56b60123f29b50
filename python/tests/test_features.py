"""Temporal features on the Python side, on a real dev server and a real Redis, as
``test/temporal-features/*.test.ts`` runs them on the TypeScript side: update-with-start, reset,
worker versioning, Nexus, cron, activity pause and reset, and graceful shutdown. Each counts the job's dispatches in the job body."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any, Awaitable, Callable

import nexusrpc
import pytest
from redis.asyncio import Redis
from temporalio import nexus
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState, RoutingConfigUpdateState
from temporalio.api.nexus.v1 import EndpointSpec, EndpointTarget
from temporalio.api.operatorservice.v1 import CreateNexusEndpointRequest, DeleteNexusEndpointRequest
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    PauseActivityRequest,
    ResetActivityRequest,
    ResetWorkflowExecutionRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    UnpauseActivityRequest,
)
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion, WorkflowIDConflictPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.service import RPCError
from temporalio.worker import Worker, WorkerDeploymentConfig

from temporal_fire_once.core import FireOnceKeys

from temporal_fire_once import FireOncePlugin
from temporal_fire_once._header import scope_from_headers

from .conftest import collect_garbage, equals, until
from .pyactivities import counter_key, gate_key, make_activities
from .pynexus import JobService, NexusCaller, NexusHandlerRun, NexusJobInput
from .pyworkflows import (
    FIRST_TASK_BUG,
    CronParent,
    FirstTaskFails,
    GuardedCall,
    HeartbeatCall,
    InheritedCall,
    TwoStepCall,
    UpdateScopeInInit,
    UpdateScopeInRun,
)

WORKFLOWS = [GuardedCall, HeartbeatCall, TwoStepCall, UpdateScopeInInit, UpdateScopeInRun, InheritedCall, CronParent, NexusCaller, NexusHandlerRun, FirstTaskFails]


def _worker(env: Any, client: Redis, prefix: str, queue: str | None = None, **options: Any) -> tuple[Worker, str]:
    collect_garbage()
    queue = queue or f"py-{uuid.uuid4().hex[:8]}"
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    return Worker(env.client, task_queue=queue, workflows=WORKFLOWS, activities=make_activities(client, prefix), plugins=[plugin], **options), queue


async def count(client: Redis, prefix: str, counter: str) -> int:
    return int(await client.get(counter_key(prefix, counter)) or 0)


async def decisions(client: Redis, prefix: str, scope: str) -> Counter[str]:
    """How many times each decision is in the dispatch log for ``scope`` (flushed as the workers stop)."""
    entries: Any = await client.xrange(FireOnceKeys(prefix).log())
    return Counter(fields[b"decision"].decode() for _, fields in entries if fields[b"scope"] == scope.encode())


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
        await until(lambda: equals(count(client, prefix, "reset-mid"), 1), "the first run's job to start")
        reset = await reset_to_first_task(temporal_env.client, handle)  # terminates the first run; its job runs on
        await until(lambda: _activity_started(reset), "the reset run's activity to wait in its slot")
        assert await count(client, prefix, "reset-mid-finished") == 0  # still in flight
        await client.set(gate_key(prefix, "reset-mid"), "open")
        after = await reset.result()
        later = await temporal_env.client.execute_workflow(GuardedCall.run, args=args, id=f"{queue}-later", task_queue=queue)
    assert later == after and after["counterId"] == "reset-mid"
    assert (await count(client, prefix, "reset-mid"), await count(client, prefix, "reset-mid-finished")) == (1, 1)


async def test_reset_mid_flight_a_job_that_heartbeats_is_cancelled_its_lock_released_and_the_reset_run_dispatches_again(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """Its next heartbeat hears that its run is gone: the job is cancelled, which is a failure, so
    the lock is released and the reset run dispatches again: 2 starts, 1 finished job, one result
    (``reset.test.ts`` › *mid-flight, a job that heartbeats*)."""
    worker, queue = _worker(temporal_env, client, prefix)
    args = ["s-reset-hb", "heartbeatingGatedJob", ["reset-hb"]]
    async with worker:
        handle = await temporal_env.client.start_workflow(HeartbeatCall.run, args=args, id=queue, task_queue=queue)
        await until(lambda: equals(count(client, prefix, "reset-hb"), 1), "the first run's job to start")
        reset = await reset_to_first_task(temporal_env.client, handle)
        await until(lambda: equals(count(client, prefix, "reset-hb"), 2), "the reset run's own dispatch, once the first job stopped")
        assert await count(client, prefix, "reset-hb-finished") == 0
        await client.set(gate_key(prefix, "reset-hb"), "open")
        after = await result(reset)
        later = await temporal_env.client.execute_workflow(HeartbeatCall.run, args=args, id=f"{queue}-later", task_queue=queue)
    assert later == after and after["counterId"] == "reset-hb"
    assert (await count(client, prefix, "reset-hb"), await count(client, prefix, "reset-hb-finished")) == (2, 1)
    assert (await decisions(client, prefix, "s-reset-hb"))["released-on-failure"] == 1


async def _subscribed(client: Redis, channel: str) -> bool:
    (_, subscribers), *_ = await client.pubsub_numsub(channel)
    return int(subscribers) > 0


async def _activity_started(handle: WorkflowHandle[Any, Any]) -> bool:
    pending = (await handle.describe()).raw_description.pending_activities
    return len(pending) == 1 and pending[0].state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED


# Worker Versioning, a rolling deploy: two builds of one worker deployment poll one task queue,
# each with its own plugin. A PINNED run stays on the build that was current when it started; an
# AUTO_UPGRADE one moves to the current build at its next workflow task. The guard's keys name no
# build: runs on either build share one dispatch.


async def set_current(client: Client, deployment: str, build_id: str) -> None:
    """Make ``build_id`` the deployment's current version, once its worker has polled and the server
    knows it, and wait until the task queues route by it (the server replies before they do)."""
    for attempt in range(200):
        try:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(namespace=client.namespace, deployment_name=deployment, build_id=build_id)
            )
            break
        except RPCError:
            if attempt == 199:
                raise  # e.g. the version is still not registered
            await asyncio.sleep(0.1)

    async def routed() -> bool:
        reply = await client.workflow_service.describe_worker_deployment(DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment))
        state = reply.worker_deployment_info.routing_config_update_state
        return bool(state == RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED)

    # The server propagates the change in the background: on a loaded 2-core machine it once took
    # over 30 s (about a second when quiet), as the TypeScript twin found, so the bound is generous.
    await until(routed, f"the task queues of {deployment} to route to {build_id}", seconds=90)


def two_builds(env: Any, client: Redis, prefix: str, behavior: VersioningBehavior) -> tuple[str, str, tuple[Worker, Worker]]:
    """Workers of builds A and B of a new worker deployment, with ``behavior``, each with its own
    plugin, on one new task queue: the deployment's name, the queue and the two workers."""
    deployment, queue = f"fire-once-{uuid.uuid4().hex[:12]}", f"py-{uuid.uuid4().hex[:8]}"

    def build(build_id: str) -> Worker:
        version = WorkerDeploymentVersion(deployment_name=deployment, build_id=build_id)
        config = WorkerDeploymentConfig(version=version, use_worker_versioning=True, default_versioning_behavior=behavior)
        return _worker(env, client, prefix, queue, deployment_config=config)[0]

    return deployment, queue, (build("A"), build("B"))


async def build_of(handle: WorkflowHandle[Any, Any]) -> str:
    """The build the run is pinned to, or ran its last workflow task on, as the server says."""
    return str((await handle.describe()).raw_description.workflow_execution_info.versioning_info.deployment_version.build_id)


async def test_versioning_a_run_pinned_to_build_a_dispatches_and_runs_on_build_b_wait_or_fast_forward(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """A run pinned to A dispatches, its job held behind a gate; B is made current; a run started
    then runs on B and waits in its slot for A's job; a later run and a reset of A's run, which the
    server starts on B, fast-forward: 1 dispatch, one result for all 4."""
    deployment, queue, (worker_a, worker_b) = two_builds(temporal_env, client, prefix, VersioningBehavior.PINNED)
    args = ["s-versioning", "gatedJob", ["versioning"]]
    start = temporal_env.client.start_workflow
    async with worker_a:
        await set_current(temporal_env.client, deployment, "A")
        first = await start(GuardedCall.run, args=args, id=f"{queue}-1", task_queue=queue)
        await until(lambda: equals(count(client, prefix, "versioning"), 1), "A's job to start")
        async with worker_b:
            await set_current(temporal_env.client, deployment, "B")
            second = await start(GuardedCall.run, args=args, id=f"{queue}-2", task_queue=queue)
            await until(lambda: _activity_started(second), "B's run to start its activity")
            # A waiter subscribes to its scope's wake channel only once its acquire found the lock
            # held: A's job must not commit before that, or B's run fast-forwards instead.
            await until(lambda: _subscribed(client, FireOnceKeys(prefix).wake_channel("s-versioning")), "B's run to wait in its slot for A's job")
            await client.set(gate_key(prefix, "versioning"), "open")
            results = [await first.result(), await second.result()]
            third = await start(GuardedCall.run, args=args, id=f"{queue}-3", task_queue=queue)  # after the commit
            results.append(await third.result())
            builds = [await build_of(h) for h in (first, second, third)]  # before the reset: first's handle follows the latest run
            reset = await reset_to_first_task(temporal_env.client, first)  # A's run, run again
            results.append(await reset.result())
            builds.append(await build_of(reset))
    assert builds == ["A", "B", "B", "B"]  # a reset run starts on the current build
    assert all(r == results[0] for r in results) and await count(client, prefix, "versioning") == 1
    # The dispatch log, flushed as the workers stopped: B's run waited for A's commit; the later
    # run and the reset fast-forwarded.
    assert await decisions(client, prefix, "s-versioning") == {"dispatched": 1, "committed": 1, "in-flight-waited": 1, "fast-forwarded": 3}


async def _waiting_for_go(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the run's first job has completed and the workflow task after it too: the run waits for ``go``."""
    events = list((await handle.fetch_history()).events)
    done = any(e.HasField("activity_task_completed_event_attributes") for e in events)
    return done and events[-1].HasField("workflow_task_completed_event_attributes")


async def test_versioning_an_auto_upgrade_run_that_moves_from_build_a_to_b_mid_flight_keeps_its_scope_what_it_schedules_on_b_is_guarded(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """A run sets the scope and dispatches its first job on A, then waits for a signal. B is made
    current; the signal's workflow task runs on B, which replays the run's history (the
    set_dispatch_scope call included) and schedules the second job under the scope. A later run
    fast-forwards both steps: 1 dispatch of each."""
    deployment, queue, (worker_a, worker_b) = two_builds(temporal_env, client, prefix, VersioningBehavior.AUTO_UPGRADE)
    args, start = ["s-upgrade", "upgrade"], temporal_env.client.start_workflow
    async with worker_a:
        await set_current(temporal_env.client, deployment, "A")
        moved = await start(TwoStepCall.run, args=args, id=f"{queue}-moved", task_queue=queue)
        await until(lambda: _waiting_for_go(moved), "the first job to complete on A")
        assert await build_of(moved) == "A"
        async with worker_b:
            await set_current(temporal_env.client, deployment, "B")
            await moved.signal(TwoStepCall.go)
            results = await result(moved)
            assert await build_of(moved) == "B"
            later = await start(TwoStepCall.run, args=args, id=f"{queue}-later", task_queue=queue)
            await later.signal(TwoStepCall.go)
            assert await result(later) == results  # both steps fast-forward: the one on B was stored under the scope
    assert (await count(client, prefix, "upgrade"), await count(client, prefix, "upgrade-report")) == (1, 1)


# A Nexus operation crosses into a workflow the handler starts: no header of the caller's goes
# with it, so the scope does not cross. The caller passes it as input; the handler workflow sets it.


@nexusrpc.handler.service_handler(service=JobService)
class JobServiceHandler:
    """Starts ``NexusHandlerRun`` on the handler worker's task queue."""

    @nexus.workflow_run_operation
    async def run_job(self, ctx: nexus.WorkflowRunOperationContext, input: NexusJobInput) -> nexus.WorkflowHandle[dict[str, Any]]:
        return await ctx.start_workflow(NexusHandlerRun.run, input, id=f"nexus-handler-{uuid.uuid4()}")


async def nexus_endpoint(client: Client, queue: str) -> tuple[str, Callable[[], Awaitable[Any]]]:
    """A Nexus endpoint on the dev server that routes to ``queue``: its name, and how to delete it."""
    name = f"fire-once-{uuid.uuid4().hex[:12]}"
    target = EndpointTarget(worker=EndpointTarget.Worker(namespace=client.namespace, task_queue=queue))
    reply = await client.operator_service.create_nexus_endpoint(CreateNexusEndpointRequest(spec=EndpointSpec(name=name, target=target)))
    request = DeleteNexusEndpointRequest(id=reply.endpoint.id, version=reply.endpoint.version)
    return name, lambda: client.operator_service.delete_nexus_endpoint(request)


def failure_type(err: BaseException | None) -> str | None:
    """The ``type`` of the first ``ApplicationError`` in ``err``'s cause chain."""
    while err is not None:
        if isinstance(err, ApplicationError):
            return err.type
        err = err.__cause__
    return None


async def test_nexus_the_scope_does_not_cross_and_passed_as_input_and_set_by_the_handler_workflow_it_shares_one_dispatch(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = _worker(temporal_env, client, prefix, nexus_service_handlers=[JobServiceHandler()])
    endpoint, delete = await nexus_endpoint(temporal_env.client, queue)
    run = temporal_env.client.execute_workflow
    try:
        async with worker:
            # A handler workflow that sets none has none (it checks): FireOnceMissingScope, nothing dispatched.
            with pytest.raises(WorkflowFailureError) as caught:
                await run(NexusCaller.run, args=[endpoint, NexusJobInput("s-nexus-none", "nexus-none", 0, False)], id=f"{queue}-none", task_queue=queue)
            assert (failure_type(caught.value), await count(client, prefix, "nexus-none")) == ("FireOnceMissingScope", 0)
            # The scope as input, set by the handler workflow: 2 callers at once and a later one, 1 dispatch.
            given = NexusJobInput("s-nexus", "nexus", 300, True)
            results = list(await asyncio.gather(*(run(NexusCaller.run, args=[endpoint, given], id=f"{queue}-{i}", task_queue=queue) for i in range(2))))
            results.append(await run(NexusCaller.run, args=[endpoint, given], id=f"{queue}-later", task_queue=queue))
    finally:
        await delete()
    assert all(r == results[0] for r in results) and results[0]["counterId"] == "nexus"
    assert await count(client, prefix, "nexus") == 1


# A cron workflow's later runs are started by the server, with the header of the first run's start.


async def test_cron_a_child_that_never_sets_a_scope_inherits_it_in_every_run_and_all_share_one_dispatch(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    async with worker:
        child_id = await temporal_env.client.execute_workflow(
            CronParent.run, args=["s-cron", "@every 1s", "crossJob", ["cron", 0]], id=queue, task_queue=queue
        )

        async def completed() -> list[str]:
            runs = temporal_env.client.list_workflows(f'WorkflowId="{child_id}"')
            return [run.run_id async for run in runs if run.status == WorkflowExecutionStatus.COMPLETED]

        await until(lambda: _has(completed(), 3), "3 cron runs to complete")
        await temporal_env.client.get_workflow_handle(child_id).terminate("enough runs")

        async def result_of(run_id: str) -> Any:
            # A cron run reads as continued-as-new: its result is in its history's completion event.
            history = await temporal_env.client.get_workflow_handle(child_id, run_id=run_id).fetch_history()
            event = next(e for e in history.events if e.HasField("workflow_execution_completed_event_attributes"))
            payloads = event.workflow_execution_completed_event_attributes.result.payloads
            return temporal_env.client.data_converter.payload_converter.from_payloads(payloads)[0]

        results = [await result_of(run_id) for run_id in await completed()]
    assert len(results) >= 3 and {r["inheritedScope"] for r in results} == {"s-cron"}
    assert all(r["result"] == results[0]["result"] for r in results) and await count(client, prefix, "cron") == 1


async def _has(runs: Awaitable[list[str]], at_least: int) -> bool:
    return len(await runs) >= at_least


# Activity pause and reset (``temporal activity pause | unpause | reset``, the same RPCs here) of
# a run's guarded activity: the worker hears of it in the reply to a heartbeat and cancels the
# activity. Every run is a HeartbeatCall (2 s heartbeat timeout, retries); the job heartbeats until
# its gate opens.


async def result(handle: WorkflowHandle[Any, Any]) -> Any:
    """The run's result, within 30 s: a paused activity would otherwise hold a failing test for ever."""
    return await asyncio.wait_for(handle.result(), 30)


async def _pending(handle: WorkflowHandle[Any, Any]) -> Any:
    pending = (await handle.describe()).raw_description.pending_activities
    return pending[0] if pending else None


async def _last_failure_type(handle: WorkflowHandle[Any, Any]) -> str:
    """The type of the failure that ended the activity's last attempt, once one has."""

    async def ended() -> bool:
        pending = await _pending(handle)
        return pending is not None and pending.HasField("last_failure")

    await until(ended, f"an attempt of {handle.id} to end")
    failure = (await _pending(handle)).last_failure
    if failure.HasField("timeout_failure_info"):
        return "timeout"
    return str(failure.application_failure_info.type) if failure.HasField("application_failure_info") else failure.WhichOneof("failure_info")


async def _pause(client: Client, handle: WorkflowHandle[Any, Any], paused: bool) -> None:
    execution, identity = WorkflowExecution(workflow_id=handle.id), "fire-once test"
    if paused:
        await client.workflow_service.pause_activity(PauseActivityRequest(namespace=client.namespace, execution=execution, id="1", identity=identity))
    else:
        await client.workflow_service.unpause_activity(UnpauseActivityRequest(namespace=client.namespace, execution=execution, id="1", identity=identity))


async def _holder_and_waiters(env: Client, client: Redis, prefix: str, queue: str, counter: str, waiters: int) -> list[WorkflowHandle[Any, Any]]:
    """A run whose ``heartbeatingGatedJob(counter)`` has started, then ``waiters`` more of its scope, each waiting in its slot."""
    args = [f"s-{counter}", "heartbeatingGatedJob", [counter]]
    holder = await env.start_workflow(HeartbeatCall.run, args=args, id=f"{queue}-holder", task_queue=queue)
    await until(lambda: equals(count(client, prefix, counter), 1), "the holder's job to start")
    handles = [holder, *[await env.start_workflow(HeartbeatCall.run, args=args, id=f"{queue}-{i}", task_queue=queue) for i in range(waiters)]]
    for waiter in handles[1:]:
        await until(lambda: _activity_started(waiter), "the waiter to wait in its slot")
    return handles


async def _served_by_a_second_dispatch_after_a_release(client: Redis, prefix: str, counter: str, results: list[Any]) -> None:
    """The first job, stopped, released its lock (the dispatch log says so, where a lock left to its
    lease would have held the next dispatch for 30 s), and one more dispatch, finished, served every run."""
    assert all(r == results[0] for r in results)
    assert (await count(client, prefix, counter), await count(client, prefix, f"{counter}-finished")) == (2, 1)
    logged = await decisions(client, prefix, f"s-{counter}")
    assert (logged["dispatched"], logged["released-on-failure"], logged["committed"]) == (2, 1, 1)


async def test_activity_pause_of_the_holder_stops_its_job_and_releases_a_waiter_dispatches_and_the_holder_unpaused_fast_forwards(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    env = temporal_env.client
    async with worker:
        holder, *waiters = await _holder_and_waiters(env, client, prefix, queue, "pause-holder", 2)

        await _pause(env, holder, True)
        assert await _last_failure_type(holder) == "ActivityPause"  # its job heard it by heartbeat and stopped
        await until(lambda: equals(count(client, prefix, "pause-holder"), 2), "a waiter to dispatch on the released lock")
        await client.set(gate_key(prefix, "pause-holder"), "open")
        served = [await result(waiter) for waiter in waiters]  # while the holder stays paused
        assert (await _pending(holder)).paused

        await _pause(env, holder, False)
        results = [await result(holder), *served]  # it fast-forwards to the new dispatch's result
    await _served_by_a_second_dispatch_after_a_release(client, prefix, "pause-holder", results)


async def test_activity_reset_of_the_holder_stops_its_job_and_releases_its_new_attempt_and_the_waiter_share_one_new_dispatch(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """As a pause, but the holder starts again at once: its new attempt and the waiter share one new dispatch."""
    worker, queue = _worker(temporal_env, client, prefix)
    env = temporal_env.client
    async with worker:
        holder, waiter = await _holder_and_waiters(env, client, prefix, queue, "reset-holder", 1)

        request = ResetActivityRequest(namespace=env.namespace, execution=WorkflowExecution(workflow_id=holder.id), id="1", identity="fire-once test")
        await env.workflow_service.reset_activity(request)
        assert await _last_failure_type(holder) == "ActivityReset"  # its job heard it by heartbeat and stopped
        await until(lambda: equals(count(client, prefix, "reset-holder"), 2), "the new attempt or the waiter to dispatch on the released lock")
        await client.set(gate_key(prefix, "reset-holder"), "open")
        results = [await result(holder), await result(waiter)]
    await _served_by_a_second_dispatch_after_a_release(client, prefix, "reset-holder", results)


async def test_activity_pause_of_a_waiter_in_its_slot_ends_its_wait_and_unpaused_it_gets_the_holders_result(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    env = temporal_env.client
    async with worker:
        holder, waiter = await _holder_and_waiters(env, client, prefix, queue, "pause-wait", 1)

        await _pause(env, waiter, True)
        assert await _last_failure_type(waiter) == "ActivityPause"  # heard at its next heartbeat, not a timeout
        assert await count(client, prefix, "pause-wait-finished") == 0  # before the holder's job ended
        await _pause(env, waiter, False)
        await client.set(gate_key(prefix, "pause-wait"), "open")
        results = [await result(holder), await result(waiter)]
    assert results[0] == results[1] and await count(client, prefix, "pause-wait") == 1


# Graceful shutdown: the shutdown cancels the activities still running once its
# graceful_shutdown_timeout (none by default) has run out, the holder's job or a waiter in its slot.


async def test_shutdown_of_the_holders_worker_cancels_its_job_after_the_grace_time_the_lock_is_released_and_one_finished_job_serves_every_run(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The holder's worker shuts down with a 200 ms graceful_shutdown_timeout: the SDK then cancels
    the job, which stops, and the guard releases its lock. The waiter, on another worker, dispatches
    on it at once; the holder's retry, on the restarted worker, gets that dispatch's result."""
    holder_worker, holder_queue = _worker(temporal_env, client, prefix, graceful_shutdown_timeout=timedelta(milliseconds=200))
    args, env = ["s-shutdown-holder", "heartbeatingGatedJob", ["shutdown-holder"]], temporal_env.client
    waiter_worker, waiter_queue = _worker(temporal_env, client, prefix)
    async with waiter_worker:
        async with holder_worker:
            holder = await env.start_workflow(HeartbeatCall.run, args=args, id=f"{holder_queue}-holder", task_queue=holder_queue)
            await until(lambda: equals(count(client, prefix, "shutdown-holder"), 1), "the holder's job to start")
            waiter = await env.start_workflow(HeartbeatCall.run, args=args, id=f"{waiter_queue}-waiter", task_queue=waiter_queue)
            await until(lambda: _activity_started(waiter), "the waiter to wait in its slot")
        # The holder's worker has shut down: the SDK cancelled its job, which stopped unfinished,
        # and the waiter dispatched on the released lock.
        assert await _last_failure_type(holder) == "WorkerShutdown"
        assert await count(client, prefix, "shutdown-holder-finished") == 0
        await until(lambda: equals(count(client, prefix, "shutdown-holder"), 2), "the waiter to dispatch on the released lock")
        async with _worker(temporal_env, client, prefix, holder_queue)[0]:
            await client.set(gate_key(prefix, "shutdown-holder"), "open")
            results = [await result(holder), await result(waiter)]
    await _served_by_a_second_dispatch_after_a_release(client, prefix, "shutdown-holder", results)


async def test_shutdown_of_a_waiters_worker_ends_its_wait_so_it_retries_at_once_and_the_holders_one_dispatch_serves_it(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The holder runs on another worker, whose lock stays. The waiter's attempt ends on the
    shutdown's cancellation, not on its heartbeat timeout, and its retry, on a restarted worker,
    gets the holder's result."""
    holder_worker, holder_queue = _worker(temporal_env, client, prefix)
    args, env = ["s-shutdown", "heartbeatingGatedJob", ["shutdown"]], temporal_env.client
    waiter_queue = f"py-{uuid.uuid4().hex[:8]}"
    async with holder_worker:
        holder = await env.start_workflow(HeartbeatCall.run, args=args, id=f"{holder_queue}-holder", task_queue=holder_queue)
        await until(lambda: equals(count(client, prefix, "shutdown"), 1), "the holder's job to start")
        async with _worker(temporal_env, client, prefix, waiter_queue)[0]:
            waiter = await env.start_workflow(HeartbeatCall.run, args=args, id=f"{waiter_queue}-waiter", task_queue=waiter_queue)
            await until(lambda: _activity_started(waiter), "the waiter to wait in its slot")
        # The waiter's worker has shut down: its attempt ended, not by a timeout, and the holder's lock stays.
        assert await _last_failure_type(waiter) != "timeout"
        assert await client.exists(FireOnceKeys(prefix).lock("s-shutdown", "heartbeatingGatedJob")) == 1
        async with _worker(temporal_env, client, prefix, waiter_queue)[0]:
            await until(lambda: _activity_started(waiter), "the retry to wait in its slot on the restarted worker")
            await client.set(gate_key(prefix, "shutdown"), "open")
            results = [await result(holder), await result(waiter)]
    assert results[0] == results[1] and await count(client, prefix, "shutdown") == 1


async def test_a_workflow_task_that_fails_after_the_scope_is_set_is_retried_and_the_job_its_retry_schedules_carries_the_scope(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The failed task's run is evicted, and with it the scope the per-instance table held for it
    (``workflow/_runs.py``): the retry replays from the start in a new instance, sets the scope
    again, and the job it schedules carries it. 3 runs at once and a later one share one dispatch
    (``workflow-task-failure.test.ts`` in TypeScript)."""
    worker, queue = _worker(temporal_env, client, prefix)
    async with worker:

        async def start(name: str) -> WorkflowHandle[Any, Any]:
            handle: WorkflowHandle[Any, Any] = await temporal_env.client.start_workflow(
                FirstTaskFails.run, args=["s-wft", 500], id=f"{queue}-{name}", task_queue=queue
            )
            return handle

        concurrent = [await start(str(i)) for i in range(3)]
        results = list(await asyncio.gather(*(result(h) for h in concurrent)))
        later = await start("later")
        results.append(await result(later))
    for handle in [*concurrent, later]:
        events = (await handle.fetch_history()).events
        failed = [e for e in events if e.HasField("workflow_task_failed_event_attributes")]
        scheduled = [e for e in events if e.HasField("activity_task_scheduled_event_attributes")]
        assert [e.workflow_task_failed_event_attributes.failure.message for e in failed] == [FIRST_TASK_BUG]
        # The failed task comes first: the activity in the history is the retry's.
        assert max(e.event_id for e in failed) < min(e.event_id for e in scheduled)
        assert [scope_from_headers(e.activity_task_scheduled_event_attributes.header.fields) for e in scheduled] == ["s-wft"]
    assert all(r == results[0] for r in results)
    assert await count(client, prefix, "s-wft") == 1


async def test_every_action_a_schedule_starts_shares_one_dispatch(temporal_env: Any, client: Redis, prefix: str) -> None:
    """An action a second, overlapping (``ALLOW_ALL``), each running a job held behind a gate that
    opens only once the schedule has started 3 runs: the later runs come while the first one's job
    is in flight (``workflow-features.test.ts`` › *schedules*)."""
    worker, queue = _worker(temporal_env, client, prefix)
    async with worker:
        schedule = await temporal_env.client.create_schedule(
            f"{queue}-schedule",
            Schedule(
                action=ScheduleActionStartWorkflow(GuardedCall.run, args=["s-sched", "gatedJob", ["sched"]], id=f"{queue}-run", task_queue=queue),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))]),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
            ),
        )
        ids: list[str] = []

        async def three_started() -> bool:
            actions = (await schedule.describe()).info.recent_actions
            ids[:] = [a.action.workflow_id for a in actions if isinstance(a.action, ScheduleActionExecutionStartWorkflow)]
            return len(ids) >= 3

        try:
            await until(three_started, "the schedule to start 3 runs")
        finally:
            await schedule.delete()
        assert await count(client, prefix, "sched-finished") == 0  # the first run's job is still in flight
        await client.set(gate_key(prefix, "sched"), "open")
        results = [await result(temporal_env.client.get_workflow_handle(workflow_id)) for workflow_id in ids]
    assert all(r == results[0] for r in results) and results[0]["counterId"] == "sched"
    assert (await count(client, prefix, "sched"), await count(client, prefix, "sched-finished")) == (1, 1)


async def test_four_runs_started_eagerly_at_once_and_a_later_one_share_one_dispatch(temporal_env: Any, client: Redis, prefix: str) -> None:
    """Eager workflow start: the server hands each run's first workflow task back in the start's
    reply, to the worker on the starting client, instead of queueing it. That task sets the scope
    and schedules the guarded job, as a queued one would (``eager-start.test.ts``)."""
    worker, queue = _worker(temporal_env, client, prefix)

    async def start() -> WorkflowHandle[Any, Any]:
        handle: WorkflowHandle[Any, Any] = await temporal_env.client.start_workflow(
            GuardedCall.run, args=["s-eager", "crossJob", ["eager", 500]], id=f"{queue}-{uuid.uuid4().hex[:6]}", task_queue=queue, request_eager_start=True
        )
        return handle

    async with worker:
        concurrent = list(await asyncio.gather(*(start() for _ in range(4))))
        results = list(await asyncio.gather(*(result(h) for h in concurrent)))
        later = await start()
        results.append(await result(later))
    # The server granted every start eagerly (the SDK records it on the handle).
    assert [getattr(h, "__temporal_eagerly_started") for h in [*concurrent, later]] == [True] * 5
    assert all(r == results[0] for r in results) and results[0]["counterId"] == "eager"
    assert await count(client, prefix, "eager") == 1
