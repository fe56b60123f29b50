"""What the guard is given and what it answers (the types of ``src/core/target.ts`` and
``src/core/outcomes.ts``): the target of a dispatch, the lease on its lock, and what an acquire,
a commit or a release found."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DispatchTarget:
    """What one dispatch is guarded on."""

    scope: str
    step: str
    job_type: str
    namespace: str | None = None
    external_artifact_key: str | None = None
    holder: str = ""
    args_hash: str = ""
    #: The args hash releases up to 0.7 wrote for the same arguments, where it differs (an integer
    #: past 2**53 in them, PROTOCOL.md section 5): a lock, result or parked waiter stored with it
    #: is this call's, so that records stored before an upgrade still serve the call they were made for.
    former_args_hash: str = ""


@dataclass(frozen=True)
class Lease:
    """A held lock: what commit, release and extend need."""

    target: DispatchTarget
    lock_key: str
    artifact_key: str
    waiters_key: str
    token: str
    fencing_token: int


@dataclass(frozen=True)
class FastForward:
    """The artifact exists: ``artifact`` is its payload bytes (empty for an external artifact)."""

    artifact: bytes
    artifact_key: str
    ttl_ms: int | None = None
    kind: str = "fast-forward"


@dataclass(frozen=True)
class Acquired:
    lease: Lease
    kind: str = "acquired"


@dataclass(frozen=True)
class Held:
    """Another token holds the lock."""

    ttl_ms: int
    lock_key: str
    holder: str
    same_holder: bool
    fencing_token: int
    kind: str = "held"


AcquireOutcome = FastForward | Acquired | Held


@dataclass(frozen=True)
class Settled:
    """Whether the lock was still ours, and the entries of the waiters parked on it (PROTOCOL §4)."""

    ours: bool
    waiters: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class Committed(Settled):
    """What a commit found: ``stored`` is False when it was refused and changed nothing, because
    a holder whose lock expired or was taken writes only where no lock and no other result stand."""

    stored: bool = True
