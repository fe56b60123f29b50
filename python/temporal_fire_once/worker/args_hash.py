"""The args hash (PROTOCOL.md section 5), byte-identical to ``src/worker/args-hash.ts``.

SHA-256, base64url without padding, over the payloads the worker's converter makes of the
arguments. A ``binary/null`` payload counts as JSON ``null``; a ``json/plain`` payload by its canonical JSON (keys sorted by UTF-16 code
units, no whitespace, strings and numbers written as ECMAScript's ``JSON.stringify`` writes them),
so workers of every SDK hash the same JSON arguments alike; any other payload by its metadata and
bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from typing import Any, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadConverter

_JSON_PLAIN = b"json/plain"
_BINARY_NULL = b"binary/null"
_NULL_PART = b"j4:null"


def args_hash(values: Sequence[Any], converter: PayloadConverter) -> str:
    """The hash of ``values`` (the arguments, or ``[conflict_key(args)]``)."""
    digest = hashlib.sha256()
    for payload in converter.to_payloads(list(values)):
        digest.update(payload_part(payload))
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def payload_part(payload: Payload) -> bytes:
    """What one payload feeds into the hash: ``binary/null`` (Python's ``None``) counts as JSON null."""
    if payload.metadata.get("encoding") == _BINARY_NULL:
        return _NULL_PART
    if payload.metadata.get("encoding") == _JSON_PLAIN:
        canonical = canonical_json(json.loads(payload.data.decode("utf-8"))).encode("utf-8")
        return b"j%d:" % len(canonical) + canonical
    entries = sorted(payload.metadata.items(), key=lambda item: _utf16(item[0]))
    out = b"p%d:" % len(entries)
    for key, value in entries:
        raw_key = key.encode("utf-8")
        out += b"%d:" % len(raw_key) + raw_key + b"%d:" % len(value) + value
    return out + b"%d:" % len(payload.data) + payload.data


def canonical_json(value: Any) -> str:
    """ECMAScript ``JSON.stringify`` of the parsed value, with object keys sorted.

    >>> canonical_json({"b": [1.0, 1e21, 1e-7], "a": "\\u00e9\\n"})
    '{"a":"é\\\\n","b":[1,1e+21,1e-7]}'
    """
    if value is None or value is True or value is False:
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, str):
        return _js_string(value)
    if isinstance(value, (int, float)):
        return _js_number(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(item) for item in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=_utf16)
        return "{" + ",".join(f"{_js_string(k)}:{canonical_json(value[k])}" for k in keys) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _utf16(text: str) -> bytes:
    """A sort key that orders strings by UTF-16 code units, as JavaScript's ``<`` does."""
    return text.encode("utf-16-be", "surrogatepass")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _js_string(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")  # control characters and lone surrogates
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _js_number(number: int | float) -> str:
    """ECMAScript ``Number.prototype.toString`` of the double nearest ``number``."""
    try:
        x = float(number)
    except OverflowError:
        return "null"  # JSON.parse gives Infinity, which JSON.stringify writes as null
    if math.isnan(x) or math.isinf(x):
        return "null"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction.rstrip("0")).lstrip("0") if fraction.rstrip("0") else whole.lstrip("0")
    # Position of the decimal point relative to the digits: value = 0.digits * 10**n.
    n = len(whole.lstrip("0")) if whole.lstrip("0") else -(len(fraction) - len(fraction.lstrip("0")))
    n += int(exp or 0)
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    exponent = f"e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + (digits if k == 1 else digits[0] + "." + digits[1:]) + exponent
