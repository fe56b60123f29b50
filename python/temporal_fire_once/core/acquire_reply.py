"""What an acquire found, read from acquire.lua's reply (its header lists every reply): the stored
artifact to fast-forward to, or the lock another holder has; each checked against the arguments
of this call, and anything this protocol never writes refused."""

from __future__ import annotations

from typing import Any

from .errors import FireOnceCorruptArtifact, FireOnceKeyConflict, FireOnceProtocolError
from .outcomes import DispatchTarget, FastForward, Held
from .records import parse_artifact, parse_lock
from .scripts import ACQUIRE, AcquireReply
from .store_calls import error_context


def found_by_acquire(reply: Any, target: DispatchTarget, lock_key: str, artifact_key: str) -> FastForward | Held:
    """The outcome of an acquire that took no lock (a reply that is no fencing token)."""
    if isinstance(reply, bytes):
        return FastForward(stored_result(reply, target, artifact_key), artifact_key)
    if isinstance(reply, list) and reply and isinstance(reply[0], bytes):
        return FastForward(stored_result(reply[0], target, artifact_key), artifact_key, int(reply[1]))
    code = reply[0] if isinstance(reply, list) and reply else reply
    if code == AcquireReply.EXISTS:
        return FastForward(b"", artifact_key, int(reply[1]))
    if code == AcquireReply.HELD:
        lock = parse_lock(reply[2])
        if lock is None:
            raise FireOnceProtocolError("the lock holds a value this protocol never writes", error_context(target, lock_key))
        same = lock.holder != "" and lock.holder == target.holder
        if not same and _differs(target, lock.args_hash):
            raise _conflict(target, lock_key, "the dispatch in flight was started")
        return Held(int(reply[1]), lock_key, lock.holder, same, lock.fencing_token)
    if code == AcquireReply.CORRUPT:
        detail = reply[1].decode("utf-8", "replace") if isinstance(reply[1], bytes) else str(reply[1])
        raise FireOnceCorruptArtifact(f"stored artifact is not one this library wrote: {detail}", error_context(target, artifact_key))
    raise FireOnceProtocolError(f"unexpected reply from {ACQUIRE.command}: {code!r}", error_context(target, lock_key))


def stored_result(record: bytes, target: DispatchTarget, artifact_key: str) -> bytes:
    """The payload of an artifact record, if this protocol wrote it for these arguments."""
    artifact = parse_artifact(record)
    if artifact is None:
        raise FireOnceCorruptArtifact("stored artifact is not one this library wrote: not an artifact record", error_context(target, artifact_key))
    if _differs(target, artifact.args_hash):
        raise _conflict(target, artifact_key, "the stored artifact was produced")
    return artifact.payload


def _differs(target: DispatchTarget, stored: str) -> bool:
    """Whether a record stored with ``stored`` was made for other arguments than ``target``'s: only
    when both recorded a hash, and ``stored`` is neither the call's hash nor its former one."""
    mine = target.args_hash
    return mine != "" and stored != "" and stored != mine and stored != target.former_args_hash


def _conflict(target: DispatchTarget, key: str, what: str) -> FireOnceKeyConflict:
    return FireOnceKeyConflict(
        f"step {target.step!r} in scope {target.scope!r} was called with other arguments than {what} with", error_context(target, key)
    )
