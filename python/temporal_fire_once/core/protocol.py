"""The protocol marker (PROTOCOL.md section 1): claim the prefix for v3, or refuse."""

from __future__ import annotations

from redis.exceptions import NoPermissionError

from .errors import FireOnceConfigError, FireOnceProtocolMismatch
from .keys import PROTOCOL_VERSION, FireOnceKeys
from .options import check_redis_client
from .scripts import RedisClient


async def claim_protocol(redis: RedisClient, keys: FireOnceKeys) -> None:
    """Read ``<prefix>:protocol``; if unset, ``SET <prefix>:protocol 3 NX``, then read it again if
    another worker set it first (not ``SET ... NX GET``: that needs Redis 7.0, and the protocol
    runs on 5.0).

    Raises :class:`FireOnceProtocolMismatch` (a ``FireOnceConfigError``) when another version
    writes the prefix, and ``FireOnceConfigError`` when the marker is unset and this Redis user
    may not write it.
    """
    check_redis_client(redis, "claim_protocol")
    marker = keys.protocol_marker()
    found: object = await redis.get(marker)
    if found is None:
        try:
            claimed = await redis.set(marker, str(PROTOCOL_VERSION), nx=True)
        except NoPermissionError as err:  # redis-py strips the NOPERM code from its message
            raise FireOnceConfigError(
                f"key prefix {keys.prefix!r} has no protocol marker ({marker}) and this Redis user may not write it: "
                f"have an admin run SET {marker} {PROTOCOL_VERSION} once",
                {"key": marker},
            ) from err
        found = None if claimed else await redis.get(marker)
    if found is None or found == str(PROTOCOL_VERSION).encode():
        return
    shown = found.decode("utf-8", "replace") if isinstance(found, bytes) else str(found)
    raise FireOnceProtocolMismatch(
        f"key prefix {keys.prefix!r} is written with fire-once protocol {shown!r} ({marker}); this worker speaks protocol "
        f"{PROTOCOL_VERSION}. Stop the workers of the other version and migrate (npx fire-once migrate), or give this worker "
        "another key_prefix",
        found=shown,
        context={"key": marker},
    )
