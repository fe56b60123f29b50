"""The AES-256-GCM codec of test/integration/fixtures/converters/codec.ts, byte-compatible: a
``binary/encrypted`` payload whose data is IV (12) + tag (16) + ciphertext of the serialized
Payload. And a codec that refuses some results, as ``codecRefusedJob``'s codec in the TypeScript
suite does."""

from __future__ import annotations

import os
from typing import Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

ENCODING = b"binary/encrypted"
IV, TAG = 12, 16


class AesGcmCodec(PayloadCodec):
    def __init__(self, key: bytes) -> None:
        self._aes = AESGCM(key)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            iv = os.urandom(IV)
            sealed = self._aes.encrypt(iv, payload.SerializeToString(), None)  # ciphertext + tag
            out.append(Payload(metadata={"encoding": ENCODING}, data=iv + sealed[-TAG:] + sealed[:-TAG]))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                out.append(payload)
                continue
            data = payload.data
            plain = self._aes.decrypt(data[:IV], data[IV + TAG :] + data[IV : IV + TAG], None)
            decoded = Payload()
            decoded.ParseFromString(plain)
            out.append(decoded)
        return out


REFUSED_MARKER = "codec-refuses-this"


class CodecRefusedError(Exception):
    """What ``RefusingCodec`` raises: its type is the failure type Temporal reports."""


class RefusingCodec(PayloadCodec):
    """Leaves payloads as they are, but refuses to encode one whose data holds ``REFUSED_MARKER``:
    a codec that cannot take some result (too large for its envelope, a field its policy forbids)."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        for payload in payloads:
            if REFUSED_MARKER.encode() in payload.data:
                raise CodecRefusedError(f"this codec refuses payloads that hold {REFUSED_MARKER!r}")
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)
