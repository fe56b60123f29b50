"""The one place keys are built (PROTOCOL.md sections 2 and 3), as ``src/core/keys.ts`` does."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from .._ids import IdKind, id_problem
from .errors import FireOnceConfigError, FireOnceInvalidId

PROTOCOL_VERSION = 3
"""The protocol version: the ``v3`` segment of every key and the value of the protocol marker."""

DEFAULT_NAMESPACE = "default"
KEY_PREFIX_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")


def check_key_prefix(label: str, value: object) -> str:
    """``value`` if it is a plain key prefix (no braces, globs or whitespace), else a
    :class:`FireOnceConfigError` naming ``label``, as ``checkKeyPrefix`` in TypeScript."""
    if not isinstance(value, str) or not KEY_PREFIX_PATTERN.fullmatch(value):
        raise FireOnceConfigError(f"{label} must be 1-64 characters of [A-Za-z0-9._:-], starting with a letter or digit (got {value!r})")
    return str.__str__(value)  # a plain str: keys are f-strings, and a subclass formats as it likes

_PLAIN = re.compile(r"[A-Za-z0-9._~-]{1,512}")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SCOPE_KEY = re.compile(r"\{([^/{}:]+)/([^/{}:]+)\}:(?:([alwx]):([^:]+)|(wake))")

ScopeKeyKind = Literal["artifact", "lock", "waiters", "external"]
_TAG_KINDS: dict[str, ScopeKeyKind] = {"a": "artifact", "l": "lock", "w": "waiters", "x": "external"}


@dataclass(frozen=True)
class ParsedKey:
    """A key of this layout read back by :meth:`FireOnceKeys.parse`."""

    namespace: str
    scope: str
    kind: ScopeKeyKind | Literal["wake"]
    id: str | None = None
    """The step (lock, waiters) or job type (artifact, external); ``None`` for the wake channel."""


def encode_id(kind: IdKind, value: object) -> str:
    """UTF-8, then every byte outside ``[A-Za-z0-9._~-]`` as ``%XX``; injective and glob-free.

    >>> encode_id("scope", "chat:7*")
    'chat%3A7%2A'
    """
    if isinstance(value, str):
        # A plain str, never a subclass: keys are f-strings, and a (str, Enum) member formats as
        # "Jobs.SUMMARY", not as its value (which the TypeScript package and a plain str key on).
        value = str.__str__(value)
        if _PLAIN.fullmatch(value):
            return value
    problem = id_problem(kind, value)
    if problem is not None:
        raise FireOnceInvalidId(problem)
    assert isinstance(value, str)
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in value.encode("utf-8"))


def decode_id(encoded: str) -> str:
    """Inverse of :func:`encode_id`.

    >>> decode_id("chat%3A7%2A")
    'chat:7*'

    Takes only what :func:`encode_id` writes, as ``decodeId`` in TypeScript: raises ``ValueError``
    for a ``%`` without two hex digits (``unquote`` would keep it), bytes that are not UTF-8
    (``UnicodeDecodeError``, a ``ValueError``), an ID the guard refuses, and an encoding
    ``encode_id`` never writes (a needless or lower-case escape such as ``fin%65`` or ``%3a``, a
    character left unescaped), so that no two keys read back as one ID.
    """
    if _BAD_ESCAPE.search(encoded):
        raise ValueError(f"malformed escape in {encoded!r}")
    decoded = unquote(encoded, errors="strict")
    try:
        canonical = encode_id("scope", decoded)
    except FireOnceInvalidId as err:
        raise ValueError(f"{encoded!r} is not an encoded ID: {err}") from None
    if canonical != encoded:
        raise ValueError(f"{encoded!r} is not the encoding encode_id writes")
    return decoded


class FireOnceKeys:
    """Keys of one prefix and namespace, protocol v3.

    >>> FireOnceKeys("fire-once").lock("session-42", "dispatch-summary")
    'fire-once:v3:{default/session-42}:l:dispatch-summary'
    """

    def __init__(self, prefix: str, namespace: str = DEFAULT_NAMESPACE) -> None:
        # A brace in the prefix would move every key's Cluster slot to the prefix's hash tag.
        self.prefix = check_key_prefix("prefix", prefix)
        self.namespace = namespace
        self.root = f"{self.prefix}:v{PROTOCOL_VERSION}:"
        self._ns = encode_id("namespace", namespace)

    def for_namespace(self, namespace: str) -> FireOnceKeys:
        return self if namespace == self.namespace else FireOnceKeys(self.prefix, namespace)

    def scope_base(self, scope: str) -> str:
        return f"{self.root}{{{self._ns}/{encode_id('scope', scope)}}}"

    def artifact(self, scope: str, job_type: str) -> str:
        return f"{self.scope_base(scope)}:a:{encode_id('jobType', job_type)}"

    def lock(self, scope: str, step: str) -> str:
        return f"{self.scope_base(scope)}:l:{encode_id('step', step)}"

    def waiters(self, scope: str, step: str) -> str:
        return f"{self.scope_base(scope)}:w:{encode_id('step', step)}"

    def external(self, scope: str, job_type: str) -> str:
        return f"{self.scope_base(scope)}:x:{encode_id('jobType', job_type)}"

    def external_key_problem(self, key: object, scope: str, job_type: str) -> str | None:
        """Why ``key`` cannot be the external artifact key of ``job_type`` in ``scope`` under these
        keys' namespace, or ``None`` if it can. Under the prefix it must be a key of that scope and
        namespace that the guard does not write (a lock, a result artifact...): any other would
        fast-forward on, or be written by, a job that is not this call's. A key outside the prefix
        is the user's own.

        >>> FireOnceKeys("fire-once").external_key_problem("jobs:42", "s", "report") is None
        True
        """
        if not isinstance(key, str) or key == "":
            return f"must be a non-empty string (got {key!r})"
        if not key.startswith(f"{self.prefix}:"):
            return None
        parsed = self.parse(key)
        if key.startswith(f"{self.scope_base(scope)}:") and (parsed is None or parsed.kind == "external"):
            return None
        return (
            f"is {key!r}: under the guard's prefix it must be a key of this scope in namespace {self.namespace!r} that the guard "
            f"does not write, such as {self.external(scope, job_type)!r} (FireOnceKeys(prefix).for_namespace(namespace).external(scope, job_type))"
        )

    def wake_channel(self, scope: str) -> str:
        return f"{self.scope_base(scope)}:wake"

    def log(self) -> str:
        return f"{self.root}{self._ns}:log"

    def invalidations(self) -> str:
        return f"{self.root}{self._ns}:invalidations"

    def protocol_marker(self) -> str:
        return f"{self.prefix}:protocol"

    def parse(self, key: str) -> ParsedKey | None:
        """Read back a scope key or wake channel of this prefix, in any namespace; ``None`` for
        anything else (another prefix, the log, another protocol version, an ID no encoding makes).

        >>> FireOnceKeys("fire-once").parse("fire-once:v3:{tenant-b/chat%3A7}:l:summary")
        ParsedKey(namespace='tenant-b', scope='chat:7', kind='lock', id='summary')
        """
        match = _SCOPE_KEY.fullmatch(key[len(self.root) :]) if key.startswith(f"{self.root}{{") else None
        if match is None:
            return None
        ns, scope, tag, id_, wake = match.groups()
        try:
            if wake is not None:
                return ParsedKey(decode_id(ns), decode_id(scope), "wake")
            return ParsedKey(decode_id(ns), decode_id(scope), _TAG_KINDS[tag], decode_id(id_))
        except ValueError:  # an ID encode_id never writes so: a key someone else wrote in this shape
            return None
