"""Histories that each earlier release's Python package recorded (``tests/compat_record.py``, from
the release's commit) replay on HEAD: what a fleet upgraded one worker at a time does to every open
workflow."""

from __future__ import annotations

import json
from typing import Any

import pytest
from redis.asyncio import Redis
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from temporal_fire_once import FireOncePlugin

from .compat_record import histories_dir
from .compat_workflows import WORKFLOWS
from .release_package import RELEASES

MAIN_SHAPES = [
    "child",
    "continue-as-new-first",
    "continue-as-new-last",
    "fast-forwards",
    "fires",
    "holder",
    "local-beside-remote",
    "local-holder",
    "local-retried",
    "local-waiter",
    "parent",
    "retried",
    "waiter",
]
HAND_OFF_SHAPES = ["local-cancelled-handed-off", "local-handed-off"]
"""0.9.0 on: a local activity's wait handed off as its worker stopped, and one cancelled across the
hand-off (0.9.0: no patch marker, it lost the cancel, defect 168; 0.10.0: under the patch
temporal-fire-once-hand-off-cancel, its marker recorded)."""
SHAPES = {"0.8.0": MAIN_SHAPES, **{version: sorted([*MAIN_SHAPES, *HAND_OFF_SHAPES]) for version in ("0.9.0", "0.10.0")}}
"""Every shape each release recorded: a missing file fails the test, as a failed replay would."""


def recorded(version: str) -> dict[str, dict[str, Any]]:
    """The JSON histories ``version`` recorded, by name, in name order."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(histories_dir(version).glob("*.json"))}


def as_history(raw: dict[str, Any]) -> WorkflowHistory:
    """A history under the workflow ID it ran with (a child's ID derives from it)."""
    return WorkflowHistory.from_json(raw["events"][0]["workflowExecutionStartedEventAttributes"]["workflowId"], raw)


async def replay_failures(client: Redis, prefix: str, histories: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Replay each history with HEAD's plugin (its workflow interceptor); each failure, by name."""
    replayer = Replayer(workflows=WORKFLOWS, plugins=[FireOncePlugin(client, key_prefix=prefix)])
    failures: dict[str, str] = {}
    for name, raw in histories.items():
        result = await replayer.replay_workflow(as_history(raw), raise_on_replay_failure=False)
        if result.replay_failure is not None:
            failures[name] = repr(result.replay_failure)
    return failures


@pytest.mark.parametrize("version", list(RELEASES))
async def test_histories_recorded_by_each_release_replay_on_heads_plugin_with_no_nondeterminism_each_shape(client: Redis, prefix: str, version: str) -> None:
    assert list(SHAPES) == list(RELEASES)
    histories = recorded(version)
    assert list(histories) == SHAPES[version]
    assert await replay_failures(client, prefix, histories) == {}


@pytest.mark.parametrize("version", list(RELEASES))
async def test_the_control_a_recorded_history_that_no_longer_matches_the_code_fails_to_replay(client: Redis, prefix: str, version: str) -> None:
    fires = recorded(version)["fires"]
    scheduled = next(e for e in fires["events"] if "activityTaskScheduledEventAttributes" in e)
    scheduled["activityTaskScheduledEventAttributes"]["activityType"]["name"] = "anotherJob"
    failures = await replay_failures(client, prefix, {"fires": fires})
    assert list(failures) == ["fires"] and "Nondeterminism" in failures["fires"]


pytestmark = pytest.mark.asyncio
