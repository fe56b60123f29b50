"""What one guarded call needs: the guard, the resolved options, the converter and codec, where
its decisions are logged, and the Temporal client that completes parked waiters."""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio.client import Client
from temporalio.converter import PayloadCodec, PayloadConverter

from ..core.guard import FireOnceGuard
from ..core.outcomes import DispatchTarget, Lease
from .log import DispatchLog
from .options import FireOnceOptions, WorkerDefaults


@dataclass
class CallSetup:
    guard: FireOnceGuard
    defaults: WorkerDefaults
    options: FireOnceOptions
    payload_converter: PayloadConverter
    payload_codec: PayloadCodec | None
    target: DispatchTarget
    log: DispatchLog | None = None
    client: Client | None = None  # completes the waiters a hold hands over (PROTOCOL.md section 7)
    lock_mode: str = field(init=False)
    lease_ms: int = field(init=False)

    def __post_init__(self) -> None:
        self.lock_mode = self.options.lock_mode or self.defaults.lock_mode
        self.lease_ms = self.options.lease_ms or self.defaults.lease_ms

    @property
    def lock_ttl_ms(self) -> int:
        """The lock's initial TTL: the lease, or the fixed TTL."""
        if self.lock_mode == "lease":
            return self.lease_ms
        return self.options.lock_ttl_ms or self.guard.options.lock_ttl_ms

    @property
    def ids(self) -> dict[str, str]:
        return {"scope": self.target.scope, "step": self.target.step, "jobType": self.target.job_type}

    def decision(self, decision: str, lease: Lease | None = None, fencing: int | None = None) -> None:
        if self.log is not None:
            namespace = self.target.namespace or self.guard.options.namespace
            self.log.decision(decision, namespace, self.ids, lease, fencing)
