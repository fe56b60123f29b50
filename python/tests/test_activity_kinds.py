"""Guarded activities of the kinds the SDK runs besides a plain ``async def``, on a real dev server
and a real Redis: a dynamic activity (``@activity.defn(dynamic=True)``), a sync one in a
process pool, and a method of an activities class given to the worker bound to its instance. Each counts its dispatches with a counter the guard does not own."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.common import RawValue
from temporalio.converter import default
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import SharedStateManager, Worker

from temporal_fire_once import FireOnceKeys, FireOncePlugin, fire_once
from temporal_fire_once.core.records import parse_artifact
from temporal_fire_once.worker import args_hash

from .conftest import collect_garbage
from .pyworkflows import GuardedCall


async def test_a_dynamic_activity_is_guarded_and_hashes_its_arguments_as_a_typed_one_would(temporal_env: Any, client: Redis, prefix: str) -> None:
    """The SDK hands a dynamic activity its arguments as one sequence of ``RawValue``, which the
    payload converter cannot serialise as a whole: hashed as they came, every call failed with
    ``FireOnceConfigError``, and no dynamic activity could be guarded."""
    runs: list[str] = []

    @fire_once()
    @activity.defn(dynamic=True)
    async def any_job(args: Sequence[RawValue]) -> str:
        text = activity.payload_converter().from_payload(args[0].payload, str)
        runs.append(text)  # a counter the guard does not own
        await asyncio.sleep(0.3)
        return f"{activity.info().activity_type}: {text}"

    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    async with Worker(temporal_env.client, task_queue=queue, workflows=[GuardedCall], activities=[any_job], plugins=[plugin]):
        results = await asyncio.gather(
            *(
                temporal_env.client.execute_workflow(GuardedCall.run, args=["s-dyn", "summarise", ["hello"]], id=f"{queue}-{i}", task_queue=queue)
                for i in range(3)
            )
        )
        with pytest.raises(WorkflowFailureError) as caught:
            await temporal_env.client.execute_workflow(GuardedCall.run, args=["s-dyn", "summarise", ["other"]], id=f"{queue}-other", task_queue=queue)
    stored: Any = await client.get(FireOnceKeys(prefix).artifact("s-dyn", "summarise"))
    record = parse_artifact(stored or b"")
    assert results == ["summarise: hello"] * 3 and runs == ["hello"]
    assert record is not None and record.args_hash == args_hash(["hello"], default().payload_converter)
    cause = caught.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert (cause.cause.type, cause.cause.non_retryable) == ("FireOnceKeyConflict", True)


@fire_once()
@activity.defn(name="processJob")
def process_job(counter: str, text: str) -> str:
    """Runs in another process: it counts its runs by appending to the file ``counter``."""
    with open(counter, "a") as out:
        out.write(f"{text}\n")
    import time

    time.sleep(0.3)
    return text.upper()


async def test_a_sync_activity_in_a_process_pool_is_guarded(temporal_env: Any, client: Redis, prefix: str, tmp_path: Path) -> None:
    """The guard runs in the worker's process, around the SDK's hand-off to the pool: it needs
    nothing of the job's process (where ``fire_once_context()`` is not available)."""
    counter = str(tmp_path / "runs")
    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    with ProcessPoolExecutor(2) as executor, multiprocessing.Manager() as manager:
        worker = Worker(
            temporal_env.client,
            task_queue=queue,
            workflows=[GuardedCall],
            activities=[process_job],
            activity_executor=executor,
            shared_state_manager=SharedStateManager.create_from_multiprocessing(manager),
            plugins=[FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)],
        )
        async with worker:
            results = await asyncio.gather(
                *(
                    temporal_env.client.execute_workflow(
                        GuardedCall.run, args=["s-process", "processJob", [counter, "hi"]], id=f"{queue}-{i}", task_queue=queue
                    )
                    for i in range(3)
                )
            )
    assert results == ["HI"] * 3
    assert Path(counter).read_text().split() == ["hi"]


class Mailer:
    """Activities as methods, the SDK's way: decorated in the class, given to the worker bound to an
    instance, which holds what they share (here, the counter)."""

    def __init__(self, redis: Redis, counter: str) -> None:
        self.redis, self.counter = redis, counter

    @fire_once(step="send-mail")
    @activity.defn(name="sendMail")
    async def send(self, to: str) -> str:
        await self.redis.incr(self.counter)  # a counter the guard does not own
        await asyncio.sleep(0.3)
        return f"sent to {to}"


async def test_a_method_of_an_activities_class_is_guarded(temporal_env: Any, client: Redis, prefix: str) -> None:
    counter = f"{prefix}:runs"
    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    mailer = Mailer(client, counter)
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    async with Worker(temporal_env.client, task_queue=queue, workflows=[GuardedCall], activities=[mailer.send], plugins=[plugin]):
        results = await asyncio.gather(
            *(
                temporal_env.client.execute_workflow(GuardedCall.run, args=["s-method", "sendMail", ["ada"]], id=f"{queue}-{i}", task_queue=queue)
                for i in range(3)
            )
        )
    assert results == ["sent to ada"] * 3
    assert int(await client.get(counter) or 0) == 1
    assert await client.exists(FireOnceKeys(prefix).artifact("s-method", "send-mail"))
