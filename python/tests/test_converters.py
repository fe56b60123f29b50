"""A custom payload converter on the worker's client (``test/integration/converters.test.ts`` in
TypeScript): a guarded result of a type only that converter knows reaches the workflow as the same
value an unguarded activity would give, from the dispatch, from a run that waited, and from a
fast-forward, which hands the stored payload back without decoding it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from redis.asyncio import Redis
from temporalio import activity
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.worker import Worker

from temporal_fire_once import FireOncePlugin, fire_once

from .conftest import collect_garbage
from .money import Money, MoneyPayloadConverter
from .pyworkflows import PriceCall


async def test_a_result_only_a_custom_converter_knows_comes_back_as_itself_from_a_dispatch_a_wait_and_a_fast_forward(
    temporal_env: Any, client: Redis, prefix: str
) -> None:
    counter = f"{prefix}:test:price:dispatches"

    @fire_once()
    @activity.defn(name="priceJob")
    async def price_job(scope: str) -> Money:
        await client.incr(counter)
        await asyncio.sleep(0.3)
        return Money(1999, "EUR")

    collect_garbage()
    queue = f"py-{uuid.uuid4().hex[:8]}"
    money_client = Client(temporal_env.client.service_client, namespace="default", data_converter=DataConverter(payload_converter_class=MoneyPayloadConverter))
    plugin = FireOncePlugin(client, key_prefix=prefix, poll_interval_ms=50)
    async with Worker(money_client, task_queue=queue, workflows=[PriceCall], activities=[price_job], plugins=[plugin]):
        racing = await asyncio.gather(
            *(money_client.execute_workflow(PriceCall.run, "s-price", id=f"{queue}-{i}", task_queue=queue) for i in range(3))
        )  # one dispatches, the others wait for it
        later = await money_client.execute_workflow(PriceCall.run, "s-price", id=f"{queue}-later", task_queue=queue)  # fast-forwards
    assert [*racing, later] == [Money(1999, "EUR")] * 4
    assert await client.get(counter) == b"1"
