"""An earlier release's Python package, taken from this repository's git history, for the
compatibility tests: ``release_env()`` is the environment of a process that imports it instead of
HEAD's (``compat_record.py``, ``compat_worker.py``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .conftest import REPO


@dataclass(frozen=True)
class Release:
    version: str
    commit: str


RELEASE_0_8_0 = Release("0.8.0", "7bab1c5fa322d25ac86ac90d8c6ba26e5e604bc7")
"""0.8.0, npm and Python: the release before 0.9.0 (docs/upgrading.md)."""

RELEASE_0_9_0 = Release("0.9.0", "bdfbdad34d479a1a8b29253932637607e9eff521")
"""0.9.0, npm and Python: the release before 0.10.0. Its last code, after "Version 0.9.0"
(49d0fc5) and before the hand-off-cancel patch: the commit users upgrade from."""

RELEASE_0_10_0 = Release("0.10.0", "0f0f2cfdeb71a9ee629dc76552699601897f2b97")
"""0.10.0, npm and Python: the release before 0.11.0, by its last commit."""

RELEASES = {release.version: release for release in (RELEASE_0_8_0, RELEASE_0_9_0, RELEASE_0_10_0)}
"""Every earlier release whose recorded histories HEAD replays, by version, oldest first."""


def release_unavailable(release: Release) -> str | None:
    """Why ``release`` cannot be taken from this checkout (a shallow clone, or no git), or ``None``."""
    done = subprocess.run(["git", "cat-file", "-e", f"{release.commit}^{{commit}}"], cwd=REPO, capture_output=True, text=True)
    if done.returncode == 0:
        return None
    return (
        f"the git history holds no commit {release.commit} (release {release.version}): {done.stderr.strip()}; "
        "fetch the history (git fetch --unshallow) to run this test"
    )


def release_package(release: Release) -> Path:
    """The directory to put first on ``PYTHONPATH`` to import ``release``'s ``temporal_fire_once``:
    its package and Lua scripts (``src/core/scripts``, where a checkout's package reads them),
    extracted once by ``git archive`` into a cache under the system's temporary directory. It
    holds the package alone, no ``tests``, so HEAD's test modules stay importable behind it."""
    root = Path(tempfile.gettempdir()) / f"temporal-fire-once-py-release-{release.version}-{release.commit[:12]}"
    package = root / "python"
    if not (root / ".extracted").exists():
        problem = release_unavailable(release)
        if problem is not None:
            raise RuntimeError(f"cannot extract release {release.version}: {problem}")
        staging = Path(tempfile.mkdtemp(prefix=f"{root.name}.", dir=root.parent))
        archive = staging / "release.tar"
        paths = ["python/temporal_fire_once", "python/pyproject.toml", "src/core/scripts"]
        subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), release.commit, *paths], cwd=REPO, check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data")
        archive.unlink()
        (staging / ".extracted").write_text(f"{release.commit}\n")
        try:
            staging.rename(root)
        except OSError:
            if not (root / ".extracted").exists():
                raise
            shutil.rmtree(staging)  # another extraction landed first: keep it
    version_line = next(line for line in (package / "pyproject.toml").read_text().splitlines() if line.startswith("version = "))
    if version_line != f'version = "{release.version}"':
        raise RuntimeError(f"the package of {release.commit} in {root} has {version_line}, not {release.version}")
    return package


def release_env(release: Release) -> dict[str, str]:
    """This process's environment, with ``release``'s package first on ``PYTHONPATH`` and HEAD's
    ``python/`` (for ``tests``) after it. Start the process outside ``python/``: a current
    directory there would put HEAD's package first."""
    path = [str(release_package(release)), str(REPO / "python"), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
