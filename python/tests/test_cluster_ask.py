"""N invocations of one step, on two workers (each with its own ``RedisCluster`` client, guard and
``FireOnceInterceptor``, run in an ``ActivityEnvironment``: the activity path of a worker, no
server), fire and fast-forward while the slot of the step's keys moves between masters, as
``redis-cli --cluster reshard`` moves it (``test/cluster/ask.cluster-test.ts``). An invocation
failed retryably is run again, as Temporal retries an activity. The slot is held mid-migration
until some have failed closed so, having outlasted the replies redis-py follows for one command.
Three masters (the first with a replica) and a spare master with no slot, which no client knows
until a slot moves to it. The dispatches are counted on a key the guard does not own; no
assertion reads a clock."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import uuid
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any, AsyncIterator, Callable, Iterator

import pytest
import redis
from redis.asyncio import RedisCluster
from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from temporal_fire_once import FireOnceInterceptor, WorkerDefaults, fire_once
from temporal_fire_once.core import DispatchTarget, FastForward, FireOnceGuard, GuardOptions

from .conftest import until
from .redis_cluster import Address, SpawnedCluster, cluster_client, migrate_slot, spawn_cluster

N = 8


@pytest.fixture(scope="module")
def nodes() -> Iterator[SpawnedCluster]:
    with spawn_cluster(replicas_of_first=1, spare=True) as spawned:
        yield spawned


class _Call(ActivityInboundInterceptor):
    """The end of the chain: the activity function itself, as the worker calls it."""

    def __init__(self) -> None:  # nothing further down
        pass

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        return await input.fn(*input.args)


@dataclasses.dataclass
class _Step:
    """One test's step: its workers, the job they guard, and what the test counts."""

    clients: list[RedisCluster]
    prefix: str = dataclasses.field(default_factory=lambda: f"pya-{uuid.uuid4().hex[:8]}")
    gate: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    retries: int = 0

    def __post_init__(self) -> None:
        step = self

        @fire_once(scope=lambda args, info: str(args[0]), job_type="summary")
        @activity.defn(name="summarise")
        async def summarise(scope: str) -> str:
            await step.clients[0].incr(f"{step.prefix}:dispatches")  # a counter the guard does not own
            await step.gate.wait()  # the job runs until the test lets it end
            return f"result of {scope}"

        self.job = summarise
        self.guards = [FireOnceGuard(c, GuardOptions(key_prefix=self.prefix, lock_ttl_ms=600_000)) for c in self.clients]
        defaults = WorkerDefaults(on_in_flight="wait", poll_interval_ms=20, dispatch_log=False)
        self.interceptors = [FireOnceInterceptor(guard, defaults) for guard in self.guards]

    async def dispatches(self) -> int:
        return int(await self.clients[0].get(f"{self.prefix}:dispatches") or 0)

    async def invoke(self, scope: str, i: int) -> Any:
        """Invocation ``i`` on worker ``i % 2``, run again after each retryable failure; its result."""
        for attempt in itertools.count(1):
            env = ActivityEnvironment()
            env.info = dataclasses.replace(
                env.info,
                activity_type="summarise",
                workflow_id=f"wf-{i}",
                workflow_run_id=f"run-{i}",
                activity_id="1",
                attempt=attempt,
                start_to_close_timeout=timedelta(seconds=60),
            )
            inbound = self.interceptors[i % 2].intercept_activity(_Call())
            try:
                result = await env.run(inbound.execute_activity, ExecuteActivityInput(self.job, [scope], None, {}))
                return env.payload_converter.from_payload(result.payload) if isinstance(result, RawValue) else result
            except ApplicationError as err:
                if err.non_retryable:
                    raise
                self.retries += 1
                await asyncio.sleep(0.05)
        raise AssertionError("unreachable")


@pytest.fixture
async def step(nodes: SpawnedCluster) -> AsyncIterator[_Step]:
    async with AsyncExitStack() as stack:
        yield _Step([await stack.enter_async_context(cluster_client(nodes)) for _ in range(2)])


def _scope_on(step: _Step, master: Address) -> tuple[str, int]:
    """A scope whose keys the ``master`` serves in the client's slot map, and its slot."""
    for _ in range(10_000):
        scope = f"s-{uuid.uuid4().hex[:12]}"
        lock = step.guards[0].keys.lock(scope, "summarise")
        node = step.clients[0].get_node_from_key(lock)
        if node is not None and (node.host, node.port) == master:
            return scope, step.clients[0].keyslot(lock)
    raise AssertionError(f"no scope hashes to {master}")


def _holds(address: Address, slot: int, key: str) -> bool:
    with redis.Redis(*address) as node:
        keys = node.execute_command("CLUSTER GETKEYSINSLOT", slot, 100)  # str or bytes, by the redis-py version
        return key in [k if isinstance(k, str) else k.decode() for k in keys]


async def _holder_and_waiters(step: _Step, master: Address) -> tuple[str, int, list[asyncio.Future[Any]]]:
    """A scope of ``master``, the holder's job running on its lock, and the other invocations waiting for it."""
    scope, slot = _scope_on(step, master)
    holder = asyncio.ensure_future(step.invoke(scope, 0))
    await until(lambda: step.dispatches(), "the holder's job to run")
    return scope, slot, [holder, *(asyncio.ensure_future(step.invoke(scope, i)) for i in range(1, N))]


async def _migrate(slot: int, source: Address, target: Address, nodes: SpawnedCluster, keys: list[str] | None = None) -> None:
    masters = nodes.masters + ([nodes.spare] if nodes.spare else [])
    await asyncio.to_thread(migrate_slot, slot, source, target, masters, None if keys is None else [k.encode() for k in keys])


async def _give_back(slot: int, first: Address, spare: Address, nodes: SpawnedCluster) -> None:
    """Move ``slot`` from the spare back to the first master, ending its migration first if a
    failure left it open: the spare keeps no slot, so no client knows it."""
    try:
        await _migrate(slot, first, spare, nodes)
    except redis.exceptions.ResponseError:
        pass  # the spare owns it already
    await _migrate(slot, spare, first, nodes)


async def _check_after_migration(step: _Step, scope: str, slot: int, old: Address, new: Address, results: list[Any]) -> None:
    """One dispatch, every result the job's, no lock on either master, the artifact on the new one."""
    keys = step.guards[0].keys
    lock, artifact = keys.lock(scope, "summarise"), keys.artifact(scope, "summary")
    assert (await step.dispatches(), results) == (1, [f"result of {scope}"] * len(results))
    assert (_holds(old, slot, lock), _holds(new, slot, lock)) == (False, False)
    assert _holds(new, slot, artifact)
    later = await FireOnceGuard(step.clients[1], GuardOptions(key_prefix=step.prefix)).acquire(DispatchTarget(scope, "summarise", "summary"))
    assert isinstance(later, FastForward)


async def test_the_lock_on_the_old_master_its_commit_sent_while_the_slot_migrates_lands_once_it_has_moved(step: _Step, nodes: SpawnedCluster) -> None:
    first, second = nodes.masters[0], nodes.masters[1]
    scope, slot, calls = await _holder_and_waiters(step, first)
    await _migrate(slot, first, second, nodes, [])  # open, nothing moved: the lock and the waiters' polls stay on the first master
    step.gate.set()  # the job returns; its commit is answered TRYAGAIN (the lock is here, the artifact key not)
    await until(lambda: step.retries >= 2, "invocations to fail closed and be retried")
    await _migrate(slot, first, second, nodes)
    await _check_after_migration(step, scope, slot, first, second, list(await asyncio.gather(*calls)))


async def test_the_lock_moved_to_a_master_no_client_knows_yet_the_commit_is_written_once_the_slot_has_moved(
    step: _Step, nodes: SpawnedCluster
) -> None:
    first, spare = nodes.masters[0], nodes.spare
    assert spare is not None
    scope, slot, calls = await _holder_and_waiters(step, first)
    assert all(client.get_node(*spare) is None for client in step.clients)
    await _migrate(slot, first, spare, nodes, [step.guards[0].keys.lock(scope, "summarise")])  # the first answers ASK, naming the spare
    step.gate.set()  # the commit: redis-py cannot follow that ASK; sent again until the slot is the spare's
    try:
        await until(lambda: step.retries >= 2, "invocations to fail closed and be retried")
        await _migrate(slot, first, spare, nodes)
        await _check_after_migration(step, scope, slot, first, spare, list(await asyncio.gather(*calls)))
    finally:
        await _give_back(slot, first, spare, nodes)


async def test_the_artifact_already_moved_mid_migration_every_invocation_fast_forwards_to_it(step: _Step, nodes: SpawnedCluster) -> None:
    first, second = nodes.masters[0], nodes.masters[1]
    step.gate.set()
    scope, slot = _scope_on(step, first)
    done = await step.invoke(scope, 0)  # dispatched before the migration, by worker 0
    await _migrate(slot, first, second, nodes, [step.guards[0].keys.artifact(scope, "summary")])
    # Worker 0 saw the artifact and reads it with a GET, which follows the ASK; worker 1's acquire
    # script is answered ASK, then TRYAGAIN on the second master (no lock key there), until the slot has moved.
    calls = [asyncio.ensure_future(step.invoke(scope, i)) for i in range(1, N)]
    await until(lambda: step.retries >= 2, "invocations to fail closed and be retried")
    await _migrate(slot, first, second, nodes)
    await _check_after_migration(step, scope, slot, first, second, [done, *await asyncio.gather(*calls)])
