"""The Python worker side on a real dev server and a real Redis: racing runs dispatch once,
failure releases, scopes reach activities through children and continue-as-new, and guard
errors reach the workflow with their type."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any, Awaitable, Callable, Sequence

import pytest
from redis.asyncio import Redis
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Interceptor, Worker

from temporal_fire_once import FireOncePlugin
from temporal_fire_once.core import Acquired, DispatchTarget, FireOnceGuard, FireOnceKeys, GuardOptions

from .conftest import collect_garbage, until
from .pyactivities import counter_key, make_activities
from .pyworkflows import CancelledCall, ContinuedCall, GuardedCall, HeartbeatCall, InitScopeCall, LocalCall, ParentCall


async def run_worker(
    env: Any, client: Redis, prefix: str, guard_redis: Redis | None = None, interceptors: Sequence[Interceptor] = (), **options: Any
) -> tuple[Worker, str]:
    """A worker whose guard uses ``guard_redis`` (``client`` by default); jobs count on ``client``.
    ``interceptors`` are added beside the plugin."""
    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        env.client,
        task_queue=queue,
        workflows=[GuardedCall, ParentCall, ContinuedCall, CancelledCall, LocalCall, InitScopeCall],
        activities=make_activities(client, prefix),
        plugins=[FireOncePlugin(guard_redis or client, key_prefix=prefix, poll_interval_ms=50, **options)],
        interceptors=list(interceptors),
    )
    return worker, queue


async def activity_failure(env: Any, queue: str, workflow_id: str, args: list[Any]) -> ApplicationError:
    """Run ``GuardedCall`` with ``args``, which must fail; the guarded activity's ``ApplicationError``."""
    with pytest.raises(WorkflowFailureError) as caught:
        await env.client.execute_workflow(GuardedCall.run, args=args, id=workflow_id, task_queue=queue)
    cause = caught.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    return cause.cause


async def test_ten_racing_runs_of_one_scope_dispatch_once(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        runs = [
            temporal_env.client.execute_workflow(GuardedCall.run, args=["s-race", "crossJob", ["race", 300]], id=f"{queue}-{i}", task_queue=queue)
            for i in range(10)
        ]
        results = await asyncio.gather(*runs)
        later = await temporal_env.client.execute_workflow(
            GuardedCall.run, args=["s-race", "crossJob", ["race", 300]], id=f"{queue}-later", task_queue=queue
        )
    assert await client.get(counter_key(prefix, "race")) == b"1"
    assert all(r == results[0] for r in results) and later == results[0]
    log = f"{prefix}:v3:default:log"

    async def decisions_of() -> list[bytes]:
        entries: Any = await client.xrange(log)
        return [fields[b"decision"] for _, fields in entries]

    async def settled() -> bool:  # the log is written in the background
        return (await decisions_of()).count(b"fast-forwarded") >= 10

    await until(settled, "the ten fast-forwards in the dispatch log")
    entries: Any = await client.xrange(log)
    decisions = await decisions_of()
    assert decisions.count(b"dispatched") == 1 and decisions.count(b"committed") == 1
    assert decisions.count(b"fast-forwarded") == 10  # 9 after waiting (in-flight-waited), 1 later
    # Each waiter's entry names the holder it found, by the dispatch's fencing token.
    (fencing,) = [fields[b"fencingToken"] for _, fields in entries if fields[b"decision"] == b"dispatched"]
    waited = [fields.get(b"fencingToken") for _, fields in entries if fields[b"decision"] == b"in-flight-waited"]
    assert set(waited) <= {fencing}  # (a run that came after the commit fast-forwarded without waiting)


async def test_a_failed_dispatch_releases_and_the_retry_dispatches_again(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        result = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-flaky", "flakyJob", ["flaky"]], id=queue, task_queue=queue)
    assert result == {"counterId": "flaky", "count": 2}


async def test_the_scope_reaches_a_child_and_a_continued_run(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        first = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-carry", "crossJob", ["carry", 0]], id=queue, task_queue=queue)
        child = await temporal_env.client.execute_workflow(ParentCall.run, args=["s-carry", "crossJob", ["carry", 0]], id=f"{queue}-p", task_queue=queue)
        continued = await temporal_env.client.execute_workflow(
            ContinuedCall.run, args=["s-carry", "crossJob", ["carry", 0]], id=f"{queue}-c", task_queue=queue
        )
    assert child == first and continued == first
    assert await client.get(counter_key(prefix, "carry")) == b"1"


async def test_a_scope_set_in_a_workflow_init_reaches_the_activity_and_wins_over_the_inherited_one(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """``__init__`` runs before the workflow instance exists for ``workflow.instance()``, and
    before the interceptor applies the scope of the incoming header."""
    keys = FireOnceKeys(prefix)
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        runs = [(f"{queue}-alone", ["s-init", "crossJob", ["init", 0]]), (f"{queue}-parent", ["s-init", "crossJob", ["init", 0], "s-parent"])]
        alone, child = [
            await temporal_env.client.execute_workflow(InitScopeCall.run, args=args, id=id, task_queue=queue, execution_timeout=timedelta(seconds=20))
            for id, args in runs
        ]
    assert alone["scope"] == "s-init" and child == alone  # the child fast-forwarded to the one result of s-init
    assert await client.get(counter_key(prefix, "init")) == b"1"
    assert await client.exists(keys.artifact("s-init", "crossJob")) == 1
    assert [key async for key in client.scan_iter(match=f"{prefix}:*s-parent*")] == []


async def test_a_guarded_activity_without_a_scope_fails_with_its_type_and_dispatches_nothing(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        failure = await activity_failure(temporal_env, queue, queue, ["", "crossJob", ["none", 0]])
    assert (failure.type, failure.non_retryable) == ("FireOnceMissingScope", True)
    assert failure.message.startswith("activity 'crossJob' has no dispatch scope: call set_dispatch_scope() in the workflow")
    assert await client.get(counter_key(prefix, "none")) is None


async def test_a_scope_option_that_returns_none_fails_naming_the_option_not_set_dispatch_scope_and_dispatches_nothing(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    from temporalio import activity

    from temporal_fire_once import fire_once

    @fire_once(scope=lambda args, info: None)  # type: ignore[arg-type, return-value]
    @activity.defn(name="noneScopeJob")
    async def none_scope_job(counter_id: str) -> None:
        await client.incr(counter_key(prefix, counter_id))

    queue = f"py-{uuid.uuid4().hex[:8]}"
    collect_garbage()
    worker = Worker(temporal_env.client, task_queue=queue, workflows=[GuardedCall], activities=[none_scope_job], plugins=[FireOncePlugin(client, key_prefix=prefix)])
    async with worker:
        failure = await activity_failure(temporal_env, queue, queue, ["", "noneScopeJob", ["none-scope"]])
    assert (failure.type, failure.non_retryable) == ("FireOnceMissingScope", True)
    assert failure.message.startswith("activity 'noneScopeJob' has no dispatch scope: its scope option returned None: make it return the scope")
    assert "set_dispatch_scope" not in failure.message
    assert await client.get(counter_key(prefix, "none-scope")) is None


async def test_observe_only_never_fails_a_call_one_the_guard_would_refuse_runs_unlogged_with_a_warning(
    temporal_env: Any, client: Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        result = await temporal_env.client.execute_workflow(GuardedCall.run, args=["", "observeJob", ["observed"]], id=queue, task_queue=queue)
    assert result == "observed"
    assert await client.get(counter_key(prefix, "observed")) == b"1"
    assert await client.xlen(FireOnceKeys(prefix).log()) == 0
    assert any("observeOnly: the guard would refuse this call (FireOnceMissingScope" in r.getMessage() for r in caplog.records)


async def test_a_scope_option_that_raises_fails_with_a_config_error_naming_it_and_dispatches_nothing(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        failure = await activity_failure(temporal_env, queue, queue, ["s", "brokenScopeJob", ["broken"]])
    assert (failure.type, failure.non_retryable) == ("FireOnceConfigError", True)
    assert "the scope option of activity 'brokenScopeJob' raised: ZeroDivisionError: boom" in failure.message
    assert await client.get(counter_key(prefix, "broken")) is None


@pytest.mark.parametrize(("job", "option"), [("asyncScopeJob", "scope"), ("asyncConflictKeyJob", "conflict_key"), ("asyncExternalJob", "artifact.external")])
async def test_an_option_function_written_async_fails_with_a_config_error_naming_it_and_dispatches_nothing(
    temporal_env: Any, client: Redis, prefix: str, job: str, option: str
) -> None:
    """As in TypeScript (test/bad-input/option-functions.test.ts): an async function's awaitable is
    no scope, conflict value or key; an async conflict_key would hash alike for every call."""
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        failure = await activity_failure(temporal_env, queue, queue, ["s-async-option", job, ["async-option"]])
    assert (failure.type, failure.non_retryable) == ("FireOnceConfigError", True)
    assert failure.message == f"the {option} option of activity {job!r} returned an awaitable: it must return the value itself (a plain function, not an async one)"
    assert await client.get(counter_key(prefix, "async-option")) is None
    assert [key async for key in client.scan_iter(match=f"{prefix}:v3:*s-async-option*")] == []


async def test_a_value_the_converter_cannot_serialise_fails_with_a_config_error_naming_its_class_and_dispatches_nothing(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """A conflict_key value, or an argument decoded into something the converter cannot encode
    again, cannot be hashed: that is the worker's code at fault, not the call, so it must not be
    retried for ever, and the message names the error's class, never the value."""
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        key = await activity_failure(temporal_env, queue, f"{queue}-k", ["s-unhashable", "unhashableKeyJob", ["unhashable"]])
        args = await activity_failure(temporal_env, queue, f"{queue}-a", ["s-unhashable", "unhashableArgsJob", ["unhashable", {"text": "a+"}]])
    assert (key.type, key.non_retryable) == ("FireOnceConfigError", True)
    assert key.message == "the value of the conflict_key option of activity 'unhashableKeyJob' cannot be serialised by the payload converter (TypeError)"
    assert (args.type, args.non_retryable) == ("FireOnceConfigError", True)
    assert args.message == "the arguments of activity 'unhashableArgsJob' cannot be serialised by the payload converter (TypeError)"
    assert await client.get(counter_key(prefix, "unhashable")) is None
    assert [key async for key in client.scan_iter(match=f"{prefix}:v3:*s-unhashable*")] == []


async def test_while_another_holds_the_lock_fail_raises_retryable_in_flight_and_skip_returns_none(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    before = time.time()
    held = await guard.acquire(DispatchTarget("s-busy", "busy", "busy", "default", holder="another run"), lock_ttl_ms=60_000)
    assert isinstance(held, Acquired)
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        skipped = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-busy", "skipWhileBusy", ["busy"]], id=f"{queue}-s", task_queue=queue)
        failure = await activity_failure(temporal_env, queue, f"{queue}-f", ["s-busy", "failWhileBusy", ["busy"], None, 1])
    held_for = time.time() - before  # at least how long the holder had run when 'fail' failed
    assert skipped is None
    assert (failure.type, failure.non_retryable) == ("FireOnceInFlight", False)
    # Retry after half the holder's run so far (at least 100 ms), not after the lock's 60 s TTL left.
    assert failure.next_retry_delay is not None
    assert 0.1 <= failure.next_retry_delay.total_seconds() <= max(held_for / 2 + 0.001, 0.1)
    assert await client.get(counter_key(prefix, "busy")) is None


async def test_a_job_five_leases_long_with_racing_runs_dispatches_once(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:

        async def run(i: int, delay: float) -> Any:
            await asyncio.sleep(delay)
            return await temporal_env.client.execute_workflow(
                GuardedCall.run, args=["s-long", "longJob", ["long", 5_000]], id=f"{queue}-{i}", task_queue=queue
            )

        # A new run every lease while the first job runs: each finds the renewed lock.
        results = await asyncio.gather(*(run(i, i * 1.0) for i in range(5)))
    assert all(r == results[0] for r in results)
    assert await client.get(counter_key(prefix, "long")) == b"1"


async def test_a_start_to_close_shorter_than_the_job_overlaps_its_retries_and_dispatches_once(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The retry that starts while an earlier attempt still runs its job (start-to-close 1.5 s,
    a 4 s job that does not heartbeat, so its worker is never told the attempt timed out): each
    later attempt finds the lock and waits, and one after the job's commit fast-forwards."""
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        handle = await temporal_env.client.start_workflow(
            GuardedCall.run, args=["s-overlap", "longJob", ["overlap", 4_000], None, 8, [1_500]], id=f"{queue}-overlap", task_queue=queue
        )
        result = await handle.result()
    assert result["counterId"] == "overlap"
    assert await client.get(counter_key(prefix, "overlap")) == b"1"
    started = [e.activity_task_started_event_attributes async for e in handle.fetch_history_events() if e.HasField("activity_task_started_event_attributes")]
    assert started[-1].attempt > 1  # the attempt that returned is a retry: the first one timed out


async def test_a_local_activity_waiter_waits_again_on_each_retry(temporal_env: Any, client: Redis, prefix: str) -> None:
    """A local activity's retries are scheduled from its first attempt, so a give-up deadline
    counted from ``current_attempt_scheduled_time`` would be past at once on every retry, and the
    waiter would fail while the one dispatch still runs. Each attempt must wait its own time."""
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        holder = await temporal_env.client.start_workflow(
            GuardedCall.run, args=["s-local", "crossJob", ["local", 3_000]], id=f"{queue}-holder", task_queue=queue
        )
        while await client.get(counter_key(prefix, "local")) is None:
            await asyncio.sleep(0.05)
        # 1.5 s attempts, 6 of them: together they outlast the 3 s job only if each one waits.
        waited = await temporal_env.client.execute_workflow(
            LocalCall.run, args=["s-local", "crossJob", ["local", 3_000], 1_500, 6], id=f"{queue}-waiter", task_queue=queue
        )
        assert waited == await holder.result()
    assert await client.get(counter_key(prefix, "local")) == b"1"


async def test_a_cancelled_dispatch_releases_its_lock(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        outcome = await temporal_env.client.execute_workflow(CancelledCall.run, args=["s-cancel", "cancellableJob", ["cancel"]], id=queue, task_queue=queue)
    assert outcome == "cancelled"
    assert await client.get(counter_key(prefix, "cancel")) == b"1"
    assert await client.exists(FireOnceKeys(prefix).lock("s-cancel", "cancellableJob")) == 0


async def test_a_waiter_cancelled_while_its_recheck_takes_the_lock_dispatches_nothing_and_gives_it_back(
    temporal_env: Any, client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK cancels an activity by cancelling its task, wherever it awaits. If that is a waiter's
    re-check while Redis runs it, the acquire can take the lock with nobody left to use or release
    it: every later invocation would wait for the lock's TTL."""
    keys = FireOnceKeys(prefix)
    target = DispatchTarget("s-mid", "crossJob", "crossJob", "default", None, "another holder", "")
    holder = await FireOnceGuard(client, GuardOptions(key_prefix=prefix)).acquire(target)
    assert isinstance(holder, Acquired)
    from temporal_fire_once.core.scripts import ACQUIRE

    calls = 0

    async def racing(redis: Redis, script_keys: list[str], args: list[Any]) -> Any:
        nonlocal calls
        calls += 1
        if calls != 2:
            return await ACQUIRE(redis, script_keys, args)
        # The waiter's re-check, once the holder has failed: Redis gives it the lock, and the
        # activity is cancelled, as the SDK cancels one, before the reply reaches the caller.
        await FireOnceGuard(client, GuardOptions(key_prefix=prefix)).release(holder.lease)
        reply = await ACQUIRE(redis, script_keys, args)
        (task,) = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__.endswith("_handle_start_activity_task")]  # type: ignore[union-attr]
        task.cancel()
        await asyncio.sleep(0.5)
        return reply

    monkeypatch.setattr("temporal_fire_once.core.guard.ACQUIRE", racing)
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        with pytest.raises(WorkflowFailureError):
            await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-mid", "crossJob", ["mid", 0], None, 1], id=queue, task_queue=queue)
    assert calls == 2

    async def given_back() -> bool:
        return bool(await client.exists(keys.lock("s-mid", "crossJob")) == 0)

    # The reply comes 0.5 s after the cancellation; the lock is given back then, well within 10 s
    # (its lease, 30 s, would end it only far later).
    await until(given_back, "the lock given back", seconds=10)
    assert await client.get(counter_key(prefix, "mid")) is None


async def test_a_waiter_cancelled_while_it_leaves_the_wake_channel_does_not_keep_the_lock_it_took(
    temporal_env: Any, client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once its re-check has taken the lock, a waiter leaves the wake channel. If leaving awaited
    Redis, a cancellation landing there would lose the lock it holds: nobody would dispatch or
    release, and every later invocation would wait for the lock's TTL."""
    from redis.asyncio.client import PubSub

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    holder = await guard.acquire(DispatchTarget("s-leave", "crossJob", "crossJob", "default", None, "another holder", ""))
    assert isinstance(holder, Acquired)
    original = PubSub.unsubscribe

    async def slow(self: PubSub, *args: Any) -> Any:
        (task,) = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__.endswith("_handle_start_activity_task")]  # type: ignore[union-attr]
        asyncio.get_running_loop().call_later(0.1, task.cancel)  # as the SDK cancels an activity
        await asyncio.sleep(0.5)
        return await original(self, *args)

    monkeypatch.setattr(PubSub, "unsubscribe", slow)
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        run = asyncio.ensure_future(
            temporal_env.client.execute_workflow(GuardedCall.run, args=["s-leave", "crossJob", ["leave", 5_000], None, 1], id=queue, task_queue=queue)
        )
        await asyncio.sleep(0.5)  # the waiter is in its slot
        await guard.release(holder.lease)  # the holder fails: the waiter takes the lock
        with pytest.raises(WorkflowFailureError):
            await run
        await asyncio.sleep(0.6)
    assert await client.exists(FireOnceKeys(prefix).lock("s-leave", "crossJob")) == 0


async def test_a_waiters_heartbeats_keep_the_details_an_earlier_attempt_recorded(temporal_env: Any, client: Redis, prefix: str) -> None:
    """Temporal keeps one set of heartbeat details per activity, across its attempts, and every
    heartbeat replaces it: it is where a job records progress for its next attempt to resume from.
    A waiter runs none of the job, so the heartbeats it sends in its slot must carry the details
    its attempt started with, and the attempt that dispatches next must find them
    (test/integration/heartbeat-details.test.ts on the TypeScript side)."""
    import json

    from temporalio import activity
    from temporalio.client import WorkflowHandle

    from temporal_fire_once import fire_once

    seen_key = f"{prefix}:seen"  # what each dispatch found, recorded outside the guard

    def go(role: str) -> str:
        return f"{prefix}:go:{role}"

    @fire_once(on_conflict="ignore")
    @activity.defn(name="progressJob")
    async def progress_job(role: str) -> str:
        info = activity.info()
        await client.rpush(seen_key, json.dumps({"role": role, "attempt": info.attempt, "details": list(info.heartbeat_details)}))
        if role == "waiter" and info.attempt == 1:  # records its progress, then fails (retryably) once told to
            while not await client.exists(go("waiter")):
                activity.heartbeat({"page": 5})
                await asyncio.sleep(0.1)
            raise RuntimeError("the first attempt fails after recording its progress")
        if role == "holder":
            while not await client.exists(go("holder")):
                activity.heartbeat()
                await asyncio.sleep(0.1)
            raise ApplicationError("the holder fails", type="HolderFailed", non_retryable=True)
        return f"{role} done"

    async def seen(role: str) -> list[dict[str, Any]]:
        return [entry for entry in (json.loads(raw) for raw in await client.lrange(seen_key, 0, -1)) if entry["role"] == role]

    async def pending(handle: WorkflowHandle[Any, Any]) -> Any:
        activities = (await handle.describe()).raw_description.pending_activities
        return activities[0] if activities else None

    def details(activity_info: Any) -> list[Any]:
        return list(temporal_env.client.data_converter.payload_converter.from_payloads(list(activity_info.heartbeat_details.payloads)))

    async def waiter_recorded_progress() -> bool:
        p = await pending(waiter)
        return p is not None and details(p) != []

    async def holder_waits_in_its_slot() -> bool:
        p = await pending(holder)
        return p is not None and p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED

    async def holder_dispatched() -> bool:
        return await seen("holder") != []

    async def waiter_heartbeated_in_attempt_2() -> bool:
        p = await pending(waiter)
        return (
            p is not None
            and p.attempt >= 2
            and p.HasField("last_started_time")
            and p.last_heartbeat_time.ToMilliseconds() > p.last_started_time.ToMilliseconds()
        )

    queue = f"py-{uuid.uuid4().hex[:8]}"
    collect_garbage()
    worker = Worker(
        temporal_env.client,
        task_queue=queue,
        workflows=[HeartbeatCall],
        activities=[progress_job],
        plugins=[FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=100)],
    )
    async def start(role: str) -> WorkflowHandle[Any, Any]:
        handle: WorkflowHandle[Any, Any] = await temporal_env.client.start_workflow(
            HeartbeatCall.run, args=["s-progress", "progressJob", [role]], id=f"{queue}-{role}", task_queue=queue
        )
        return handle

    async with worker:
        waiter = await start("waiter")
        await until(waiter_recorded_progress, "the waiter dispatched and recorded its progress")
        holder = await start("holder")
        await until(holder_waits_in_its_slot, "the holder waits in its slot")
        await client.set(go("waiter"), "1")  # the waiter's attempt 1 fails; the holder takes the lock over
        await until(holder_dispatched, "the holder dispatched")
        # The waiter's attempt 2 finds the holder's lock, and waits in its slot, heartbeating.
        await until(waiter_heartbeated_in_attempt_2, "a heartbeat of the waiter's attempt 2")
        recorded = details(await pending(waiter))
        await client.set(go("holder"), "1")
        with pytest.raises(WorkflowFailureError):
            await holder.result()
        result = await waiter.result()
    assert recorded == [{"page": 5}]
    assert result == "waiter done"
    # Every dispatch of the waiter after its first found the progress its first recorded.
    later = (await seen("waiter"))[1:]
    assert later and [entry["details"] for entry in later] == [[{"page": 5}]] * len(later)


async def test_a_waiter_gives_up_before_schedule_to_close_so_a_timed_out_activity_never_dispatches(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """Schedule-to-close runs over every attempt: a retry's start-to-close can end after it. A waiter
    that kept its slot past it would still dispatch when the holder fails, for an activity Temporal
    has timed out. Here attempt 1 gives up at 2.4 s, and attempt 2 would wait until about 4.9 s."""
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    holder = await guard.acquire(DispatchTarget("s-stc", "crossJob", "crossJob", "default", None, "another holder", ""))
    assert isinstance(holder, Acquired)
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        with pytest.raises(WorkflowFailureError):
            await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-stc", "crossJob", ["stc", 0], None, 5, [3_000, 3_500]], id=queue, task_queue=queue)
        await guard.release(holder.lease)  # the holder fails once Temporal has timed the waiter out
        await asyncio.sleep(1.0)  # a waiter still in its slot takes the lock and dispatches within a poll
    assert await client.get(counter_key(prefix, "stc")) is None


@pytest.mark.parametrize("key_namespace", [None, "tenant-b"])
async def test_an_external_artifact_holds_the_lock_then_fast_forwards_once_the_job_wrote_it(
    temporal_env: Any, client: Redis, prefix: str, key_namespace: str | None
) -> None:
    keys = FireOnceKeys(prefix).for_namespace(key_namespace or "default")
    worker, queue = await run_worker(temporal_env, client, prefix, key_namespace=key_namespace)
    async with worker:
        first = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-ext", "externalJob", ["ext"]], id=f"{queue}-1", task_queue=queue)
        held = await client.pttl(keys.lock("s-ext", "externalJob"))
        await client.set(keys.external("s-ext", "externalJob"), "written by the job", px=60_000)
        await client.delete(keys.lock("s-ext", "externalJob"))
        again = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-ext", "externalJob", ["ext"]], id=f"{queue}-2", task_queue=queue)
    assert first is None and again is None
    assert held > 60_000  # held for lock_ttl_ms (15 min) after the dispatch, not left to its lease
    assert await client.get(counter_key(prefix, "ext")) == b"1"
    if key_namespace is not None:  # the job's key is its namespace's, not the default one's
        assert keys.external("s-ext", "externalJob") != FireOnceKeys(prefix).external("s-ext", "externalJob")


@pytest.mark.parametrize("job", ["asyncJob", "externalAsyncJob"])
async def test_a_job_that_completes_asynchronously_keeps_the_lock_and_warns_in_result_mode_whose_result_the_guard_never_sees(
    temporal_env: Any, client: Redis, prefix: str, job: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As in TypeScript (test/worker/interceptor.test.ts, test/temporal-features/async-completion.test.ts):
    ``raise_complete_async()`` is neither success nor failure, so the lock stays and nothing is
    stored; in ``'result'`` mode the result the activity is completed with never reaches the
    guard, which says so at WARNING."""
    keys = FireOnceKeys(prefix)
    worker, queue = await run_worker(temporal_env, client, prefix)
    with caplog.at_level("WARNING", logger="temporal_fire_once"):
        async with worker:
            handle = await temporal_env.client.start_workflow(GuardedCall.run, args=["s-async", job, ["async"]], id=queue, task_queue=queue)
            for _ in range(200):
                token = await client.get(f"{prefix}:task-token:async")
                if token is not None:
                    break
                await asyncio.sleep(0.05)
            assert token is not None
            assert await client.exists(keys.lock("s-async", job)) == 1
            assert await client.exists(keys.artifact("s-async", job)) == 0
            await temporal_env.client.get_async_activity_handle(task_token=token).complete(None if job == "externalAsyncJob" else "done")
            assert await handle.result() == (None if job == "externalAsyncJob" else "done")
    warned = [r.getMessage() for r in caplog.records if "completes asynchronously" in r.getMessage()]
    if job == "asyncJob":
        assert len(warned) == 1 and "in 'result' mode the result it is completed with never reaches the guard" in warned[0]
    else:
        assert warned == []
    assert await client.get(counter_key(prefix, "async")) == b"1"


@pytest.mark.parametrize("scope", ["s-other-scope", "s-other-namespace", "s-lock", "s-result", "s-empty", "s-not-a-string"])
async def test_an_external_key_of_another_scope_or_namespace_or_of_the_guards_own_is_refused_and_dispatches_nothing(
    temporal_env: Any, client: Redis, prefix: str, scope: str
) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        failure = await activity_failure(temporal_env, queue, queue, [scope, "checkedExternalJob", ["checked"]])
        await temporal_env.client.execute_workflow(
            GuardedCall.run, args=["s-users-own", "checkedExternalJob", ["own"]], id=f"{queue}-own", task_queue=queue
        )
    assert (failure.type, failure.non_retryable) == ("FireOnceConfigError", True)
    assert f"the external artifact key of 'checkedExternalJob' in scope {scope!r}" in failure.message
    assert await client.get(counter_key(prefix, "checked")) is None
    assert await client.keys(f"{prefix}:v3:*{scope}*") == []  # nothing locked
    assert await client.get(counter_key(prefix, "own")) == b"1"  # a key outside the prefix is the user's own


@pytest.mark.parametrize(
    ("bad_scope", "problem"),
    [
        ("", 'scope must not be empty or whitespace only (got "")'),
        (42, "scope must be a string (got int)"),  # None is no scope at all: FireOnceMissingScope
        ("a" * 513, "scope must be at most 512 bytes of UTF-8 (got 513)"),
    ],
)
async def test_in_external_artifact_mode_a_bad_scope_is_an_invalid_id_found_before_the_external_function_runs(
    temporal_env: Any, client: Redis, prefix: str, bad_scope: object, problem: str
) -> None:
    """The ``external`` function builds its key from the scope: a bad scope is still the
    documented ``FireOnceInvalidId``, found first, not a ``FireOnceConfigError`` blaming the
    option for the key builder's refusal."""
    from temporalio import activity

    from temporal_fire_once import ExternalArtifact, fire_once

    built: list[str] = []  # calls of the external function, counted outside the guard

    def external(ids: Any) -> str:
        built.append(ids.scope)
        return FireOnceKeys(prefix).for_namespace(ids.namespace).external(ids.scope, ids.job_type)

    @fire_once(scope=lambda args, info: args[1], artifact=ExternalArtifact(external=external))
    @activity.defn(name="badScopeExternalJob")
    async def bad_scope_external_job(counter_id: str, scope: Any) -> None:
        await client.incr(counter_key(prefix, counter_id))

    queue = f"py-{uuid.uuid4().hex[:8]}"
    collect_garbage()
    worker = Worker(
        temporal_env.client,
        task_queue=queue,
        workflows=[GuardedCall],
        activities=[bad_scope_external_job],
        plugins=[FireOncePlugin(client, key_prefix=prefix)],
    )
    async with worker:
        failure = await activity_failure(temporal_env, queue, queue, ["s", "badScopeExternalJob", ["bad-scope", bad_scope]])
    assert (failure.type, failure.non_retryable) == ("FireOnceInvalidId", True)
    assert problem in failure.message
    assert built == []
    assert await client.get(counter_key(prefix, "bad-scope")) is None
    assert await client.keys(f"{prefix}:v3:*") == []  # nothing locked


async def test_with_redis_down_a_guarded_activity_fails_closed_and_retryable(temporal_env: Any, client: Redis, prefix: str) -> None:
    from redis.asyncio import Redis as AsyncRedis

    from temporal_fire_once import FireOnceInterceptor, WorkerDefaults

    from .conftest import free_port

    dead = AsyncRedis(port=free_port(), socket_connect_timeout=0.5)
    queue = f"py-{uuid.uuid4().hex[:8]}"
    guard = FireOnceGuard(dead, GuardOptions(key_prefix=prefix, store_timeout_ms=1_000))
    collect_garbage()
    worker = Worker(
        temporal_env.client,
        task_queue=queue,
        workflows=[GuardedCall],
        activities=make_activities(client, prefix),
        interceptors=[FireOnceInterceptor(guard, WorkerDefaults(dispatch_log=False))],
    )
    async with worker:
        failure = await activity_failure(temporal_env, queue, queue, ["s-down", "crossJob", ["down", 0], None, 1])
    assert (failure.type, failure.non_retryable) == ("FireOnceStoreUnavailable", False)
    assert await client.get(counter_key(prefix, "down")) is None
    await dead.aclose()


async def test_an_activity_guarded_twice_on_one_worker_fails_with_a_config_error_and_dispatches_nothing(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The plugin and a hand-wired ``FireOnceInterceptor`` on one worker (or the plugin given
    twice) nest two guards: the inner one found the lock the outer one had just taken, waited on
    it for the whole attempt and failed with the retryable ``FireOnceInFlight``, attempt after
    attempt, never dispatching. The inner one now fails the call with the non-retryable
    ``FireOnceConfigError`` saying so, and the outer one gives the lock back."""
    from temporal_fire_once import FireOnceInterceptor, WorkerDefaults

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    worker, queue = await run_worker(temporal_env, client, prefix, interceptors=[FireOnceInterceptor(guard, WorkerDefaults(poll_interval_ms=50))])
    async with worker:
        failure = await activity_failure(temporal_env, queue, queue, ["s-twice", "crossJob", ["twice", 0], None, 1, [3_000]])
    assert (failure.type, failure.non_retryable) == ("FireOnceConfigError", True)
    assert "guarded twice" in str(failure)
    assert await client.get(counter_key(prefix, "twice")) is None
    assert await client.exists(FireOnceKeys(prefix).lock("s-twice", "crossJob")) == 0


async def test_a_dispatch_sees_its_own_lock_and_fencing_token(temporal_env: Any, client: Redis, prefix: str) -> None:
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        seen = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-ctx", "contextJob", []], id=queue, task_queue=queue)
    assert seen["lockKey"] == FireOnceKeys(prefix).lock("s-ctx", "contextJob") and seen["lost"] is False
    entries: Any = await client.xrange(f"{prefix}:v3:default:log")
    dispatched = [fields for _, fields in entries if fields[b"decision"] == b"dispatched"]
    assert [int(fields[b"fencingToken"]) for fields in dispatched] == [seen["fencing"]]


async def test_a_lease_no_renewal_reached_for_a_whole_lease_is_reported_lost_and_renewing_goes_on(
    temporal_env: Any, client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renewals that cannot reach Redis leave the lock to expire: after a whole lease without one,
    the job learns its lock may be lost. Renewing goes on, since Redis may still hold it for this
    token (the renewals ran, or Redis came back with it)."""
    from temporal_fire_once import FireOnceStoreUnavailable

    async def unreachable(self: FireOnceGuard, lease: Any, lock_ttl_ms: int) -> bool:
        await client.incr(counter_key(prefix, "unrenewed-renewals"))
        raise FireOnceStoreUnavailable("Redis did not answer in time")

    monkeypatch.setattr(FireOnceGuard, "extend", unreachable)
    seen = await run_unrenewed_job(temporal_env, client, prefix, "unrenewed")
    assert seen["lost"] is True
    assert int(await client.get(counter_key(prefix, "unrenewed-renewals")) or 0) > seen["renewalsWhenLost"]
    assert await client.get(counter_key(prefix, "unrenewed")) == b"1"


async def run_unrenewed_job(temporal_env: Any, client: Redis, prefix: str, name: str) -> Any:
    """Run ``unrenewedJob`` (its 1 s lease renewed through the patched ``extend``, which counts in
    ``<name>-renewals``) in scope ``s-<name>``; what it saw, once ``lock-lost`` was logged once."""
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        seen = await temporal_env.client.execute_workflow(GuardedCall.run, args=[f"s-{name}", "unrenewedJob", [name, f"{name}-renewals"]], id=queue, task_queue=queue)
    entries: Any = await client.xrange(f"{prefix}:v3:default:log")
    assert [fields[b"decision"] for _, fields in entries].count(b"lock-lost") == 1
    return seen


async def test_a_lease_whose_renewal_finds_the_lock_gone_is_lost_at_once_and_renewed_no_more(
    temporal_env: Any, client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first renewal finds the lock deleted (what ``fire-once release --force`` does): the job
    learns it at once, ``lock-lost`` is logged once, and renewing stops, where a renewal that could
    not reach Redis goes on (above)."""
    real_extend = FireOnceGuard.extend

    async def deleted_first(self: FireOnceGuard, lease: Any, lock_ttl_ms: int) -> bool:
        if await client.incr(counter_key(prefix, "gone-renewals")) == 1:
            await client.delete(lease.lock_key)
        return await real_extend(self, lease, lock_ttl_ms)

    monkeypatch.setattr(FireOnceGuard, "extend", deleted_first)
    seen = await run_unrenewed_job(temporal_env, client, prefix, "gone")
    # Lost at the first renewal, and none sent in the three renewal periods the job ran on for.
    assert (seen["lost"], seen["renewalsWhenLost"]) == (True, 1)
    assert await client.get(counter_key(prefix, "gone-renewals")) == b"1"


async def test_a_commit_that_fails_delivers_the_result_and_leaves_the_lock_to_its_ttl_releasing_nothing(
    temporal_env: Any, client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that timed out may still land. A release sent after it, on another connection of the
    pool, could land first, and a waiter would then dispatch the job again: the lock is left to its
    TTL instead (how-it-decides.md)."""
    from temporal_fire_once import FireOnceStoreUnavailable

    released: list[str] = []
    real_release = FireOnceGuard.release

    async def timed_out(self: FireOnceGuard, lease: Any, *args: Any) -> Any:
        raise FireOnceStoreUnavailable("Redis did not answer in time")

    async def counted(self: FireOnceGuard, lease: Any) -> Any:
        released.append(lease.lock_key)
        return await real_release(self, lease)

    monkeypatch.setattr(FireOnceGuard, "commit", timed_out)
    monkeypatch.setattr(FireOnceGuard, "release", counted)
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        result = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-untold", "crossJob", ["untold", 0]], id=queue, task_queue=queue)
    assert result["counterId"] == "untold"
    assert released == []
    assert await client.pttl(FireOnceKeys(prefix).lock("s-untold", "crossJob")) > 0


async def test_a_commit_refused_because_a_newer_holder_took_the_lock_is_logged_as_commit_refused(
    temporal_env: Any, client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fire-once report`` tells a result delivered but not stored (``commit-refused``) from one
    stored (``committed``): docs/operating.md."""
    real_commit = FireOnceGuard.commit

    async def overtaken(self: FireOnceGuard, lease: Any, *args: Any) -> Any:
        await client.delete(lease.lock_key)  # what `fire-once release --force` does
        assert isinstance(await self.acquire(lease.target), Acquired)  # and a newer holder takes the lock
        return await real_commit(self, lease, *args)

    monkeypatch.setattr(FireOnceGuard, "commit", overtaken)
    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        result = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-overtaken", "crossJob", ["overtaken", 0]], id=queue, task_queue=queue)
    assert result["counterId"] == "overtaken"  # delivered all the same
    assert await client.exists(FireOnceKeys(prefix).artifact("s-overtaken", "crossJob")) == 0
    entries: Any = await client.xrange(f"{prefix}:v3:default:log")
    decisions = [fields[b"decision"] for _, fields in entries]
    assert b"commit-refused" in decisions and b"committed" not in decisions


async def test_a_worker_refuses_to_start_on_a_prefix_of_another_protocol_version(temporal_env: Any, client: Redis, prefix: str) -> None:
    from temporal_fire_once import FireOnceProtocolMismatch

    await client.set(f"{prefix}:protocol", "2")
    worker, _ = await run_worker(temporal_env, client, prefix)
    with pytest.raises(FireOnceProtocolMismatch, match="protocol '2'"):
        await worker.run()


async def test_a_worker_refuses_to_start_on_a_redis_that_can_evict_unless_allow_evicting_redis(
    temporal_env: Any, client: Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    from temporal_fire_once import FireOnceConfigError

    from .conftest import redis_server

    with redis_server() as url:  # its own server: the session's keeps noeviction
        evicting: Redis = Redis.from_url(url)
        await evicting.config_set("maxmemory-policy", "allkeys-lru")
        worker, _ = await run_worker(temporal_env, client, prefix, evicting)
        refused = r"Redis at 127\.0\.0\.1:\d+ has maxmemory-policy allkeys-lru: under memory pressure Redis evicts live locks"
        with pytest.raises(FireOnceConfigError, match=rf"{refused}.*pass allow_evicting_redis=True to accept the risk"):
            await asyncio.wait_for(worker.run(), 10)  # a worker that starts runs until cancelled
        worker, queue = await run_worker(temporal_env, client, prefix, evicting, allow_evicting_redis=True)
        with caplog.at_level("WARNING", logger="temporal_fire_once"):
            async with worker:
                await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-evict", "crossJob", ["evict", 0]], id=queue, task_queue=queue)
        await evicting.aclose()
    assert await client.get(counter_key(prefix, "evict")) == b"1"
    assert "maxmemory-policy allkeys-lru" in caplog.text and "starting anyway because allow_evicting_redis is True" in caplog.text


async def test_a_commit_redis_refuses_for_memory_delivers_the_result_and_holds_the_lock_for_lock_ttl_ms(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """Left to its lease (1 s here, 30 s by default), the lock ran out with no artifact behind it,
    and the next run of the step dispatched the job again. It is held for ``lock_ttl_ms`` now, as
    when a result is too large to store."""
    from temporalio import activity

    from temporal_fire_once import fire_once

    from .conftest import redis_server

    with redis_server() as url:  # its own server: the test fills it
        guard_redis = Redis.from_url(url)
        await guard_redis.config_set("maxmemory-policy", "noeviction")

        @fire_once(lease_ms=1_000)
        @activity.defn(name="crossJob")
        async def fills_redis(counter_id: str, ms: int) -> str:
            await client.incr(counter_key(prefix, counter_id))  # counted on the session's Redis
            await guard_redis.config_set("maxmemory", 1)  # Redis is full by the time the job ends
            return "done"

        queue = f"py-{uuid.uuid4().hex[:8]}"
        plugin = FireOncePlugin(guard_redis, key_prefix=prefix, lock_ttl_ms=600_000)
        worker = Worker(temporal_env.client, task_queue=queue, workflows=[GuardedCall], activities=[fills_redis], plugins=[plugin])
        try:
            async with worker:
                result = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-oom", "crossJob", ["oom", 0]], id=f"{queue}-1", task_queue=queue)
            assert result == "done"
            keys = FireOnceKeys(prefix)
            assert await guard_redis.exists(keys.artifact("s-oom", "crossJob")) == 0
            assert await guard_redis.pttl(keys.lock("s-oom", "crossJob")) > 60_000
        finally:
            await guard_redis.config_set("maxmemory", 0)
            await guard_redis.aclose()
    assert await client.get(counter_key(prefix, "oom")) == b"1"


@pytest.mark.parametrize(("auth", "code"), [(":wrong@", "WRONGPASS"), ("", "NOAUTH")])
async def test_a_worker_given_credentials_redis_refuses_fails_to_start_naming_them_not_an_eviction_risk(
    temporal_env: Any, client: Redis, prefix: str, auth: str, code: str
) -> None:
    from temporal_fire_once import FireOnceStoreUnavailable

    from .conftest import redis_server

    with redis_server() as url:  # its own server, given a password
        admin: Redis = Redis.from_url(url)
        await admin.config_set("requirepass", "right-password")
        await admin.aclose()
        refused: Redis = Redis.from_url(url.replace("redis://", f"redis://{auth}"))
        for allow in (False, True):
            worker, _ = await run_worker(temporal_env, client, prefix, refused, allow_evicting_redis=allow)
            with pytest.raises(FireOnceStoreUnavailable) as caught:
                await asyncio.wait_for(worker.run(), 10)  # a worker that starts runs until cancelled
            assert str(caught.value).startswith(f"Redis refused this client's credentials ({code} ")
            assert "maxmemory-policy" not in str(caught.value) and "eviction" not in str(caught.value)
        await refused.aclose()


async def test_a_sync_activity_is_guarded_too(temporal_env: Any, client: Redis, prefix: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from temporalio import activity

    from temporal_fire_once import fire_once

    runs: list[str] = []

    @fire_once(job_type="sync")
    @activity.defn(name="syncJob")
    def sync_job(text: str) -> str:
        runs.append(text)  # a counter the guard does not own
        import time

        time.sleep(0.5)
        return text.upper()

    queue = f"py-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(8) as executor:
        collect_garbage()
        worker = Worker(
            temporal_env.client,
            task_queue=queue,
            workflows=[GuardedCall],
            activities=[sync_job],
            activity_executor=executor,
            plugins=[FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)],
        )
        async with worker:
            results = await asyncio.gather(
                *(
                    temporal_env.client.execute_workflow(GuardedCall.run, args=["s-sync", "syncJob", ["hi"]], id=f"{queue}-{i}", task_queue=queue)
                    for i in range(5)
                )
            )
    assert results == ["HI"] * 5 and runs == ["hi"]


async def test_waiters_with_a_one_minute_poll_all_get_the_one_result(temporal_env: Any, client: Redis, prefix: str) -> None:
    """End to end with wake-ups on. That the commit is what wakes them is shown in test_core
    (a waiter that only polled would also get the result here, at its attempt's deadline)."""
    queue = f"py-{uuid.uuid4().hex[:8]}"
    collect_garbage()
    worker = Worker(
        temporal_env.client,
        task_queue=queue,
        workflows=[GuardedCall],
        activities=make_activities(client, prefix),
        plugins=[FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=60_000)],
    )
    async with worker:
        results = await asyncio.gather(
            *(
                temporal_env.client.execute_workflow(GuardedCall.run, args=["s-wake", "crossJob", ["wake", 1_000]], id=f"{queue}-{i}", task_queue=queue)
                for i in range(4)
            )
        )
    assert all(r == results[0] for r in results)
    assert await client.get(counter_key(prefix, "wake")) == b"1"


def test_the_workflow_side_imports_no_redis_and_the_plugin_passes_it_through_the_sandbox() -> None:
    import subprocess
    import sys

    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    from temporal_fire_once.worker.plugin import _pass_through

    probe = "import sys, temporal_fire_once.workflow; print(sorted(m for m in sys.modules if m.split('.')[0] in ('redis', 'temporal_fire_once')))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "redis" not in loaded and "temporal_fire_once.worker" not in loaded and "temporal_fire_once.core" not in loaded
    runner = _pass_through(SandboxedWorkflowRunner())
    assert isinstance(runner, SandboxedWorkflowRunner) and "temporal_fire_once" in runner.restrictions.passthrough_modules


def sync_worker(env: Any, client: Redis, prefix: str, runs: list[str], executor: Any) -> tuple[Worker, str]:
    """A worker of one guarded sync (thread-pool) activity, ``syncWaitJob``, whose runs ``runs`` counts."""
    from temporalio import activity

    from temporal_fire_once import fire_once

    @fire_once()
    @activity.defn(name="syncWaitJob")
    def sync_wait_job(text: str) -> str:
        runs.append(text)  # a counter the guard does not own
        return text.upper()

    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        env.client,
        task_queue=queue,
        workflows=[GuardedCall, CancelledCall],
        activities=[sync_wait_job],
        activity_executor=executor,
        plugins=[FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=100)],
    )
    return worker, queue


async def test_a_sync_waiter_cancelled_in_its_slot_ends_cancelled_and_never_dispatches(temporal_env: Any, client: Redis, prefix: str) -> None:
    """The SDK does not cancel a sync activity's task, it only flags it: a waiter that did not look
    would dispatch once the holder failed, for a call nobody waits for."""
    from concurrent.futures import ThreadPoolExecutor

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    holder = await guard.acquire(DispatchTarget("s-sync-cancel", "syncWaitJob", "syncWaitJob", "default", None, "another holder", ""))
    assert isinstance(holder, Acquired)
    runs: list[str] = []
    with ThreadPoolExecutor(4) as executor:
        worker, queue = sync_worker(temporal_env, client, prefix, runs, executor)
        async with worker:
            run = asyncio.ensure_future(
                temporal_env.client.execute_workflow(CancelledCall.run, args=["s-sync-cancel", "syncWaitJob", ["x"]], id=queue, task_queue=queue)
            )
            # Cancelled at 1 s; it ends within a heartbeat or two. The waiter's deadline is 29 s away.
            await asyncio.wait([run], timeout=20)
            await guard.release(holder.lease)  # the holder fails: a waiter still in its slot would take it now
            outcome = await run
    assert outcome == "cancelled"
    assert runs == []


async def test_a_sync_waiter_lets_the_worker_shut_down_and_never_dispatches(temporal_env: Any, client: Redis, prefix: str) -> None:
    """At shutdown the SDK cancels running activities (after graceful_shutdown_timeout, 0 here). A
    sync waiter that missed it would hold shutdown up to its deadline, 59 s away."""
    from concurrent.futures import ThreadPoolExecutor

    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    holder = await guard.acquire(DispatchTarget("s-sync-stop", "syncWaitJob", "syncWaitJob", "default", None, "another holder", ""))
    assert isinstance(holder, Acquired)
    runs: list[str] = []
    with ThreadPoolExecutor(4) as executor:
        worker, queue = sync_worker(temporal_env, client, prefix, runs, executor)
        running = asyncio.ensure_future(worker.run())
        handle = await temporal_env.client.start_workflow(
            GuardedCall.run, args=["s-sync-stop", "syncWaitJob", ["x"], None, 1, [60_000]], id=queue, task_queue=queue
        )
        while not any(p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED for p in (await handle.describe()).raw_description.pending_activities):
            await asyncio.sleep(0.1)  # until the waiter is in its slot
        started = time.monotonic()
        await worker.shutdown()
        await running
        took = time.monotonic() - started
        await guard.release(holder.lease)
        await handle.terminate()
    assert took < 30, f"shutdown took {took:.1f} s"
    assert runs == []


async def test_a_plugin_shared_by_two_workers_keeps_waking_one_after_the_other_stops(temporal_env: Any, client: Redis, prefix: str) -> None:
    """The wake hub is the plugin's, shared by its workers: closing it when the first one stops
    would leave the other's waiters to their next poll (a minute here) or their deadline (29 s)."""
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=60_000)
    collect_garbage()
    queues = [f"py-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    stopping, staying = (
        Worker(temporal_env.client, task_queue=queue, workflows=[GuardedCall], activities=make_activities(client, prefix), plugins=[plugin])
        for queue in queues
    )
    channel = plugin.guard.keys_for("default").wake_channel("s-shared")
    stopped = asyncio.ensure_future(stopping.run())
    async with staying:
        runs = [
            asyncio.ensure_future(
                temporal_env.client.execute_workflow(GuardedCall.run, args=["s-shared", "crossJob", ["shared", 3_000]], id=f"{queues[1]}-{i}", task_queue=queues[1])
            )
            for i in range(2)
        ]
        while (await client.pubsub_numsub(channel))[0][1] == 0:
            await asyncio.sleep(0.05)  # until the waiter has subscribed
        await stopping.shutdown()
        await stopped
        _, pending = await asyncio.wait(runs, timeout=20)  # the job takes 3 s; the waiter's deadline is 29 s away
        assert not pending, "the waiter was not woken by the commit"
    assert runs[0].result() == runs[1].result()
    assert await client.get(counter_key(prefix, "shared")) == b"1"


async def test_a_replayer_with_the_plugin_carries_the_scope_and_needs_no_redis(temporal_env: Any, client: Redis, prefix: str) -> None:
    """Replaying a continued run needs the workflow interceptor, which gives it the inherited
    scope; it needs no Redis: nothing to check, claim or wake."""
    from temporalio.worker import Replayer

    from .conftest import free_port

    worker, queue = await run_worker(temporal_env, client, prefix)
    async with worker:
        await temporal_env.client.execute_workflow(ContinuedCall.run, args=["s-replay", "plainJob", ["replay"]], id=queue, task_queue=queue)
    history = await temporal_env.client.get_workflow_handle(queue).fetch_history()  # the latest run: the continued one
    unreachable = Redis(port=free_port(), socket_connect_timeout=1)
    failures: dict[str, object] = {}
    for name, redis in [("reachable", client), ("unreachable", unreachable)]:
        replayer = Replayer(workflows=[ContinuedCall], plugins=[FireOncePlugin(redis, key_prefix=prefix)])
        try:
            failures[name] = (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure
        except Exception as err:
            failures[name] = err
    await unreachable.aclose()
    assert failures == {"reachable": None, "unreachable": None}
