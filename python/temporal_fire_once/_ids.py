"""The one validation of a scope, step, job type or namespace (PROTOCOL.md section 2).

Shared by the workflow side (``set_dispatch_scope``) and the worker side (``encode_id``), so both
accept and refuse the same IDs with the same message as the TypeScript package. Sandbox-safe: no
I/O, no Redis.
"""

from __future__ import annotations

import json
from typing import Literal

IdKind = Literal["scope", "step", "jobType", "namespace"]

MAX_ID_BYTES = 512
"""Longest accepted ID, in UTF-8 bytes, before encoding."""

# ECMAScript's WhiteSpace and LineTerminator, which String.prototype.trim removes. Python's
# str.strip differs (it strips U+001C..U+001F and keeps U+FEFF), so the set is spelled out.
_JS_WHITESPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def id_problem(kind: IdKind, value: object, name: str | None = None) -> str | None:
    """What is wrong with ``value`` as a ``kind``, or ``None`` when it is usable. The message
    names ``name``, an option that holds the ID (``job_type``), or else the kind, as in TypeScript.

    >>> id_problem("jobType", "", "job_type")
    'job_type must not be empty or whitespace only (got "")'
    """
    label = name or kind
    if not isinstance(value, str):
        return f"{label} must be a string (got {_type_name(value)})"
    if value.strip(_JS_WHITESPACE) == "":
        return f"{label} must not be empty or whitespace only (got {json.dumps(value, ensure_ascii=False)})"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return f"{label} must be well-formed Unicode (it contains a lone surrogate)"
    if size > MAX_ID_BYTES:
        return f"{label} must be at most {MAX_ID_BYTES} bytes of UTF-8 (got {size})"
    return None


def _type_name(value: object) -> str:
    """The value's type as a Python user reads it (``None``, ``int``, ``dict``), where the TypeScript
    message gives JavaScript's ``typeof``."""
    return "None" if value is None else type(value).__name__
