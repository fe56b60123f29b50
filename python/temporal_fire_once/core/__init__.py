"""The core guard: keys, records, the Lua scripts and the guard on Redis alone, with no Temporal."""

from .errors import (
    FireOnceArtifactTooLarge,
    FireOnceConfigError,
    FireOnceCorruptArtifact,
    FireOnceError,
    FireOnceInFlight,
    FireOnceInvalidId,
    FireOnceKeyConflict,
    FireOnceLockLost,
    FireOnceMissingScope,
    FireOnceProtocolError,
    FireOnceProtocolMismatch,
    FireOnceStoreUnavailable,
    FireOnceUnstorableResult,
    FireOnceWorkerShutdown,
)
from .eviction import SAFE_EVICTION_POLICY, EvictionPolicy, check_eviction_policy, read_eviction_policies
from .guard import FireOnceGuard
from .keys import DEFAULT_NAMESPACE, PROTOCOL_VERSION, FireOnceKeys, ParsedKey, decode_id, encode_id
from .options import GuardOptions
from .outcomes import Acquired, AcquireOutcome, Committed, DispatchTarget, FastForward, Held, Lease, Settled
from .protocol import claim_protocol
from .records import ArtifactRecord, LockRecord, format_artifact, parse_artifact, parse_lock
from .scripts import PROTOCOL_SCRIPTS, LuaScript, scripts_dir
from .store_calls import holder_id
from .wake import WakeHub
from .worker_check import check_worker_redis

__all__ = [
    "DEFAULT_NAMESPACE",
    "PROTOCOL_SCRIPTS",
    "PROTOCOL_VERSION",
    "SAFE_EVICTION_POLICY",
    "Acquired",
    "AcquireOutcome",
    "ArtifactRecord",
    "Committed",
    "DispatchTarget",
    "EvictionPolicy",
    "FastForward",
    "FireOnceArtifactTooLarge",
    "FireOnceConfigError",
    "FireOnceCorruptArtifact",
    "FireOnceError",
    "FireOnceGuard",
    "FireOnceInFlight",
    "FireOnceInvalidId",
    "FireOnceKeyConflict",
    "FireOnceKeys",
    "FireOnceLockLost",
    "FireOnceMissingScope",
    "FireOnceProtocolError",
    "FireOnceProtocolMismatch",
    "FireOnceStoreUnavailable",
    "FireOnceUnstorableResult",
    "FireOnceWorkerShutdown",
    "GuardOptions",
    "Held",
    "Lease",
    "ParsedKey",
    "LockRecord",
    "LuaScript",
    "Settled",
    "WakeHub",
    "check_eviction_policy",
    "check_worker_redis",
    "claim_protocol",
    "decode_id",
    "encode_id",
    "format_artifact",
    "holder_id",
    "parse_artifact",
    "parse_lock",
    "read_eviction_policies",
    "scripts_dir",
]
