"""The package runs the repository's Lua scripts: every copy it ships is byte-identical to
src/core/scripts, in the checkout and in a built wheel."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from temporal_fire_once.core import PROTOCOL_SCRIPTS, scripts_dir

from .conftest import REPO

SOURCE = REPO / "src" / "core" / "scripts"
PROTOCOL = json.loads((REPO / "test" / "conformance" / "cases.json").read_text())


def test_every_protocol_script_is_loaded_byte_for_byte_from_the_source() -> None:
    for script in PROTOCOL_SCRIPTS:
        assert script.lua == (SOURCE / script.file).read_bytes(), script.file
        assert (scripts_dir() / script.file).read_bytes() == (SOURCE / script.file).read_bytes()


def test_names_keys_and_files_match_the_conformance_spec() -> None:
    expected = {(s["file"], s["command"], s["keys"]) for s in PROTOCOL["scripts"].values()}
    assert {(s.file, s.command, s.number_of_keys) for s in PROTOCOL_SCRIPTS} == expected
    assert {p.name for p in SOURCE.glob("*.lua")} == {s.file for s in PROTOCOL_SCRIPTS}


def test_a_built_wheel_ships_byte_identical_copies(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(REPO / "python")],
        check=True,
    )
    (wheel,) = tmp_path.glob("temporal_fire_once-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {Path(n).name: archive.read(n) for n in archive.namelist() if n.startswith("temporal_fire_once/scripts/")}
        assert "temporal_fire_once/py.typed" in archive.namelist()
    assert shipped == {p.name: p.read_bytes() for p in SOURCE.glob("*.lua")}
