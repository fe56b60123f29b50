"""The package as users install it. Its sdist holds everything a wheel needs (the Lua scripts,
the licence); a wheel builds from that sdist alone, away from the repository, as ``python -m
build`` and ``pip install --no-binary`` do; and that wheel, installed in a fresh virtual
environment, imports and decides against a real Redis with its own copy of the scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPTS = {p.name: p.read_bytes() for p in (REPO / "src" / "core" / "scripts").glob("*.lua")}
LICENSE = (REPO / "LICENSE").read_bytes()


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    build = "import sys, hatchling.build as b; print(b.build_sdist(sys.argv[1]))"
    subprocess.run([sys.executable, "-c", build, str(out)], cwd=REPO / "python", check=True, capture_output=True)
    (archive,) = out.glob("temporal_fire_once-*.tar.gz")
    return archive


@pytest.fixture(scope="module")
def wheel_from_sdist(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from the unpacked sdist, in a directory with no repository around it."""
    unpacked = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(sdist) as archive:
        archive.extractall(unpacked, filter="data")
    (source,) = unpacked.iterdir()
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("temporal_fire_once-*.whl")
    return wheel


def test_the_sdist_carries_the_scripts_and_the_licence(sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        files: dict[str, bytes] = {}
        for member in archive.getmembers():
            content = archive.extractfile(member) if member.isfile() else None
            if content is not None:
                files[Path(member.name).relative_to(Path(member.name).parts[0]).as_posix()] = content.read()
    assert {Path(n).name: files[n] for n in files if n.startswith("temporal_fire_once/scripts/")} == SCRIPTS
    assert files.get("LICENSE") == LICENSE


def test_a_wheel_built_from_the_sdist_alone_ships_the_scripts_and_the_licence(wheel_from_sdist: Path) -> None:
    with zipfile.ZipFile(wheel_from_sdist) as archive:
        names = archive.namelist()
        assert {Path(n).name: archive.read(n) for n in names if n.startswith("temporal_fire_once/scripts/")} == SCRIPTS
        (licence,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(licence) == LICENSE


# Run by the installed package in the fresh environment: where it was imported from, and one fire
# (acquire, commit) and a fast-forward against the test's Redis.
_SMOKE = """
import asyncio, json, sys
import redis.asyncio
import temporal_fire_once
from temporal_fire_once.core import Acquired, DispatchTarget, FastForward, FireOnceGuard, GuardOptions, scripts_dir

async def main():
    client = redis.asyncio.Redis.from_url(sys.argv[1])
    guard = FireOnceGuard(client, GuardOptions(key_prefix=sys.argv[2]))
    target = DispatchTarget("s", "step", "job")
    first = await guard.acquire(target)
    committed = await guard.commit(first.lease, b"result")
    again = await guard.acquire(target)
    await client.aclose()
    print(json.dumps({
        "module": temporal_fire_once.__file__,
        "scripts": str(scripts_dir()),
        "fired": isinstance(first, Acquired) and committed.ours,
        "fast_forward": isinstance(again, FastForward) and again.artifact == b"result",
    }))

asyncio.run(main())
"""


def test_the_wheel_installed_in_a_fresh_environment_imports_and_decides_with_its_own_scripts(
    wheel_from_sdist: Path, tmp_path: Path, redis_url: str, prefix: str
) -> None:
    env = tmp_path / "venv"
    # --system-site-packages lends it temporalio and redis; the wheel, installed in the venv,
    # comes first on sys.path, before the repository's editable install.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env)], check=True)
    python = str(env / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel_from_sdist)], check=True, capture_output=True)
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([python, "-c", _SMOKE, redis_url, prefix], check=True, capture_output=True, text=True, cwd=tmp_path, env=clean)
    seen = json.loads(done.stdout)
    assert seen["module"].startswith(str(env)) and seen["scripts"].startswith(str(env)), seen
    assert seen["fired"] and seen["fast_forward"], seen
