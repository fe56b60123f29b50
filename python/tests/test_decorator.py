"""``@fire_once`` refuses, when the activity is marked, a policy that returns ``None`` in place of
the value the activity is annotated to return: ``on_in_flight='skip'`` (returns ``None`` without
running) and an external artifact (fast-forwards to ``None``). TypeScript types only let them on
activities that return ``Promise<void>``; a Python caller typed ``str`` got ``None``."""

from __future__ import annotations

import types
from typing import Any, Callable, Optional

import pytest
from temporalio import activity, workflow

from temporal_fire_once import ExternalArtifact, FireOnceConfigError, fire_once

EXTERNAL = ExternalArtifact(external=lambda ids: f"jobs:{ids.scope}")


def fresh(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A copy of ``fn`` that no test has marked yet (marking one twice is refused)."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__annotations__ = dict(fn.__annotations__)
    copy.__qualname__ = fn.__qualname__
    return copy


async def returns_text(text: str) -> str:
    return text


async def returns_a_dict(text: str) -> dict[str, Any]:
    return {"text": text}


@pytest.mark.parametrize("options", [{"on_in_flight": "skip"}, {"artifact": EXTERNAL}], ids=["skip", "external"])
@pytest.mark.parametrize("fn", [returns_text, returns_a_dict], ids=["str", "dict"])
def test_a_policy_that_returns_none_is_refused_on_an_activity_annotated_to_return_a_value(fn: Callable[..., Any], options: dict[str, Any]) -> None:
    with pytest.raises(FireOnceConfigError, match=rf"{fn.__name__} is annotated to return .*, but .* returns None"):
        fire_once(**options)(activity.defn(fresh(fn)))


async def returns_none(text: str) -> None:
    pass


async def not_annotated(text):  # type: ignore[no-untyped-def]
    pass


async def returns_optional(text: str) -> Optional[str]:
    return None


async def returns_a_union_with_none(text: str) -> str | None:
    return None


async def returns_any(text: str) -> Any:
    return None


class Jobs:
    async def send(self, text: str) -> None:
        pass


@pytest.mark.parametrize("options", [{"on_in_flight": "skip"}, {"artifact": EXTERNAL}], ids=["skip", "external"])
@pytest.mark.parametrize("fn", [returns_none, not_annotated, returns_optional, returns_a_union_with_none, returns_any, Jobs.send])
def test_it_is_accepted_on_one_whose_callers_may_get_none(fn: Callable[..., Any], options: dict[str, Any]) -> None:
    copy = fresh(fn)
    assert fire_once(**options)(copy) is copy


def test_other_policies_take_any_annotation() -> None:
    copy = fresh(returns_text)
    assert fire_once(on_in_flight="fail")(copy) is copy


def test_fire_once_without_parentheses_is_refused_naming_the_fix() -> None:
    with pytest.raises(FireOnceConfigError, match=r"^fire_once: write @fire_once\(\) with parentheses .*, not @fire_once, above returns_text$"):
        fire_once(activity.defn(fresh(returns_text)))


def test_fire_once_on_a_bound_method_is_refused_naming_the_fix() -> None:
    jobs = Jobs()
    with pytest.raises(FireOnceConfigError, match=r"^fire_once: Jobs\.send is a bound method, .* decorate it in its class"):
        fire_once()(jobs.send)
    assert not hasattr(Jobs.send, "__temporal_fire_once__")  # neither the class nor another instance is marked


@pytest.mark.parametrize(
    ("target", "problem"),
    [(5, "a value of type int is not a function"), (None, "a value of type NoneType is not a function"), (Jobs, "Jobs is a class")],
)
def test_fire_once_on_a_value_or_a_class_is_refused_naming_it(target: Any, problem: str) -> None:
    with pytest.raises(FireOnceConfigError, match=rf"^fire_once: {problem}: it guards an activity"):
        fire_once()(target)


@workflow.defn(sandboxed=False)
class MarkedAbove:
    @fire_once()
    @workflow.run
    async def run(self) -> str:
        return "ran"


@workflow.defn(sandboxed=False)
class MarkedBelow:
    @workflow.run
    @fire_once()
    async def run(self) -> str:
        return "ran"


class _MarkedBase:
    @fire_once()
    async def step(self) -> str:
        return "ran"


@workflow.defn(sandboxed=False)
class MarkedInherited(_MarkedBase):
    @workflow.run
    async def run(self) -> str:
        return await self.step()


class _Unmarked(_MarkedBase):
    async def step(self) -> str:  # overrides the marked method: nothing marked is left
        return "ran"


@workflow.defn(sandboxed=False)
class MarkedOverridden(_Unmarked):
    @workflow.run
    async def run(self) -> str:
        return await self.step()


def test_a_worker_whose_workflow_has_or_inherits_a_method_marked_fire_once_is_refused_whichever_order_the_decorators_are_in(
    client: Any, prefix: str
) -> None:
    """The guard runs around activities: a mark on a workflow's method would guard nothing."""
    from temporal_fire_once import FireOncePlugin

    stub: Any = types.SimpleNamespace(namespace="default", data_converter=types.SimpleNamespace(payload_codec=None))
    plugin = FireOncePlugin(client, key_prefix=prefix)
    for cls, method in ((MarkedAbove, "run"), (MarkedBelow, "run"), (MarkedInherited, "step")):
        with pytest.raises(FireOnceConfigError, match=rf"^fire_once: .*{cls.__name__}\.{method} is a method of a workflow, which @fire_once\(\) does not guard"):
            plugin.configure_worker({"client": stub, "workflows": [cls], "task_queue": "q"})
    # A subclass that overrides the marked method leaves nothing marked: the check passes it.
    from temporal_fire_once.worker.decorator import refuse_marked_workflow_methods

    refuse_marked_workflow_methods([MarkedOverridden])
