"""The args hash of one call is the same in every worker process. Python salts the hash of each
string with a seed of its process (``PYTHONHASHSEED``), so a ``set`` of strings iterates in
another order in each process, and the payload converter writes it as a JSON list in that order."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from redis.asyncio import Redis

from .py_worker import start_py_worker
from .pyactivities import counter_key
from .pyworkflows import GuardedCall

TAGS = ["alpha", "beta", "gamma", "delta"]  # seeds 1 and 2 iterate this set in other orders


async def _stopped(process: asyncio.subprocess.Process) -> None:
    process.terminate()
    await process.wait()


async def test_a_set_argument_hashes_alike_in_worker_processes_of_other_hash_seeds(
    temporal_env: Any, client: Redis, redis_url: str, prefix: str
) -> None:
    """Two runs of one scope with the same set of tags, each served by a worker process of its
    own seed: the second fast-forwards to the first one's result, where its hash of the other
    order failed it with ``FireOnceKeyConflict``."""
    queue = f"py-{uuid.uuid4().hex[:8]}"
    results = []
    for seed in ("1", "2"):
        process = await start_py_worker(temporal_env, redis_url, prefix, queue, seed)
        try:
            results.append(
                await temporal_env.client.execute_workflow(
                    GuardedCall.run, args=["s-tags", "tagsJob", ["tags", TAGS], None, 1], id=f"{queue}-{seed}", task_queue=queue
                )
            )
        finally:
            await _stopped(process)
    assert results == [sorted(TAGS)] * 2
    assert await client.get(counter_key(prefix, "tags")) == b"1"
