"""The workflow side's dispatch scope: kept per run with public SDK calls only, on a real dev server
and a real Redis, where the sandbox re-imports the package (a worker wired by hand without the
plugin's pass-through) and where every workflow task replays the run from its start."""

from __future__ import annotations

import ast
import asyncio
import gc
import json
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio import client as temporal_client
from temporalio import worker as temporal_worker
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from temporal_fire_once import SCOPE_HEADER, FireOnceInterceptor, FireOncePlugin, WorkerDefaults
from temporal_fire_once.core import FireOnceGuard, FireOnceKeys, GuardOptions
from temporal_fire_once.workflow import get_dispatch_scope, set_dispatch_scope

from .conftest import REPO, collect_garbage
from .pyactivities import counter_key, make_activities
from .pyworkflows import ContinuedCall, GuardedCall, InheritedScope, InitScopeCall, ParentCall, ReadOnlyScope, SignalledCall, SignallingParent

WORKFLOWS = [GuardedCall, ParentCall, ContinuedCall, InitScopeCall, InheritedScope, SignalledCall, SignallingParent, ReadOnlyScope]


def _private_sdk_names(source: str) -> list[str]:
    """Every private name of the Temporal SDK that ``source`` imports or reads (``workflow._X``,
    ``from temporalio.x import _y``, ``getattr(workflow, "_z")``): the SDK may change those in any
    release."""
    tree = ast.parse(source)
    sdk: set[str] = set()  # local names bound to the SDK's modules and objects
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "temporalio":
                    found += [alias.name] if any(part.startswith("_") for part in alias.name.split(".")) else []
                    sdk.add(alias.asname or "temporalio")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "temporalio":
            found += [node.module] if any(part.startswith("_") for part in node.module.split(".")) else []
            for alias in node.names:
                found += [f"{node.module}.{alias.name}"] if alias.name.startswith("_") else []
                sdk.add(alias.asname or alias.name)

    def on_sdk(node: ast.expr) -> bool:
        while isinstance(node, (ast.Attribute, ast.Call)):
            node = node.value if isinstance(node, ast.Attribute) else node.func
        return isinstance(node, ast.Name) and node.id in sdk

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") and on_sdk(node.value):
            found.append(ast.unparse(node))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr"):
            if len(node.args) >= 2 and on_sdk(node.args[0]) and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_"):
                found.append(ast.unparse(node))
    return found


def test_the_workflow_side_uses_no_private_name_of_the_sdk() -> None:
    """It runs inside every workflow run: a private SDK object it relied on (the scope was once an
    attribute set on ``workflow._Runtime.current()``) could change in any temporalio release."""
    probe = "import sys, temporal_fire_once.workflow; print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.split('.')[0] == 'temporal_fire_once'))"
    files = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert any(file.endswith("scope.py") for file in files)
    found = {Path(file).name: names for file in files if (names := _private_sdk_names(Path(file).read_text()))}
    assert found == {}


def _worker(env: Any, client: Redis, prefix: str, **options: Any) -> tuple[Worker, str]:
    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    options.setdefault("plugins", [FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)])
    return Worker(env.client, task_queue=queue, workflows=WORKFLOWS, activities=make_activities(client, prefix), **options), queue


async def _carry_the_scope_every_way(env: Any, client: Redis, prefix: str, queue: str, counter: str) -> list[WorkflowHandle[Any, Any]]:
    """Runs ``s-<counter>`` set in ``run``, inherited by a child, carried over a continue-as-new, and
    set in a ``@workflow.init`` ``__init__`` over an inherited one; all fast-forward to one dispatch."""
    scope = "s-" + counter
    args: list[Any] = [scope, "crossJob", [counter, 0]]
    starts: list[tuple[Any, list[Any]]] = [
        (GuardedCall.run, args),
        (ParentCall.run, args),
        (ContinuedCall.run, args),
        (InitScopeCall.run, [*args, "s-parent"]),
    ]
    handles = [await env.client.start_workflow(run, args=a, id=f"{queue}-{counter}-{i}", task_queue=queue) for i, (run, a) in enumerate(starts)]
    results = [await handle.result() for handle in handles]
    first = results[0]
    assert results[1:3] == [first, first] and results[3]["result"] == first and results[3]["scope"] == scope
    assert await client.get(counter_key(prefix, counter)) == b"1"
    assert await client.exists(FireOnceKeys(prefix).artifact(scope, "crossJob")) == 1
    assert [key async for key in client.scan_iter(match=f"{prefix}:*s-parent*")] == []
    return handles


async def test_a_worker_wired_by_hand_whose_sandbox_reimports_the_package_carries_the_scope(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """Without the plugin's pass-through the sandbox imports ``temporal_fire_once.workflow`` afresh
    in every run, while the worker's interceptor is the host's: both must see one scope per run."""
    runner = SandboxedWorkflowRunner()
    assert "temporal_fire_once" not in runner.restrictions.passthrough_modules
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    worker, queue = _worker(
        temporal_env, client, prefix, plugins=[], workflow_runner=runner, interceptors=[FireOnceInterceptor(guard, WorkerDefaults(poll_interval_ms=50))]
    )
    async with worker:
        await _carry_the_scope_every_way(temporal_env, client, prefix, queue, "by-hand")


async def test_with_every_task_replayed_concurrent_runs_each_keep_their_own_scope(temporal_env: Any, client: Redis, prefix: str) -> None:
    """``max_cached_workflows=0``: each workflow task replays the run from its start in a new
    instance, on any of the worker's threads, while other runs do the same. A scope that leaked
    between runs would dispatch one scope's job under another's, and one of them not at all."""
    worker, queue = _worker(temporal_env, client, prefix, max_cached_workflows=0)
    async with worker:
        runs = [
            temporal_env.client.execute_workflow(GuardedCall.run, args=[f"s-mix-{i}", "crossJob", [f"mix-{i}", 0]], id=f"{queue}-mix-{i}", task_queue=queue)
            for i in range(8)
        ]
        await asyncio.gather(_carry_the_scope_every_way(temporal_env, client, prefix, queue, "replayed"), *runs)
    for i in range(8):
        assert await client.get(counter_key(prefix, f"mix-{i}")) == b"1"
        assert await client.exists(FireOnceKeys(prefix).artifact(f"s-mix-{i}", "crossJob")) == 1


async def test_a_runs_scope_is_dropped_with_the_run(temporal_env: Any, client: Redis, prefix: str) -> None:
    """The scopes are kept per run ID in one table per process, beside the SDK's workflow cache: an
    entry must go when the SDK drops the run (here after every task), or a worker leaks one per run."""
    from temporal_fire_once.workflow import _runs

    worker, queue = _worker(temporal_env, client, prefix, max_cached_workflows=0)
    async with worker:
        handles = await _carry_the_scope_every_way(temporal_env, client, prefix, queue, "dropped")
        ids = [handle.id for handle in handles] + [f"{handles[1].id}-child", f"{handles[3].id}-child"]
        run_ids = {(await temporal_env.client.get_workflow_handle(id).describe()).run_id for id in ids}
        run_ids |= {handle.result_run_id for handle in handles}  # the first run of the continued one
    gc.collect()
    assert len(run_ids) == 7 and run_ids.isdisjoint(_runs.open_run_ids())


async def test_without_the_interceptor_the_scope_is_dropped_with_a_warning_and_the_run_goes_on(
    temporal_env: Any, client: Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No interceptor opened the run's scope: ``set_dispatch_scope()`` must not fail the workflow
    task (a ``Replayer`` without the plugin replays such runs), but says the scope goes nowhere."""
    worker, queue = _worker(temporal_env, client, prefix, plugins=[])
    with caplog.at_level("WARNING", logger="temporalio.workflow"):
        async with worker:
            result = await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-none", "plainJob", ["none"]], id=queue, task_queue=queue)
    assert result == 1
    assert "set_dispatch_scope() on a worker without FireOnceWorkflowInterceptor" in caplog.text


async def test_set_dispatch_scope_with_a_scope_the_guard_refuses_fails_the_workflow_before_anything_is_scheduled(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """As python/README.md says: a whitespace-only scope fails the workflow at
    ``set_dispatch_scope()`` with the non-retryable ``FireOnceInvalidId`` (no workflow task
    failure), and the activity it would have called (unguarded here) never runs."""
    worker, queue = _worker(temporal_env, client, prefix)
    async with worker:
        handle = await temporal_env.client.start_workflow(GuardedCall.run, args=["   ", "plainJob", ["refused"]], id=queue, task_queue=queue)
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        assert await _task_failures(handle) == []
    assert _failure(failed.value) == ("FireOnceInvalidId", True, 'scope must not be empty or whitespace only (got "   ")')
    assert await client.get(counter_key(prefix, "refused")) is None



async def test_a_signal_in_a_childs_first_workflow_task_runs_under_the_inherited_scope(temporal_env: Any, client: Redis, prefix: str) -> None:
    """The SDK runs the handlers of a run's first workflow task before ``execute_workflow``: a
    child signalled by its parent before its worker took its first task must see the scope it
    inherits there already, and its handler's activity carry it (as in TypeScript, where handlers
    are set up in the workflow function, after the inherited scope)."""
    parent_worker, queue = _worker(temporal_env, client, prefix)
    child_worker, child_queue = _worker(temporal_env, client, prefix)
    async with parent_worker:  # the child's worker is not running yet: the signal waits with its start
        child_id = await temporal_env.client.execute_workflow(
            SignallingParent.run, args=["s-signalled", child_queue, "crossJob", ["signalled", 0]], id=queue, task_queue=queue
        )
    async with child_worker:
        child = temporal_env.client.get_workflow_handle(child_id)
        seen = await child.result()
    events = [e for e in (await child.fetch_history()).events]
    first_task = next(i for i, e in enumerate(events) if e.HasField("workflow_task_started_event_attributes"))
    assert next(i for i, e in enumerate(events) if e.HasField("workflow_execution_signaled_event_attributes")) < first_task
    assert [{"scope": s["scope"], "failure": s.get("failure")} for s in seen] == [{"scope": "s-signalled", "failure": None}]
    assert await client.get(counter_key(prefix, "signalled")) == b"1"
    assert await client.exists(FireOnceKeys(prefix).artifact("s-signalled", "crossJob")) == 1

async def test_a_query_handler_or_an_update_validator_that_sets_the_scope_fails_and_the_run_keeps_its_own(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """Neither a query nor a validator leaves a trace in the history, so a scope set there would hold
    on this worker and be gone after a replay: refused with ``FireOnceConfigError``, as in TypeScript
    (test/temporal-features/read-only.test.ts)."""
    worker, queue = _worker(temporal_env, client, prefix)
    async with worker:
        handle = await temporal_env.client.start_workflow(ReadOnlyScope.run, args=["s-kept", "crossJob", ["kept", 0]], id=queue, task_queue=queue)
        with pytest.raises(WorkflowQueryFailedError, match=r"set_dispatch_scope\(\) cannot be called in a query handler, an update validator or another read-only context"):
            await handle.query(ReadOnlyScope.rescope, "s-other")
        with pytest.raises(WorkflowUpdateFailedError) as rejected:
            await handle.execute_update(ReadOnlyScope.rescope_update, "s-other")
        assert isinstance(rejected.value.cause, ApplicationError) and rejected.value.cause.type == "FireOnceConfigError"
        assert rejected.value.cause.message.startswith("set_dispatch_scope() cannot be called in a query handler, an update validator or another read-only context")
        await handle.signal(ReadOnlyScope.finish)
        assert await handle.result() == "s-kept"
    assert await client.exists(FireOnceKeys(prefix).artifact("s-kept", "crossJob")) == 1
    assert await client.exists(FireOnceKeys(prefix).artifact("s-other", "crossJob")) == 0


# The rows of test/conformance/scope-headers.json, which test/temporal-features/scope-header.test.ts
# runs on the TypeScript side: values of the scope header as another party wrote it.
SCOPE_HEADER_ROWS: list[dict[str, Any]] = json.loads((REPO / "test/conformance/scope-headers.json").read_text())["rows"]


def _header_payload(row: dict[str, Any]) -> Payload:
    data = bytes.fromhex(row["dataHex"]) if "dataHex" in row else row["data"].encode("utf-8")
    return Payload(metadata={} if row["encoding"] is None else {"encoding": row["encoding"].encode()}, data=data)


def _expected(row: dict[str, Any], read: Any, missing: Any) -> Any:
    if "invalid" in row:
        return ("FireOnceInvalidId", True, row["invalid"])
    return missing if row["scope"] is None else read


class _ForgeStartHeader(temporal_client.Interceptor):
    """A client that starts workflows with the scope header of one row."""

    def __init__(self, payload: Payload) -> None:
        self._payload = payload

    def intercept_client(self, next: temporal_client.OutboundInterceptor) -> temporal_client.OutboundInterceptor:
        payload = self._payload

        class _Outbound(temporal_client.OutboundInterceptor):
            async def start_workflow(self, input: temporal_client.StartWorkflowInput) -> Any:
                input.headers = {**input.headers, SCOPE_HEADER: payload}
                return await super().start_workflow(input)

        return _Outbound(next)


class _ForgeActivityHeader(temporal_worker.Interceptor):
    """Another workflow interceptor that sets the scope header itself: each activity gets the
    header of the row its first argument (``hdr-<row index>``) names."""

    def workflow_interceptor_class(self, input: temporal_worker.WorkflowInterceptorClassInput) -> type[temporal_worker.WorkflowInboundInterceptor]:
        class _Outbound(temporal_worker.WorkflowOutboundInterceptor):
            def start_activity(self, input: temporal_worker.StartActivityInput) -> Any:
                row = SCOPE_HEADER_ROWS[int(str(input.args[0]).removeprefix("hdr-"))]
                input.headers = {**input.headers, SCOPE_HEADER: _header_payload(row)}
                return super().start_activity(input)

        class _Inbound(temporal_worker.WorkflowInboundInterceptor):
            def init(self, outbound: temporal_worker.WorkflowOutboundInterceptor) -> None:
                super().init(_Outbound(outbound))

        return _Inbound


async def _task_failures(handle: WorkflowHandle[Any, Any]) -> list[str]:
    history = await handle.fetch_history()
    return [e.workflow_task_failed_event_attributes.failure.message for e in history.events if e.HasField("workflow_task_failed_event_attributes")]


def _failure(err: WorkflowFailureError) -> tuple[str | None, bool, str]:
    cause = err.cause.cause if isinstance(err.cause, ActivityError) else err.cause
    assert isinstance(cause, ApplicationError), repr(cause)
    return (cause.type, cause.non_retryable, cause.message)


@pytest.mark.parametrize("row", SCOPE_HEADER_ROWS, ids=[row["name"] for row in SCOPE_HEADER_ROWS])
async def test_a_scope_header_from_a_clients_start_is_read_as_the_shared_rows_say(temporal_env: Any, client: Redis, prefix: str, row: dict[str, Any]) -> None:
    """A header that is no json/plain string is ignored; a string that is no valid scope fails the
    workflow with the non-retryable FireOnceInvalidId: never a workflow task failure."""
    worker, queue = _worker(temporal_env, client, prefix)
    forging = Client(**{**temporal_env.client.config(), "interceptors": [_ForgeStartHeader(_header_payload(row))]})
    async with worker:
        # Bounded: a workflow task failing on every attempt ends as a timeout, not a hung test.
        handle = await forging.start_workflow(InheritedScope.run, id=queue, task_queue=queue, execution_timeout=timedelta(seconds=30))
        try:
            seen: Any = await handle.result()
        except WorkflowFailureError as err:
            seen = _failure(err)
        assert await _task_failures(handle) == []
    assert seen == _expected(row, row.get("scope"), None)


async def test_a_scope_header_another_interceptor_set_on_an_activity_is_read_as_the_shared_rows_say(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    """The activity side of the same rows: it dispatches only under a valid scope; a header that
    carries none is a missing scope, a string that is no valid scope a FireOnceInvalidId."""
    worker, queue = _worker(temporal_env, client, prefix, interceptors=[_ForgeActivityHeader()])
    seen: list[Any] = []
    async with worker:
        for i, row in enumerate(SCOPE_HEADER_ROWS):
            handle = await temporal_env.client.start_workflow(
                GuardedCall.run, args=["", "crossJob", [f"hdr-{i}", 0], None, 1], id=f"{queue}-{i}", task_queue=queue, execution_timeout=timedelta(seconds=30)
            )
            try:
                await handle.result()
                seen.append("dispatched")
            except WorkflowFailureError as err:
                seen.append(_failure(err))
            assert await _task_failures(handle) == []
    missing = ("FireOnceMissingScope", True, "...")
    expected = [_expected(row, "dispatched", missing) for row in SCOPE_HEADER_ROWS]
    seen = [("FireOnceMissingScope", True, "...") if isinstance(s, tuple) and s[0] == "FireOnceMissingScope" else s for s in seen]
    assert seen == expected
    counts = [await client.get(counter_key(prefix, f"hdr-{i}")) for i in range(len(SCOPE_HEADER_ROWS))]
    assert counts == [b"1" if row.get("scope") else None for row in SCOPE_HEADER_ROWS]


async def test_a_run_with_a_scope_of_its_own_leaves_the_header_another_interceptor_set_alone(temporal_env: Any, client: Redis, prefix: str) -> None:
    """The guard's interceptor adds its scope to an activity only where no header is set: the other
    interceptor's header (row 0, scope ``session-1``) wins over the run's own ``s-own``. Wired by
    hand, with the other one listed after it, whose outbound calls therefore come first (the
    plugin always lists its own last, so that another interceptor's header wins there anyway)."""
    row = SCOPE_HEADER_ROWS[0]
    guard = FireOnceGuard(client, GuardOptions(key_prefix=prefix))
    hand_wired = [FireOnceInterceptor(guard, WorkerDefaults(poll_interval_ms=50)), _ForgeActivityHeader()]
    worker, queue = _worker(temporal_env, client, prefix, plugins=[], interceptors=hand_wired)
    async with worker:
        await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-own", "crossJob", ["hdr-0", 0], None, 1], id=queue, task_queue=queue)
    keys = FireOnceKeys(prefix)
    assert await client.exists(keys.artifact(row["scope"], "crossJob")) == 1
    assert await client.exists(keys.artifact("s-own", "crossJob")) == 0


@pytest.mark.parametrize("scope", ["session-1", ""])
def test_set_dispatch_scope_outside_a_workflow_raises_a_non_retryable_config_error_as_in_typescript(scope: str) -> None:
    with pytest.raises(ApplicationError) as caught:
        set_dispatch_scope(scope)
    assert (caught.value.type, caught.value.non_retryable) == ("FireOnceConfigError", True)
    assert caught.value.message.startswith("set_dispatch_scope() must be called in a workflow")


def test_get_dispatch_scope_outside_a_workflow_raises_the_same_config_error_not_the_sdks_own() -> None:
    with pytest.raises(ApplicationError) as caught:
        get_dispatch_scope()
    assert (caught.value.type, caught.value.non_retryable) == ("FireOnceConfigError", True)
    assert caught.value.message.startswith("get_dispatch_scope() must be called in a workflow")
