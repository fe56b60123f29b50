"""OpenTelemetry's ``TracingInterceptor`` beside the guard (``opentelemetry.test.ts`` in
TypeScript). Both put a header on each activity the workflow schedules, the trace context and the
dispatch scope: neither may lose the other's. In both orders: the plugin's (it appends its
interceptors after the worker's own, so tracing sees every attempt), and the guard's
``FireOnceInterceptor`` listed first, wired by hand (tracing sees only the attempt that runs the
job)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis.asyncio import Redis
from temporalio.client import WorkflowHandle
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin

from .conftest import collect_garbage
from .pyactivities import counter_key, make_activities
from .pyworkflows import GuardedCall
from .test_hand_wired import wire_by_hand


@pytest.mark.parametrize("order", ["the plugin after tracing", "the guard before tracing, by hand"])
async def test_four_runs_at_once_and_a_later_one_share_one_dispatch_and_each_attempts_span_is_the_child_of_its_runs(
    temporal_env: Any, client: Redis, prefix: str, order: str
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # Workflow spans without a client span above them: the runs are started by a plain client.
    tracing = TracingInterceptor(provider.get_tracer(__name__), always_create_workflow_spans=True)
    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    activities = make_activities(client, prefix)
    if order == "the plugin after tracing":
        plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
        worker: Any = Worker(temporal_env.client, task_queue=queue, workflows=[GuardedCall], activities=activities, interceptors=[tracing], plugins=[plugin])
    else:
        worker = wire_by_hand(temporal_env.client, client, prefix, queue, activities, after=[tracing])

    async def start() -> WorkflowHandle[Any, Any]:
        handle: WorkflowHandle[Any, Any] = await temporal_env.client.start_workflow(
            GuardedCall.run, args=["s-otel", "crossJob", ["otel", 500]], id=f"{queue}-{uuid.uuid4().hex[:6]}", task_queue=queue
        )
        return handle

    async with worker:
        handles = list(await asyncio.gather(*(start() for _ in range(4))))
        results = list(await asyncio.gather(*(h.result() for h in handles)))
        handles.append(await start())
        results.append(await handles[-1].result())
    assert all(r == results[0] for r in results) and results[0]["counterId"] == "otel"
    assert await client.get(counter_key(prefix, "otel")) == b"1"  # the scope reached every attempt

    spans = exporter.get_finished_spans()
    starts = {(s.context.trace_id, s.context.span_id) for s in spans if s.name == "StartActivity:crossJob"}
    runs = [s for s in spans if s.name == "RunActivity:crossJob"]
    # Tracing outside the guard sees every attempt; inside it, only the one the guard lets through
    # to the job (the others fast-forward or wait before it): 5 RunActivity spans, or 1, as in
    # TypeScript. Each runs under the trace its run's StartActivity span began: the header crossed.
    assert len(runs) == (5 if order == "the plugin after tracing" else 1)
    assert all(r.parent is not None and (r.context.trace_id, r.parent.span_id) in starts for r in runs)
    assert len({r.parent.span_id for r in runs if r.parent is not None}) == len(runs)  # one per run
