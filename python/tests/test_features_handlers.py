"""More Temporal features on the Python side, on a real dev server and a real Redis: the activity
cancellation types on a waiter in its slot and on the holder, continue-as-new while a guarded
activity waits, signal-with-start, one activity slot with a holder that outlives its heartbeat
timeout, and ``temporal activity reset`` (the CLI) of a waiter. Each counts the job's dispatches in
the job body, outside the guard."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.worker import Replayer, Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import FireOnceKeys

from .conftest import collect_garbage, equals, until
from .pyactivities import counter_key, gate_key, make_activities
from .pyhandlers import WORKFLOWS, CancelOnSignal, ContinueWhileWaiting, HandlersCall, SignalScopeInInit
from .pyworkflows import HeartbeatCall
from .test_features import _activity_started, _last_failure_type, _pending, count, decisions, result


def _worker(env: Any, client: Redis, prefix: str, **options: Any) -> tuple[Worker, str]:
    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    workflows = [*WORKFLOWS, HeartbeatCall]
    return Worker(env.client, task_queue=queue, workflows=workflows, activities=make_activities(client, prefix), plugins=[plugin], **options), queue


async def _waiting(client: Redis, prefix: str, handle: WorkflowHandle[Any, Any], scope: str) -> None:
    """Until ``handle``'s activity has started and waits in its slot on the scope's wake channel."""
    await until(lambda: _activity_started(handle), f"{handle.id}'s activity to start")

    async def subscribed() -> bool:
        (_, subscribers), *_ = await client.pubsub_numsub(FireOnceKeys(prefix).wake_channel(scope))
        return int(subscribers) > 0

    await until(subscribed, f"{handle.id}'s activity to wait in its slot")


@pytest.mark.parametrize("cancellation", ["TRY_CANCEL", "WAIT_CANCELLATION_COMPLETED", "ABANDON"])
async def test_a_waiter_cancelled_with_each_cancellation_type_ends_its_run_and_the_holders_one_dispatch_serves_the_others(
    temporal_env: Any, client: Redis, prefix: str, cancellation: str
) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    env, counter = temporal_env.client, f"wc-{cancellation.lower()}"
    scope, args = f"s-{counter}", [counter]
    async with worker:
        holder = await env.start_workflow(HeartbeatCall.run, args=[scope, "heartbeatingGatedJob", args], id=f"{queue}-holder", task_queue=queue)
        await until(lambda: equals(count(client, prefix, counter), 1), "the holder's job to start")
        waiter = await env.start_workflow(CancelOnSignal.run, args=[scope, "heartbeatingGatedJob", args, cancellation], id=f"{queue}-w", task_queue=queue)
        await _waiting(client, prefix, waiter, scope)
        await waiter.signal(CancelOnSignal.cancel)
        assert await result(waiter) == "cancelled"  # before the holder's job ends
        assert await count(client, prefix, f"{counter}-finished") == 0
        assert await client.exists(FireOnceKeys(prefix).lock(scope, "heartbeatingGatedJob")) == 1  # the holder's lock stays
        await client.set(gate_key(prefix, counter), "open")
        served = await result(holder)
        later = await env.execute_workflow(HeartbeatCall.run, args=[scope, "heartbeatingGatedJob", args], id=f"{queue}-later", task_queue=queue)
    assert later == served and (await count(client, prefix, counter), await count(client, prefix, f"{counter}-finished")) == (1, 1)


async def test_a_waiter_with_no_heartbeat_timeout_never_hears_its_cancellation_and_gets_the_holders_result(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """Temporal tells an activity of its cancellation only in the reply to a heartbeat, and a waiter
    heartbeats only when its activity has a heartbeat timeout (docs/temporal-features.md). Without
    one, a cancelled waiter (``WAIT_CANCELLATION_COMPLETED``) waits on, and its run gets the result
    of the holder's one dispatch."""
    worker, queue = _worker(temporal_env, client, prefix)
    env, counter = temporal_env.client, "wc-no-heartbeat"
    scope, args = f"s-{counter}", [counter]
    async with worker:
        holder = await env.start_workflow(HeartbeatCall.run, args=[scope, "heartbeatingGatedJob", args], id=f"{queue}-holder", task_queue=queue)
        await until(lambda: equals(count(client, prefix, counter), 1), "the holder's job to start")
        waiter = await env.start_workflow(
            CancelOnSignal.run, args=[scope, "heartbeatingGatedJob", args, "WAIT_CANCELLATION_COMPLETED", False], id=f"{queue}-w", task_queue=queue
        )
        await _waiting(client, prefix, waiter, scope)
        await waiter.signal(CancelOnSignal.cancel)

        async def cancel_requested() -> bool:
            return any(e.HasField("activity_task_cancel_requested_event_attributes") for e in (await waiter.fetch_history()).events)

        await until(cancel_requested, "the waiter's activity to be asked to cancel")
        await asyncio.sleep(1)  # 20 of the waiter's 50 ms polls: time for a cancellation to land, had it any way to
        assert (await waiter.describe()).status == WorkflowExecutionStatus.RUNNING
        await client.set(gate_key(prefix, counter), "open")
        served = await result(holder)
        assert await result(waiter) == served
    assert (await count(client, prefix, counter), await count(client, prefix, f"{counter}-finished")) == (1, 1)


async def test_a_holder_cancelled_with_abandon_is_never_told_its_job_commits_and_serves_the_waiter(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    env, scope, args = temporal_env.client, "s-abandon-holder", ["abandon-holder"]
    async with worker:
        holder = await env.start_workflow(CancelOnSignal.run, args=[scope, "gatedJob", args, "ABANDON"], id=f"{queue}-holder", task_queue=queue)
        await until(lambda: equals(count(client, prefix, "abandon-holder"), 1), "the holder's job to start")
        waiter = await env.start_workflow(HeartbeatCall.run, args=[scope, "gatedJob", args], id=f"{queue}-w", task_queue=queue)
        await _waiting(client, prefix, waiter, scope)
        await holder.signal(CancelOnSignal.cancel)
        assert await result(holder) == "cancelled"
        await client.set(gate_key(prefix, "abandon-holder"), "open")
        served = await result(waiter)
    assert served["counterId"] == "abandon-holder"
    assert (await count(client, prefix, "abandon-holder"), await count(client, prefix, "abandon-holder-finished")) == (1, 1)


async def test_a_holder_cancelled_with_try_cancel_whose_job_heartbeats_stops_releases_and_its_waiters_share_one_new_dispatch(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """TRY_CANCEL ends the holder's run at once, and its job hears of the cancellation in its next
    heartbeat's reply: it stops, the guard releases the lock, and one of the two waiters dispatches
    for both: 2 starts, 1 finished (``parked-options.test.ts`` › *TRY_CANCEL on a holder whose job
    heartbeats*, where the waiters are parked)."""
    worker, queue = _worker(temporal_env, client, prefix)
    env, scope, args = temporal_env.client, "s-try-holder", ["try-holder"]
    async with worker:
        holder = await env.start_workflow(CancelOnSignal.run, args=[scope, "heartbeatingGatedJob", args, "TRY_CANCEL"], id=f"{queue}-holder", task_queue=queue)
        await until(lambda: equals(count(client, prefix, "try-holder"), 1), "the holder's job to start")
        waiters = [await env.start_workflow(HeartbeatCall.run, args=[scope, "heartbeatingGatedJob", args], id=f"{queue}-w{i}", task_queue=queue) for i in range(2)]
        for waiter in waiters:
            await _waiting(client, prefix, waiter, scope)
        await holder.signal(CancelOnSignal.cancel)
        assert await result(holder) == "cancelled"
        # Within 10 s: a lock left to its lease (30 s) would let a waiter dispatch only far later.
        await until(lambda: equals(count(client, prefix, "try-holder"), 2), "a waiter's own dispatch, once the holder's job stopped", seconds=10)
        await client.set(gate_key(prefix, "try-holder"), "open")
        served = [await result(waiter) for waiter in waiters]
    assert served[0] == served[1] and served[0]["counterId"] == "try-holder"
    assert (await count(client, prefix, "try-holder"), await count(client, prefix, "try-holder-finished")) == (2, 1)
    assert (await decisions(client, prefix, scope))["released-on-failure"] == 1


async def test_continue_as_new_while_the_guarded_activity_waits_the_new_run_inherits_the_scope_and_gets_the_holders_result(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    env, scope, args = temporal_env.client, "s-can-wait", ["can-wait"]
    async with worker:
        holder = await env.start_workflow(HeartbeatCall.run, args=[scope, "heartbeatingGatedJob", args], id=f"{queue}-holder", task_queue=queue)
        await until(lambda: equals(count(client, prefix, "can-wait"), 1), "the holder's job to start")
        mover = await env.start_workflow(ContinueWhileWaiting.run, args=[scope, "heartbeatingGatedJob", args], id=f"{queue}-mover", task_queue=queue)
        await _waiting(client, prefix, mover, scope)
        await mover.signal(ContinueWhileWaiting.move)
        latest = env.get_workflow_handle(mover.id)
        await until(lambda: _continued_and_started(latest, mover), "the continued run's activity to start")
        await client.set(gate_key(prefix, "can-wait"), "open")
        served, moved = await result(holder), await result(latest)
    assert moved == {"scope": scope, "result": served}
    assert (await count(client, prefix, "can-wait"), await count(client, prefix, "can-wait-finished")) == (1, 1)


async def _continued_and_started(latest: WorkflowHandle[Any, Any], first: WorkflowHandle[Any, Any]) -> bool:
    description = await latest.describe()
    return description.run_id != first.result_run_id and await _activity_started(latest)


async def test_signal_with_start_with_the_scope_set_in_init_runs_the_signals_handler_under_it_and_shares_one_dispatch(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The SDK runs the handler of a signal delivered with the start before ``run``: set in
    ``__init__``, the scope is there. Two signal-with-starts on one workflow ID and one on a new ID
    share one dispatch; the history replays without the plugin."""
    worker, queue = _worker(temporal_env, client, prefix)
    env, scope, call = temporal_env.client, "s-sws", ["crossJob", ["sws", 300]]

    async def signal_with_start(workflow_id: str, calls: int) -> WorkflowHandle[Any, Any]:
        handle: WorkflowHandle[Any, Any] = await env.start_workflow(
            SignalScopeInInit.run, args=[scope, calls], id=workflow_id, task_queue=queue, start_signal="call", start_signal_args=call
        )
        return handle

    async with worker:
        handles = await asyncio.gather(signal_with_start(f"{queue}-a", 2), signal_with_start(f"{queue}-a", 2), signal_with_start(f"{queue}-b", 1))
        results = [await result(handles[0]), await result(handles[2])]
    seen = [*results[0], *results[1]]
    assert len(seen) == 3 and {s["scope"] for s in seen} == {scope} and all(s["result"] == seen[0]["result"] for s in seen)
    assert await count(client, prefix, "sws") == 1
    history = await handles[0].fetch_history()
    replay = await Replayer(workflows=[SignalScopeInInit]).replay_workflow(history, raise_on_replay_failure=False)
    assert replay.replay_failure is None


async def test_one_activity_slot_a_holder_that_outlives_its_heartbeat_timeout_its_retry_and_a_waiter_share_one_dispatch(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """``gatedJob`` never heartbeats: its 2 s heartbeat timeout ends the attempt on the server while
    the job runs on in the worker's one slot. The retry, and another run's call, wait for the slot;
    the job's commit serves both."""
    worker, queue = _worker(temporal_env, client, prefix, max_concurrent_activities=1)
    env, args = temporal_env.client, ["s-one-slot", "gatedJob", ["one-slot"]]
    async with worker:
        holder = await env.start_workflow(HeartbeatCall.run, args=args, id=f"{queue}-holder", task_queue=queue)
        await until(lambda: equals(count(client, prefix, "one-slot"), 1), "the holder's job to start")
        other = await env.start_workflow(HeartbeatCall.run, args=args, id=f"{queue}-other", task_queue=queue)
        assert await _last_failure_type(holder) == "timeout"
        await client.set(gate_key(prefix, "one-slot"), "open")
        results = [await result(holder), await result(other)]
    assert results[0] == results[1]
    assert (await count(client, prefix, "one-slot"), await count(client, prefix, "one-slot-finished")) == (1, 1)


async def test_activity_reset_of_a_waiter_by_the_cli_ends_its_attempt_and_its_next_one_gets_the_holders_result(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = _worker(temporal_env, client, prefix)
    env, scope, args = temporal_env.client, "s-reset-waiter", ["s-reset-waiter", "heartbeatingGatedJob", ["reset-waiter"]]
    cli = os.environ.get("TEMPORAL_CLI_PATH") or "temporal"
    async with worker:
        holder = await env.start_workflow(HeartbeatCall.run, args=args, id=f"{queue}-holder", task_queue=queue)
        await until(lambda: equals(count(client, prefix, "reset-waiter"), 1), "the holder's job to start")
        waiter = await env.start_workflow(HeartbeatCall.run, args=args, id=f"{queue}-w", task_queue=queue)
        await _waiting(client, prefix, waiter, scope)
        address = env.service_client.config.target_host
        command = [cli, "activity", "reset", "--address", address, "--workflow-id", waiter.id, "--activity-id", "1"]
        subprocess.run(command, check=True, capture_output=True, timeout=30)
        assert await _last_failure_type(waiter) == "ActivityReset"
        assert await count(client, prefix, "reset-waiter-finished") == 0
        await until(lambda: _activity_started(waiter), "the waiter's next attempt to wait in its slot")
        await client.set(gate_key(prefix, "reset-waiter"), "open")
        results = [await result(holder), await result(waiter)]
    assert results[0] == results[1] and (await _pending(waiter)) is None
    assert await client.get(counter_key(prefix, "reset-waiter")) == b"1"


async def test_three_signals_and_two_updates_each_schedule_the_job_and_one_dispatch_serves_all_five(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """Handlers schedule guarded activities under the run's scope: five concurrent calls in one run
    (``workflow-features.test.ts`` › *signals and updates*)."""
    worker, queue = _worker(temporal_env, client, prefix)
    async with worker:
        handle = await temporal_env.client.start_workflow(HandlersCall.run, "s-handlers", id=f"{queue}-run", task_queue=queue)
        for _ in range(3):
            await handle.signal(HandlersCall.dispatch, 500)
        updates = await asyncio.gather(*(handle.execute_update(HandlersCall.dispatch_now, 500) for _ in range(2)))
        await handle.signal(HandlersCall.finish)
        from_signals = await result(handle)
    assert len(from_signals) == 3
    every = [*from_signals, *updates]
    assert all(r == every[0] for r in every) and every[0]["counterId"] == "s-handlers"
    assert await count(client, prefix, "s-handlers") == 1
