"""The args hash (PROTOCOL.md section 5), byte-identical to ``src/worker/args-hash.ts``.

SHA-256, base64url without padding, over the payloads the worker's converter makes of the
arguments. A ``binary/null`` payload counts as JSON ``null``; a ``json/plain`` payload by its canonical JSON (keys sorted by UTF-16 code
units, no whitespace, strings and numbers written as ECMAScript's ``JSON.stringify`` writes them),
so workers of every SDK hash the same JSON arguments alike; any other payload by its metadata and
bytes.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import re
from decimal import Decimal
from typing import Any, Iterable, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadConverter

_JSON_PLAIN = b"json/plain"
_BINARY_NULL = b"binary/null"
_NULL_PART = b"j4:null"


def args_hash(values: Sequence[Any], converter: PayloadConverter) -> str:
    """The hash of ``values`` (the arguments, or ``[conflict_key(args)]``). A ``set`` or
    ``frozenset`` in them counts in a sorted order (:func:`in_stable_order`)."""
    return args_hashes(values, converter)[0]


def args_hashes(values: Sequence[Any], converter: PayloadConverter) -> tuple[str, str]:
    """The hash of ``values``, and the one releases up to 0.7 took of them where it differs, else
    ``""``: those wrote an integer past 2**53 through the nearest double (:func:`_js_integer`), and
    the locks, results and parked waiters they stored carry that hash until they expire
    (``DispatchTarget.former_args_hash``)."""
    payloads = converter.to_payloads([in_stable_order(value) for value in values])
    exact = _digest(payload_part(payload) for payload in payloads)
    # Such an integer has 16 digits or more; without a run of them, nothing was written otherwise.
    if not any(_LONG_DIGITS.search(payload.data) for payload in payloads):
        return exact, ""
    former = _digest(payload_part(payload, exact_integers=False) for payload in payloads)
    return exact, "" if former == exact else former


_LONG_DIGITS = re.compile(rb"\d{16}")


def _digest(parts: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def in_stable_order(value: Any) -> Any:
    """``value`` with every ``set`` and ``frozenset`` in it (also in lists, tuples, dict values and
    dataclass fields) made a list sorted by ``repr``. The converter writes a set as a list in its
    iteration order, and that order differs from one process to the next (Python salts the hash
    of a string per process, ``PYTHONHASHSEED``): the same call would hash otherwise on another
    worker, and fail there with ``FireOnceKeyConflict``. Anything without a set is returned as it
    is, so its hash is unchanged.

    >>> in_stable_order({"b": {"y", "x"}, "a": (1, frozenset({3, 2}))})
    {'b': ['x', 'y'], 'a': (1, [2, 3])}
    """
    if isinstance(value, (set, frozenset)):
        return sorted((in_stable_order(item) for item in value), key=repr)
    if isinstance(value, (list, tuple)):
        items = [in_stable_order(item) for item in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return value._make(items) if hasattr(value, "_make") else type(value)(items)  # a named tuple, or a list or tuple
    if isinstance(value, dict):
        entries = {key: in_stable_order(item) for key, item in value.items()}
        return value if all(entries[key] is item for key, item in value.items()) else entries
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f.name for f in dataclasses.fields(value) if f.init]
        changed = {name: stable for name in fields if (stable := in_stable_order(getattr(value, name))) is not getattr(value, name)}
        try:
            return dataclasses.replace(value, **changed) if changed else value
        except Exception:  # its __init__ or __post_init__ refuses a list where it had a set: as it is
            return value
    return value


def payload_part(payload: Payload, exact_integers: bool = True) -> bytes:
    """What one payload feeds into the hash: ``binary/null`` (Python's ``None``) counts as JSON null."""
    if payload.metadata.get("encoding") == _BINARY_NULL:
        return _NULL_PART
    if payload.metadata.get("encoding") == _JSON_PLAIN:
        canonical = canonical_json(json.loads(payload.data.decode("utf-8")), exact_integers).encode("utf-8")
        return b"j%d:" % len(canonical) + canonical
    entries = sorted(payload.metadata.items(), key=lambda item: _utf16(item[0]))
    out = b"p%d:" % len(entries)
    for key, value in entries:
        raw_key = key.encode("utf-8")
        out += b"%d:" % len(raw_key) + raw_key + b"%d:" % len(value) + value
    return out + b"%d:" % len(payload.data) + payload.data


def canonical_json(value: Any, exact_integers: bool = True) -> str:
    """ECMAScript ``JSON.stringify`` of the parsed value, with object keys sorted.

    >>> canonical_json({"b": [1.0, 1e21, 1e-7], "a": "\\u00e9\\n"})
    '{"a":"é\\\\n","b":[1,1e+21,1e-7]}'
    """
    if value is None or value is True or value is False:
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, str):
        return _js_string(value)
    if isinstance(value, int):
        return _js_integer(value) if exact_integers else _js_number(value)
    if isinstance(value, float):
        return _js_number(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(item, exact_integers) for item in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=_utf16)
        return "{" + ",".join(f"{_js_string(k)}:{canonical_json(value[k], exact_integers)}" for k in keys) + "}"
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


def _js_integer(number: int) -> str:
    """``number`` as ECMAScript writes the double nearest it, if that reads back as ``number``;
    otherwise all its digits. Integers a double cannot hold (a 64-bit ID past 2**53) would
    otherwise hash alike when they differ, and a later call would get a result made for another
    argument. TypeScript never writes such an integer, so no TypeScript hash changes.

    >>> _js_integer(2**53), _js_integer(1234567890123456800), _js_integer(1234567890123456789)
    ('9007199254740992', '1234567890123456800', '1234567890123456789')
    """
    written = _js_number(number)
    if -(2**53) <= number <= 2**53 or (written != "null" and int(Decimal(written)) == number):
        return written
    return str(number)


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
