"""``@fire_once`` refuses, when the activity is marked, a policy that returns ``None`` in place of
the value the activity is annotated to return: ``on_in_flight='skip'`` (returns ``None`` without
running) and an external artifact (fast-forwards to ``None``). TypeScript types only let them on
activities that return ``Promise<void>``; a Python caller typed ``str`` got ``None``."""

from __future__ import annotations

import types
from typing import Any, Callable, Optional

import pytest
from temporalio import activity

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
