"""The Temporal header that carries the dispatch scope (PROTOCOL.md section 10). Sandbox-safe."""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload

SCOPE_HEADER = "temporal-fire-once-scope"
"""The header name, the same as the TypeScript package's ``SCOPE_HEADER``."""

_JSON_PLAIN = b"json/plain"


def scope_payload(scope: str) -> Payload:
    """The header value: a ``json/plain`` Payload of the scope string."""
    return Payload(metadata={"encoding": _JSON_PLAIN}, data=json.dumps(scope, ensure_ascii=False).encode("utf-8"))


def scope_from_headers(headers: object) -> str | None:
    """The scope a header map carries, or ``None`` when it carries none (or not a string)."""
    if not hasattr(headers, "get"):
        return None
    payload = headers.get(SCOPE_HEADER)
    if not isinstance(payload, Payload) or payload.metadata.get("encoding") != _JSON_PLAIN:
        return None
    try:
        value = json.loads(payload.data.decode("utf-8"))
    except ValueError:
        return None
    return value if isinstance(value, str) else None
