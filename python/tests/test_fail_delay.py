"""The retry delay of ``'fail'`` (``test/worker/fail-delay.test.ts``): half the holder's run so far,
at most the lock's TTL left, with no fixed cap."""

from __future__ import annotations

from datetime import timedelta

from temporal_fire_once.core import FireOnceInFlight, Held
from temporal_fire_once.worker.failures import to_application_error
from temporal_fire_once.worker.in_flight import fail_retry_delay

NOW = 1_000_000_000_000


def held(ttl_ms: int, started_ago_ms: int) -> Held:
    """A lock held for ``started_ago_ms``: its fencing token is the holder's start in µs."""
    return Held(ttl_ms, "lock", "holder", False, (NOW - started_ago_ms) * 1000)


def test_it_is_half_the_time_the_holder_has_run_at_least_100_ms() -> None:
    assert fail_retry_delay(held(30_000, 4_000), NOW) == 2_000
    assert fail_retry_delay(held(30_000, 50), NOW) == 100


def test_it_never_outlasts_the_locks_ttl_left_and_is_not_capped_at_10_s() -> None:
    assert fail_retry_delay(held(30_000, 50_000), NOW) == 25_000
    assert fail_retry_delay(held(3_000, 50_000), NOW) == 3_000


def test_it_copes_with_a_holder_clock_ahead_of_this_one() -> None:
    assert fail_retry_delay(held(30_000, -5_000), NOW) == 100


def test_the_activity_failure_asks_for_it_as_next_retry_delay() -> None:
    assert to_application_error(FireOnceInFlight("busy", 25_000)).next_retry_delay == timedelta(seconds=25)
    assert to_application_error(FireOnceInFlight("busy", 0)).next_retry_delay == timedelta(milliseconds=100)
