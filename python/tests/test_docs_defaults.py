"""The defaults README.md's Options table states are the Python package's too: python/README.md
says the options are TypeScript's, snake_cased, "with the same defaults except ``on_in_flight``"
(``'wait'`` here), and names the two that Python has not (``localCache``, ``resumeWindowMs``).
``test/docs/defaults.test.ts`` holds ``FIRE_ONCE_DEFAULTS`` to the same table."""

from __future__ import annotations

import dataclasses
import re

from temporal_fire_once import GuardOptions, WorkerDefaults

from .conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
PYTHON_README = (REPO / "python" / "README.md").read_text(encoding="utf-8")
TYPESCRIPT_ONLY = {"localCache", "resumeWindowMs"}


def _documented() -> dict[str, str | None]:
    """The plugin's options table: each option's name and the first code span of its default cell."""
    match = re.search(r"\n## Options\n(.*?)\nPer activity", README, re.S)
    assert match is not None
    rows = re.findall(r"^\| `(\w+)` \| ([^|]*) \|", match.group(1), re.M)
    return {name: (code.group(1) if (code := re.search(r"`([^`]*)`", cell)) else None) for name, cell in rows}


def _literal(code: str | None) -> object:
    if code is None:
        return None
    if re.fullmatch(r"\d+", code):
        return int(code)
    if re.fullmatch(r"'[^']*'", code):
        return code[1:-1]
    assert code in ("true", "false"), code
    return code == "true"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_the_documented_defaults_are_the_python_packages_but_on_in_flight() -> None:
    documented = {name: code for name, code in _documented().items() if name != "redis"}
    assert len(documented) > 15
    guard, defaults = GuardOptions(), WorkerDefaults()
    actual = {
        **{f.name: getattr(guard, f.name) for f in dataclasses.fields(GuardOptions) if f.init and f.name != "namespace"},
        **{f.name: getattr(defaults, f.name) for f in dataclasses.fields(WorkerDefaults)},
    }
    stated = {_snake(name): _literal(code) for name, code in documented.items() if name not in TYPESCRIPT_ONLY}
    assert stated.pop("on_in_flight") == "park" and actual.pop("on_in_flight") == "wait"
    assert actual == stated
    # The two Python has not are named as TypeScript's alone.
    assert "No local artifact cache" in PYTHON_README and "No `resume_window_ms`" in PYTHON_README
