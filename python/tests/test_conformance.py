"""The language-neutral protocol cases (test/conformance/cases.json, see its README), run against
a real redis-server through the Python package's script wrappers: the same cases the jest suite
runs through the TypeScript package's."""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Callable

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from temporalio.converter import PayloadConverter

from temporal_fire_once.core import PROTOCOL_SCRIPTS, PROTOCOL_VERSION, FireOnceKeys, decode_id, encode_id, parse_artifact, parse_lock
from temporal_fire_once.core.errors import FireOnceInvalidId
from temporal_fire_once.worker.args_hash import args_hash

from .conftest import REPO

SPEC: dict[str, Any] = json.loads((REPO / "test" / "conformance" / "cases.json").read_text(encoding="utf-8"))
BY_COMMAND = {s.command: s for s in PROTOCOL_SCRIPTS}
Fill = Callable[[str], str]


def test_names_the_protocol_version_and_every_script() -> None:
    assert SPEC["protocol"] == PROTOCOL_VERSION
    assert {s["command"] for s in SPEC["scripts"].values()} == set(BY_COMMAND)


@pytest.mark.parametrize("case", SPEC["cases"], ids=[c["name"] for c in SPEC["cases"]])
async def test_case(case: dict[str, Any], client: Redis, prefix: str) -> None:
    captured: dict[str, str] = {}

    def fill(text: str) -> str:
        out = re.sub(r"\$\{(\w+)\}", lambda m: captured.get(m.group(1), f"<unset {m.group(1)}>"), text)
        if out in SPEC["keys"]:
            out = SPEC["keys"][out]
        return out.replace("$prefix", prefix)

    def arg(value: str | int) -> str | int:
        return value if isinstance(value, int) else fill(value)

    for step in case["steps"]:
        if "redis" in step:
            await client.execute_command(*[arg(v) for v in step["redis"]])  # type: ignore[no-untyped-call]
        elif "script" in step:
            script = BY_COMMAND[SPEC["scripts"][step["script"]]["command"]]
            reply: Any
            try:
                reply = await script(client, [fill(k) for k in step["keys"]], [arg(a) for a in step["args"]])
            except ResponseError as err:
                reply = err
            expect_reply(reply, step["expect"], fill, captured)
        elif "state" in step:
            for placeholder, expected in step["state"].items():
                await expect_state(client, fill(placeholder), expected, fill)


def expect_reply(reply: Any, expected: dict[str, Any], fill: Fill, captured: dict[str, str]) -> None:
    if "error" in expected:
        assert isinstance(reply, ResponseError) and expected["error"] in str(reply)
        return
    assert not isinstance(reply, Exception), reply
    if "int" in expected:
        assert isinstance(reply, int)
        want = expected["int"]
        if isinstance(want, int):
            assert reply == want
        else:
            if "min" in want:
                assert reply >= want["min"]
            if "max" in want:
                assert reply <= want["max"]
            if "gt" in want:
                assert reply > int(fill(str(want["gt"])))
        if "capture" in expected:
            captured[expected["capture"]] = str(reply)
    elif "bulk" in expected:
        assert reply == fill(expected["bulk"]).encode()
    elif "match" in expected:
        assert re.search(fill(expected["match"]), reply.decode() if isinstance(reply, bytes) else str(reply))
    elif "nil" in expected:
        assert reply is None
    elif "array" in expected:
        assert isinstance(reply, list) and len(reply) == len(expected["array"])
        for item, want_item in zip(reply, expected["array"]):
            expect_reply(item, want_item, fill, captured)
    else:
        raise AssertionError(f"unknown reply description {expected}")


async def expect_state(client: Redis, key: str, expected: dict[str, Any], fill: Fill) -> None:
    if "type" in expected:
        assert (key, text(await client.type(key))) == (key, expected["type"])
    if "string" in expected:
        assert (key, await client.get(key)) == (key, fill(expected["string"]).encode())
    if "match" in expected:
        value = await client.get(key)
        assert value is not None and re.search(fill(expected["match"]), text(value))
    if "list" in expected:
        assert [text(v) for v in await client.lrange(key, 0, -1)] == expected["list"]
    if "stream" in expected:
        entries: Any = await client.xrange(key, "-", "+")
        assert [[text(x) for pair in fields.items() for x in pair] for _, fields in entries] == expected["stream"]
    if "pttl" in expected:
        low, high = expected["pttl"]
        assert low <= await client.pttl(key) <= high


def text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@pytest.mark.parametrize("case", SPEC["argsHash"], ids=[c["name"] for c in SPEC["argsHash"]])
def test_args_hash_vector(case: dict[str, Any]) -> None:
    values: list[Any] = [*case["args"], *(base64.b64decode(b) for b in case.get("bytes", []))]
    assert args_hash(values, PayloadConverter.default) == case["hash"]


def _bytes_of(case: dict[str, Any]) -> bytes:
    return base64.b64decode(case["base64"]) if "base64" in case else str(case.get("value", "")).encode("utf-8")


@pytest.mark.parametrize("case", SPEC["records"]["locks"], ids=[c["name"] for c in SPEC["records"]["locks"]])
def test_lock_record(case: dict[str, Any]) -> None:
    """A lock as the guard reads acquire's reply (PROTOCOL.md section 4); ``None``: not a lock record."""
    try:
        lock = parse_lock(_bytes_of(case))
    except Exception as err:  # a reader must never fail on a value: it is a lock record or not one
        pytest.fail(f"parse_lock raised {type(err).__name__}: {err}")
    read = None if lock is None else {"token": lock.token, "fencing": str(lock.fencing_token), "argsHash": lock.args_hash, "holder": lock.holder}
    assert read == case["lock"]


@pytest.mark.parametrize("case", SPEC["records"]["artifacts"], ids=[c["name"] for c in SPEC["records"]["artifacts"]])
def test_artifact_record(case: dict[str, Any]) -> None:
    artifact = parse_artifact(_bytes_of(case))
    read = None if artifact is None else {"argsHash": artifact.args_hash, "payload": base64.b64encode(artifact.payload).decode()}
    assert read == case["artifact"]


@pytest.mark.parametrize("case", SPEC["ids"]["encode"], ids=[c["name"] for c in SPEC["ids"]["encode"]])
def test_id_encoding(case: dict[str, Any]) -> None:
    """An ID and its encoding in keys, or the problem that refuses it (PROTOCOL.md section 2)."""
    try:
        got = {"encoded": encode_id("scope", case["id"])}
    except FireOnceInvalidId as err:
        got = {"problem": str(err)}
    assert got == ({"encoded": case["encoded"]} if "encoded" in case else {"problem": case["problem"]})


@pytest.mark.parametrize("case", SPEC["ids"]["decode"], ids=[c["name"] for c in SPEC["ids"]["decode"]])
def test_id_read_back_from_a_key(case: dict[str, Any]) -> None:
    """A key reader takes an ID only in the one encoding ``encode_id`` writes; anything else is no key of the guard's."""
    parsed = FireOnceKeys("fire-once").parse(f"fire-once:v3:{{default/{case['encoded']}}}:l:st")
    assert (None if parsed is None else parsed.scope) == case["id"]


@pytest.mark.parametrize("case", SPEC["ids"]["decode"], ids=[c["name"] for c in SPEC["ids"]["decode"]])
def test_decode_id_itself(case: dict[str, Any]) -> None:
    """And ``decode_id`` itself, not only through the key's pattern (which refuses an unescaped colon first)."""
    try:
        decoded: str | None = decode_id(case["encoded"])
    except ValueError:
        decoded = None
    assert decoded == case["id"]
