"""The two workflows of a Nexus call and the service between them (``test/temporal-features/
fixtures/nexus-*.ts``): a caller that sets the scope and calls the operation, and the workflow
that the operation's handler starts, which schedules the guarded job. Sandbox-safe."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import nexusrpc
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from temporal_fire_once.workflow import get_dispatch_scope, set_dispatch_scope

from .pyworkflows import _run


@dataclass
class NexusJobInput:
    """What the caller hands the operation: the scope travels as input, and the handler workflow
    sets it if ``set_scope``."""

    scope: str
    counter_id: str
    ms: int
    set_scope: bool


@nexusrpc.service
class JobService:
    run_job: nexusrpc.Operation[NexusJobInput, dict[str, Any]]


@workflow.defn
class NexusCaller:
    """Sets the scope and runs the job through the Nexus ``endpoint``."""

    @workflow.run
    async def run(self, endpoint: str, input: NexusJobInput) -> dict[str, Any]:
        set_dispatch_scope(input.scope)
        client = workflow.create_nexus_client(service=JobService, endpoint=endpoint)
        return await client.execute_operation(JobService.run_job, input, schedule_to_close_timeout=timedelta(seconds=30))


@workflow.defn
class NexusHandlerRun:
    """Started by the operation's handler: fails (``InheritedScope``) if it inherited a scope, sets
    the input's scope if told to, and runs the job."""

    @workflow.run
    async def run(self, input: NexusJobInput) -> dict[str, Any]:
        inherited = get_dispatch_scope()
        if inherited is not None:
            raise ApplicationError(f"the handler workflow inherited the scope {inherited}", type="InheritedScope", non_retryable=True)
        if input.set_scope:
            set_dispatch_scope(input.scope)
        result: dict[str, Any] = await _run("crossJob", [input.counter_id, input.ms], attempts=1)
        return result
