"""Schedule slots every replica computes alike (syncd.daemon.slots): pure functions."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncd.config import Schedule
from syncd.daemon.slots import due_slot, jitter_for, next_slot, not_before

T0 = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)


def test_every_slots_lie_on_the_epoch_grid_and_a_new_job_runs_now() -> None:
    every = Schedule(every=60)
    assert due_slot(every, None, T0 + timedelta(seconds=42), T0) == T0  # the current grid slot: run now
    assert due_slot(every, T0, T0 + timedelta(seconds=59), T0) is None  # the next one lies ahead
    assert due_slot(every, T0, T0 + timedelta(seconds=60), T0) == T0 + timedelta(seconds=60)


def test_missed_slots_collapse_into_the_latest() -> None:
    every = Schedule(every=60)
    assert due_slot(every, T0, T0 + timedelta(minutes=10, seconds=5), T0) == T0 + timedelta(minutes=10)
    hourly = Schedule(cron="0 * * * *")
    assert due_slot(hourly, T0, T0 + timedelta(hours=5, minutes=30), T0) == T0 + timedelta(hours=5)


def test_a_new_cron_job_waits_for_its_first_time_after_the_replica_started() -> None:
    hourly = Schedule(cron="0 * * * *")
    started = T0 + timedelta(minutes=10)
    assert due_slot(hourly, None, started + timedelta(minutes=49), started) is None
    assert due_slot(hourly, None, T0 + timedelta(hours=1, seconds=1), started) == T0 + timedelta(hours=1)


def test_the_next_slot_is_the_due_one_else_the_first_after_the_last_offered() -> None:
    """What /jobs shows as a fleet job's next run (before jitter and backoff)."""
    every, hourly = Schedule(every=60), Schedule(cron="0 * * * *")
    assert next_slot(every, None, T0 + timedelta(seconds=42), T0) == T0  # due now
    assert next_slot(every, T0, T0 + timedelta(seconds=42), T0) == T0 + timedelta(seconds=60)
    assert next_slot(hourly, T0, T0 + timedelta(minutes=10), T0) == T0 + timedelta(hours=1)
    assert next_slot(hourly, None, T0 + timedelta(minutes=10), T0 + timedelta(minutes=5)) == T0 + timedelta(hours=1)
    assert next_slot(hourly, T0, T0 + timedelta(hours=2, minutes=1), T0) == T0 + timedelta(hours=2)  # missed: the latest, due


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(1, 7200))
def test_replicas_asking_at_different_times_agree_on_the_slot(a: int, b: int, every: int) -> None:
    """Two replicas that read the same last slot offer the same slot, or one of them none yet."""
    schedule = Schedule(every=every)
    last = T0
    mine, theirs = (due_slot(schedule, last, T0 + timedelta(seconds=s), T0) for s in (a, b))
    if mine is not None and theirs is not None and abs(a - b) < every:
        assert abs((mine - theirs).total_seconds()) in (0, every)  # at most a grid boundary apart
    for slot in (mine, theirs):
        assert slot is None or ((slot - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() % every == 0 and slot > last)


def test_jitter_is_the_same_everywhere_and_within_bounds() -> None:
    values = {jitter_for("job", T0 + timedelta(minutes=n), 30.0) for n in range(50)}
    assert all(timedelta(0) <= v <= timedelta(seconds=30) for v in values) and len(values) > 40
    assert jitter_for("job", T0, 30.0) == jitter_for("job", T0, 30.0) != jitter_for("other", T0, 30.0)
    assert jitter_for("job", T0, 0.0) == timedelta(0)


def test_failures_push_the_slot_back_by_the_daemons_backoff() -> None:
    schedule = Schedule(every=60)
    failed_at = T0 + timedelta(seconds=5)
    assert not_before("job", schedule, T0, 0, None, 30.0) == T0
    assert not_before("job", schedule, T0, 1, failed_at, 30.0) == failed_at + timedelta(seconds=30)
    assert not_before("job", schedule, T0, 3, failed_at, 30.0) == failed_at + timedelta(seconds=120)


def test_a_cron_slot_follows_the_last_offered_one_not_the_replicas_start() -> None:
    """A replica started after the fleet's last slot still runs the slots since that one; one
    started before a slot another replica offered shows the slot after that one as next."""
    quarterly = Schedule(cron="*/15 * * * *")
    now = T0 + timedelta(minutes=21)
    assert due_slot(quarterly, T0, now, T0 + timedelta(minutes=20)) == T0 + timedelta(minutes=15)
    assert next_slot(quarterly, T0 + timedelta(minutes=15), now, T0) == T0 + timedelta(minutes=30)


def test_a_slot_is_due_at_its_own_instant() -> None:
    hourly = Schedule(cron="0 * * * *")
    assert due_slot(hourly, T0, T0 + timedelta(hours=1), T0) == T0 + timedelta(hours=1)  # not a tick later
    assert due_slot(hourly, T0, T0 + timedelta(hours=3), T0) == T0 + timedelta(hours=3)  # the latest, reached exactly


def test_jitter_delays_the_slot_over_its_whole_range_whatever_its_size() -> None:
    schedule = Schedule(every=60, jitter=0.5)  # below one second it still jitters
    starts = [not_before("job", schedule, T0 + timedelta(minutes=n), 0, None, 30.0) - (T0 + timedelta(minutes=n)) for n in range(200)]
    assert all(timedelta(0) <= s <= timedelta(seconds=0.5) for s in starts)
    assert max(starts) > timedelta(seconds=0.45) and min(starts) < timedelta(seconds=0.05)  # the whole range, not half of it
    later = [not_before("job", schedule, T0, 0, None, 30.0), not_before("other", schedule, T0, 0, None, 30.0)]
    assert later[0] != later[1]  # drawn from the job, and from the slot (above)


def test_backoff_counts_only_with_failures_and_uses_the_configured_base() -> None:
    schedule = Schedule(every=60)
    failed_at = T0 + timedelta(seconds=5)
    assert not_before("job", schedule, T0, 0, failed_at, 30.0) == T0  # a failure time without failures: no backoff
    assert not_before("job", schedule, T0, 1, failed_at, 2.0) == failed_at + timedelta(seconds=2)


def test_replicas_in_different_local_time_zones_draw_the_same_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = []
    try:
        for zone in ("UTC", "Europe/Berlin", "America/New_York"):
            monkeypatch.setenv("TZ", zone)
            time.tzset()
            drawn.append(jitter_for("job", T0, 30.0))
    finally:
        monkeypatch.undo()
        time.tzset()
    assert len(set(drawn)) == 1, drawn
