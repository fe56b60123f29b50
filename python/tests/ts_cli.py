"""Run TypeScript files of the repository as `npx tsx` would: the `fire-once` CLI, for the tests of
what an operator reads of a log or keys Python wrote, and the cross-language tests' worker."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from .conftest import REPO


def tsx(script: Path) -> list[str]:
    """The command that runs a TypeScript file of the repository, as `npx tsx <script>` would."""
    node = shutil.which("node")
    if node is None or not (REPO / "node_modules" / "tsx").is_dir():
        raise RuntimeError("node and the repository's node_modules are needed: run npm ci at the repository root")
    return [node, "--import", "tsx", str(script)]


async def run_ts(script: Path, *args: str) -> tuple[int | None, str, str]:
    """Run a TypeScript file of the repository to its end, from the repository's root: its exit
    code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        *tsx(script),
        *args,
        cwd=str(REPO),
        env=dict(os.environ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode, out.decode(), err.decode()


async def fire_once(*args: str) -> tuple[int | None, str, str]:
    """Run `fire-once <args>` to its end: its exit code, stdout and stderr."""
    return await run_ts(REPO / "src" / "cli" / "main.ts", *args)
