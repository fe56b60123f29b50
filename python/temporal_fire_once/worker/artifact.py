"""The artifact bytes (PROTOCOL.md section 4): the result's Payload after the worker's payload
codec, as a serialized ``temporal.api.common.v1.Payload``; read back in reverse."""

from __future__ import annotations

from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from ..core.errors import FireOnceCorruptArtifact


async def encode_artifact(payload: Payload, codec: PayloadCodec | None) -> bytes:
    encoded = [payload] if codec is None else await codec.encode([payload])
    return encoded[0].SerializeToString()


async def decode_artifact(data: bytes, codec: PayloadCodec | None, context: dict[str, str]) -> Payload:
    payload = Payload()
    try:
        payload.ParseFromString(data)
    except DecodeError as err:
        raise FireOnceCorruptArtifact(f"stored artifact is not a valid payload: {err}", context) from err
    if not payload.metadata.get("encoding"):
        raise FireOnceCorruptArtifact("stored artifact is not a valid payload: it has no encoding metadata", context)
    if codec is None:
        return payload
    try:
        return (await codec.decode([payload]))[0]
    except Exception as err:
        raise FireOnceCorruptArtifact(f"stored artifact could not be decoded by the payload codec: {err}", context) from err
