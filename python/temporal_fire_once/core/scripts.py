"""The protocol's Lua scripts, run by EVALSHA with a fall-back to EVAL (PROTOCOL.md section 6).

The scripts are not copied into git: a wheel carries copies taken from ``src/core/scripts`` at
build time (``temporal_fire_once/scripts``, see pyproject.toml), and an editable install or a
checkout reads ``src/core/scripts`` itself. ``tests/test_scripts.py`` checks that every shipped
copy is byte-identical to the source.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence, Union

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import NoScriptError

from .cluster_redirect import unfollowed

RedisClient = Union[Redis, RedisCluster]
ScriptArg = Union[str, bytes, int]

_PACKAGE = Path(__file__).resolve().parent.parent


def scripts_dir() -> Path:
    """Where the Lua scripts are read from: the wheel's copies, else the repository's source."""
    shipped = _PACKAGE / "scripts"
    if (shipped / "acquire.lua").is_file():
        return shipped
    source = _PACKAGE.parent.parent / "src" / "core" / "scripts"
    if (source / "acquire.lua").is_file():
        return source
    raise FileNotFoundError(f"temporal_fire_once: no Lua scripts in {shipped} or {source}; reinstall the package")


@dataclass(frozen=True)
class LuaScript:
    """One script: its file, its versioned name (PROTOCOL.md section 6) and its key count."""

    file: str
    command: str
    number_of_keys: int
    lua: bytes = field(repr=False)
    sha: str = field(repr=False)

    async def __call__(self, redis: RedisClient, keys: Sequence[str], args: Sequence[ScriptArg]) -> Any:
        if len(keys) != self.number_of_keys:
            raise ValueError(f"{self.command} takes {self.number_of_keys} keys (got {len(keys)})")
        try:
            try:
                return await redis.evalsha(self.sha, self.number_of_keys, *keys, *args)
            except NoScriptError:
                return await redis.eval(self.lua.decode("utf-8"), self.number_of_keys, *keys, *args)
        except AttributeError as err:
            if isinstance(redis, RedisCluster):
                raise unfollowed(err) from err
            raise


def _define(file: str, command: str, number_of_keys: int) -> LuaScript:
    lua = (scripts_dir() / file).read_bytes()
    return LuaScript(file, command, number_of_keys, lua, hashlib.sha1(lua).hexdigest())


ACQUIRE = _define("acquire.lua", "fireOnceAcquireV3", 2)
COMMIT = _define("commit.lua", "fireOnceCommitV3", 3)
RELEASE = _define("release.lua", "fireOnceReleaseV3", 2)
EXTEND = _define("extend.lua", "fireOnceExtendV3", 2)
INVALIDATE = _define("invalidate.lua", "fireOnceInvalidateV3", 1)
LOG_APPEND = _define("log-append.lua", "fireOnceLogAppendV3", 1)
# Parked waiters (PROTOCOL.md section 7): this package does not park, but it runs them in the
# conformance suite like every other script of the protocol.
PARK = _define("park.lua", "fireOnceParkV3", 3)
REAP = _define("reap.lua", "fireOnceReapV3", 3)

PROTOCOL_SCRIPTS: tuple[LuaScript, ...] = (ACQUIRE, PARK, REAP, COMMIT, RELEASE, EXTEND, INVALIDATE, LOG_APPEND)
"""Every script of the protocol, as ``PROTOCOL_SCRIPTS`` in ``src/core/scripts.ts``."""


class AcquireReply:
    """The coded replies of acquire.lua (see its header)."""

    EXISTS = 1
    HELD = 3
    CORRUPT = 5


COMMIT_REFUSED = 2
"""Reply of commit.lua when it refused to write: another holder's lock, or another result, stands."""
