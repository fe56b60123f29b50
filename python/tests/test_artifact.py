"""Stored artifact payloads that are not what a worker writes: each is ``FireOnceCorruptArtifact``,
never another error, as in TypeScript (``test/bad-input/artifacts.test.ts``). No Redis."""

from __future__ import annotations

import random

import pytest
from temporalio.api.common.v1 import Payload

from temporal_fire_once.core.errors import FireOnceCorruptArtifact
from temporal_fire_once.worker.artifact import decode_artifact

GOOD = Payload(metadata={"encoding": b"json/plain"}, data=b'"summary"').SerializeToString()


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe garbage", GOOD[: len(GOOD) // 2], b"", Payload(data=b'"summary"').SerializeToString()],
    ids=["garbage bytes", "truncated mid-way", "empty", "no encoding metadata"],
)
async def test_a_stored_payload_that_is_not_one_is_a_corrupt_artifact(data: bytes) -> None:
    with pytest.raises(FireOnceCorruptArtifact, match="stored artifact is not a valid payload"):
        await decode_artifact(data, None, {"key": "k"})


async def test_random_bytes_are_a_corrupt_artifact_or_a_payload_with_an_encoding_never_another_error() -> None:
    rng = random.Random(7)
    for _ in range(500):
        data = rng.randbytes(rng.randint(0, 64))
        try:
            payload = await decode_artifact(data, None, {})
        except FireOnceCorruptArtifact:
            continue
        assert payload.metadata.get("encoding")


async def test_a_stored_payload_is_read_back_as_written() -> None:
    payload = await decode_artifact(GOOD, None, {})
    assert (payload.metadata["encoding"], payload.data) == (b"json/plain", b'"summary"')
