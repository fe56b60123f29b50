"""Build hook: the Lua scripts are not copied into git, so a build from the repository takes them
from the TypeScript package's single source (../src/core/scripts). A build from the sdist finds
them where this hook put them, in temporal_fire_once/scripts, and needs nothing more. An editable
install reads the source in place (temporal_fire_once/core/scripts.py), so it gets no copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        source = Path(self.root).parent / "src" / "core" / "scripts"
        if source.is_dir():
            build_data["force_include"][str(source)] = "temporal_fire_once/scripts"
