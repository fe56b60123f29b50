"""The stored values (PROTOCOL.md section 4), byte for byte as ``src/core/records.ts``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import FireOnceInvalidId

# Fields end at an ASCII space only (PROTOCOL.md section 4), in every language: a tab or any other
# whitespace is part of a field.
_LOCK = re.compile(rb"([^ ]+) (\d+) ([^ ]*) (.*)", re.DOTALL)
_MAX_FENCING = 2**53 - 1
"""The largest fencing token a reader accepts: JavaScript carries no larger integer exactly."""
_MAGIC = b"3:"
# A task token is a protobuf message, which never starts with a 'w' (wire type 7 does not exist).
_WAITER_MAGIC = b"w:"
_MAX_HASH = 64
_ARGS_HASH = re.compile(rf"[A-Za-z0-9_-]{{0,{_MAX_HASH}}}")


def check_args_hash(args_hash: object) -> str:
    """A call's args hash, if every record can carry it: base64url, at most 64 characters
    (``checkArgsHash`` in ``src/core/records.ts``). Otherwise ``FireOnceInvalidId``: a space or
    colon would end its field early."""
    if isinstance(args_hash, str) and _ARGS_HASH.fullmatch(args_hash):
        return args_hash
    raise FireOnceInvalidId(f"args_hash must be base64url, at most {_MAX_HASH} characters (got {args_hash!r})")


@dataclass(frozen=True)
class LockRecord:
    token: str
    fencing_token: int
    args_hash: str
    holder: str


@dataclass(frozen=True)
class ArtifactRecord:
    args_hash: str
    payload: bytes


@dataclass(frozen=True)
class WaiterEntry:
    """A parked waiter's entry: its args hash (``''`` when it checked none, or parked before
    entries carried one) and its activity task token, which completes or fails it."""

    args_hash: str
    token: bytes


def lock_tail(args_hash: str, holder: str) -> str:
    """The part of a lock record after ``<token> <fencing> ``, which acquire.lua appends."""
    return f"{args_hash} {holder}"


def parse_lock(value: bytes) -> LockRecord | None:
    """A lock record, or ``None`` if it is not one this protocol writes: fields end at an ASCII
    space, bytes that are not UTF-8 read as U+FFFD, and a fencing token past 2**53 - 1 is refused.

    >>> parse_lock(b"token-1 1796288676577574 h1 wf-1 run-1 act-1").holder
    'wf-1 run-1 act-1'
    """
    match = _LOCK.fullmatch(value)
    if match is None:
        return None
    token, fencing, args_hash, holder = (field.decode("utf-8", "replace") for field in match.groups())
    if int(fencing) > _MAX_FENCING:
        return None
    return LockRecord(token, int(fencing), args_hash, holder)


def format_artifact(args_hash: str, payload: bytes) -> bytes:
    """
    >>> format_artifact("", b"result")
    b'3::result'
    """
    return _MAGIC + args_hash.encode("latin-1") + b":" + payload


def parse_artifact(value: bytes) -> ArtifactRecord | None:
    """
    >>> parse_artifact(b"3:h1:result").args_hash
    'h1'
    >>> parse_artifact(b"not a record") is None
    True
    """
    if len(value) < 3 or not value.startswith(_MAGIC):
        return None
    end = value.find(b":", 2)
    if end < 0 or end - 2 > _MAX_HASH:
        return None
    return ArtifactRecord(value[2:end].decode("latin-1"), value[end + 1 :])


def parse_waiter(entry: bytes) -> WaiterEntry:
    """A waiter list's entry, ``w:<argsHash>:<task token>``, back (``parseWaiter`` in
    ``src/core/records.ts``); an entry without the ``w:`` is a bare task token (0.2.3 and earlier).

    >>> parse_waiter(b"w:h1:token")
    WaiterEntry(args_hash='h1', token=b'token')
    >>> parse_waiter(b"\\ntoken").args_hash
    ''
    """
    end = entry.find(b":", 2) if entry.startswith(_WAITER_MAGIC) else -1
    if end < 0 or end - 2 > _MAX_HASH:
        return WaiterEntry("", entry)
    return WaiterEntry(entry[2:end].decode("latin-1"), entry[end + 1 :])
