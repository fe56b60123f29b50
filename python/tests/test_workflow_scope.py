"""The workflow side's dispatch scope: kept per run with public SDK calls only, on a real dev server
and a real Redis, where the sandbox re-imports the package (a worker wired by hand without the
plugin's pass-through) and where every workflow task replays the run from its start."""

from __future__ import annotations

import ast
import asyncio
import gc
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from temporal_fire_once import FireOnceInterceptor, FireOncePlugin, WorkerDefaults
from temporal_fire_once.core import FireOnceGuard, FireOnceKeys, GuardOptions

from .conftest import collect_garbage
from .pyactivities import counter_key, make_activities
from .pyworkflows import ContinuedCall, GuardedCall, InitScopeCall, ParentCall

WORKFLOWS = [GuardedCall, ParentCall, ContinuedCall, InitScopeCall]


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
