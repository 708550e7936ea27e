"""The daemon's pure scheduling core: cron parsing and next times, intervals with jitter,
and the per-job timer (backoff, coalesced triggers, trigger-only jobs)."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncd.config import Schedule
from syncd.daemon.schedule import (
    BACKOFF_CAP,
    CronExpression,
    JobTimer,
    failure_backoff,
    next_run,
)


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def nxt(expr: str, dt: datetime) -> datetime:
    return CronExpression.parse(expr).next_after(dt)


# --------------------------------------------------------------------------- cron parsing


def times(expr: str, after: datetime, count: int, timezone: str = "UTC") -> list[datetime]:
    """The next `count` times of `expr` after `after`, in UTC."""
    cron = CronExpression.parse(expr, timezone)
    found = []
    for _ in range(count):
        after = cron.next_after(after)
        found.append(after)
    return found


def test_parse_normalises_spaces_and_keeps_the_text() -> None:
    assert str(CronExpression.parse("*/15  1-3,7 1,15 */4 1-5/2")) == "*/15 1-3,7 1,15 */4 1-5/2"
    assert str(CronExpression.parse("0 9 * * mon-FRI")) == "0 9 * * mon-FRI"  # as written, shown so
    assert str(CronExpression.parse(" @Daily ")) == "@daily"


def test_fields_steps_and_ranges() -> None:
    # 2025-01-01 is a Wednesday; day-of-month 1,15 OR weekday Mon/Wed/Fri (both restricted).
    got = times("*/15 1-3,7 1,15 */4 1-5/2", at(2024, 12, 31, 23), 17)
    assert got[:16] == [at(2025, 1, 1, h, m) for h in (1, 2, 3, 7) for m in (0, 15, 30, 45)]
    assert got[16] == at(2025, 1, 3, 1)  # Friday the 3rd; months 1, 5, 9 only
    assert times("0 0 1 */4 *", at(2025, 1, 2), 3) == [at(2025, 5, 1), at(2025, 9, 1), at(2026, 1, 1)]


def test_single_number_with_step_runs_to_field_end() -> None:
    assert times("50/5 * * * *", at(2025, 5, 6, 7), 3) == [at(2025, 5, 6, 7, 50), at(2025, 5, 6, 7, 55), at(2025, 5, 6, 8, 50)]


def test_a_stepped_range_of_one_value_is_that_value() -> None:
    """cronsim 2.8 reads `5-5/2` as `5/2` (5, 7, ... 59): syncd hands it `5`."""
    assert times("5-5/2 * * * *", at(2025, 5, 6, 7), 2) == [at(2025, 5, 6, 7, 5), at(2025, 5, 6, 8, 5)]
    assert times("0 0 * * MON-mon/3", at(2025, 5, 6), 2) == [at(2025, 5, 12), at(2025, 5, 19)]


def test_sunday_is_0_7_and_sun() -> None:
    sundays = [at(2025, 5, 11, 9), at(2025, 5, 18, 9)]
    for dow in ("0", "7", "SUN", "sun"):
        assert times(f"0 9 * * {dow}", at(2025, 5, 6), 2) == sundays
    assert times("0 0 * * 5-7", at(2025, 5, 6), 3) == [at(2025, 5, 9), at(2025, 5, 10), at(2025, 5, 11)]


def test_month_and_weekday_names() -> None:
    weekdays = times("0 9 * * MON-FRI", at(2025, 5, 9, 10), 5)  # Friday evening
    assert weekdays == times("0 9 * * 1-5", at(2025, 5, 9, 10), 5)
    assert weekdays == [at(2025, 5, d, 9) for d in (12, 13, 14, 15, 16)]
    assert times("0 0 1 jan,JUL *", at(2025, 2, 1), 2) == [at(2025, 7, 1), at(2026, 1, 1)]
    assert times("0 0 1 JAN-MAR/2 *", at(2025, 1, 2), 2) == [at(2025, 3, 1), at(2026, 1, 1)]


@pytest.mark.parametrize(
    ("macro", "expected"),
    [
        ("@hourly", [at(2025, 5, 6, 8), at(2025, 5, 6, 9)]),
        ("@daily", [at(2025, 5, 7), at(2025, 5, 8)]),
        ("@midnight", [at(2025, 5, 7), at(2025, 5, 8)]),
        ("@weekly", [at(2025, 5, 11), at(2025, 5, 18)]),  # Sundays at midnight
        ("@monthly", [at(2025, 6, 1), at(2025, 7, 1)]),
        ("@yearly", [at(2026, 1, 1), at(2027, 1, 1)]),
        ("@annually", [at(2026, 1, 1), at(2027, 1, 1)]),
        ("@DAILY", [at(2025, 5, 7), at(2025, 5, 8)]),
    ],
)
def test_macros(macro: str, expected: list[datetime]) -> None:
    assert times(macro, at(2025, 5, 6, 7, 8), 2) == expected


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("@reboot", "unknown cron macro"),
        ("@every 5m", "unknown cron macro"),
        ("0 0 * * * *", "must have 5 fields"),  # seconds: jobs run by the minute
        ("0 9 * * MON-FRX", "bad day-of-week"),
        ("0 0 1 JANUARY *", "bad month"),
        ("0 0 * * FRI-MON", "bad day-of-week"),  # reversed
    ],
)
def test_parse_refuses_with_one_line(bad: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as caught:
        CronExpression.parse(bad)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("bad", ["* * * *", "*/0 * * * *", "60 * * * *", "5-1 * * * *", "a * * * *", "* * 0 * *"])
def test_parse_rejects_what_validate_cron_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        CronExpression.parse(bad)


# --------------------------------------------------------------------------- next_after


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("* * * * *", at(2025, 5, 6, 7, 8, 30), at(2025, 5, 6, 7, 9)),
        ("* * * * *", at(2025, 5, 6, 7, 8), at(2025, 5, 6, 7, 9)),  # strictly after
        ("*/15 * * * *", at(2025, 5, 6, 7, 8), at(2025, 5, 6, 7, 15)),
        ("*/15 * * * *", at(2025, 5, 6, 7, 45), at(2025, 5, 6, 8, 0)),
        ("*/15 * * * *", at(2025, 12, 31, 23, 50), at(2026, 1, 1, 0, 0)),
        ("30 9-17 * * *", at(2025, 5, 6, 17, 30), at(2025, 5, 7, 9, 30)),
        ("10-20/5 * * * *", at(2025, 5, 6, 7, 16), at(2025, 5, 6, 7, 20)),
        ("0 12,18 * * *", at(2025, 5, 6, 12, 0), at(2025, 5, 6, 18, 0)),
        ("0 0 31 * *", at(2025, 4, 1), at(2025, 5, 31)),  # April has no 31st
        ("0 0 1 * *", at(2025, 1, 31, 23, 59), at(2025, 2, 1)),
        ("0 0 1 1 *", at(2025, 1, 1), at(2026, 1, 1)),
        ("15 3 * 3,10 *", at(2025, 4, 2), at(2025, 10, 1, 3, 15)),
        ("0 0 29 2 *", at(2025, 3, 1), at(2028, 2, 29)),  # next leap day
        ("0 0 29 2 *", at(2024, 2, 28, 12), at(2024, 2, 29)),
        ("0 0 29 2 *", at(2097, 1, 1), at(2104, 2, 29)),  # 2100 is not a leap year
        ("0 9 * * 1", at(2025, 5, 6), at(2025, 5, 12, 9)),  # 2025-05-06 is a Tuesday
        ("0 9 * * 0", at(2025, 5, 6), at(2025, 5, 11, 9)),  # Sunday as 0
        ("0 9 * * 7", at(2025, 5, 6), at(2025, 5, 11, 9)),  # Sunday as 7
        ("0 9 * * 1-5", at(2025, 5, 9, 10), at(2025, 5, 12, 9)),  # Friday evening -> Monday
        # day-of-month and day-of-week both restricted: either matches
        ("0 0 13 * 5", at(2025, 5, 6), at(2025, 5, 9)),  # Friday 9th before the 13th
        ("0 0 13 * 5", at(2025, 5, 9), at(2025, 5, 13)),  # the 13th (a Tuesday)
        # one of them is '*' (or '*/n'): both must match
        ("0 0 * * 5", at(2025, 5, 10), at(2025, 5, 16)),
        ("0 0 */2 * 5", at(2025, 5, 6), at(2025, 5, 9)),  # 9th: odd day, Friday
        ("0 0 */2 * 5", at(2025, 5, 9), at(2025, 5, 23)),  # not the 16th (even day)
        ("0 0 13 * *", at(2025, 5, 6), at(2025, 5, 13)),
    ],
)
def test_next_after(expr: str, after: datetime, expected: datetime) -> None:
    got = nxt(expr, after)
    assert got == expected
    assert got.tzinfo == UTC
    assert CronExpression.parse(expr).matches(got)


def test_next_after_converts_other_timezones_to_utc() -> None:
    plus2 = timezone(timedelta(hours=2))
    got = nxt("0 * * * *", datetime(2025, 5, 6, 10, 30, tzinfo=plus2))  # 08:30 UTC
    assert got == at(2025, 5, 6, 9, 0)
    assert got.utcoffset() == timedelta(0)


def test_next_after_refuses_naive_datetimes() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        nxt("* * * * *", datetime(2025, 1, 1))


@pytest.mark.parametrize("expr", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"])
def test_impossible_date_is_refused_when_read(expr: str) -> None:
    with pytest.raises(ValueError, match="never comes in month .*: the job would never run"):
        CronExpression.parse(expr)
    with pytest.raises(ValueError, match="would never run"):
        Schedule(cron=expr)


def test_a_rare_date_is_found() -> None:
    """A February with five Mondays (it starts on a Monday in a leap year): 2016, then 2044."""
    assert nxt("0 0 * 2 MON#5", at(2016, 3, 1)) == at(2044, 2, 29)


def test_impossible_day_is_possible_through_day_of_week() -> None:
    # 30 Feb never exists, but with a restricted day-of-week either one matches.
    assert nxt("0 0 30 2 1", at(2025, 1, 1)) == at(2025, 2, 3)


def test_yearly_expression_is_not_brute_forced() -> None:
    cron = CronExpression.parse("59 23 31 12 *")
    started = time.perf_counter()
    for year in range(2000, 2100):
        assert cron.next_after(at(year, 1, 1)) == at(year, 12, 31, 23, 59)
    assert time.perf_counter() - started < 1.0


# --------------------------------------------------------------------------- property

_FIELD_RANGES = {"minute": (0, 59), "hour": (0, 23), "dom": (1, 31), "month": (1, 12), "dow": (0, 7)}


@st.composite
def cron_field(draw: st.DrawFn, name: str) -> tuple[str, set[int], bool]:
    """A random field as (text, values it allows, whether it starts with '*'),
    the values computed independently of the implementation's parser."""
    low, high = _FIELD_RANGES[name]
    if draw(st.booleans()):
        step = draw(st.sampled_from([1, 1, 2, 3, 5, 7]))
        text = "*" if step == 1 else f"*/{step}"
        return text, set(range(low, high + 1, step)), True
    items: list[str] = []
    values: set[int] = set()
    for _ in range(draw(st.integers(1, 3))):
        a = draw(st.integers(low, high))
        kind = draw(st.sampled_from(["num", "range", "range-step"]))
        if kind == "num":
            items.append(str(a))
            values.add(a)
        else:
            b = draw(st.integers(a, high))
            step = draw(st.integers(1, 4)) if kind == "range-step" else 1
            items.append(f"{a}-{b}" if kind == "range" else f"{a}-{b}/{step}")
            values.update(range(a, b + 1, step))
    return ",".join(items), values, False


@st.composite
def cron_expressions(draw: st.DrawFn) -> tuple[str, dict[str, set[int]], bool]:
    fields = {name: draw(cron_field(name)) for name in _FIELD_RANGES}
    text = " ".join(fields[name][0] for name in _FIELD_RANGES)
    sets = {name: fields[name][1] for name in _FIELD_RANGES}
    sets["dow"] = {d % 7 for d in sets["dow"]}
    either = not fields["dom"][2] and not fields["dow"][2]
    return text, sets, either


def _ref_day(sets: dict[str, set[int]], either: bool, day: datetime) -> bool:
    if day.month not in sets["month"]:
        return False
    in_dom = day.day in sets["dom"]
    in_dow = day.isoweekday() % 7 in sets["dow"]
    return (in_dom or in_dow) if either else (in_dom and in_dow)


@settings(max_examples=250, deadline=None)
@given(
    expr=cron_expressions(),
    after=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)),
)
def test_next_after_is_the_first_match_strictly_after(
    expr: tuple[str, dict[str, set[int]], bool], after: datetime
) -> None:
    text, sets, either = expr
    day = datetime(after.year, after.month, after.day, tzinfo=UTC)
    try:
        got = CronExpression.parse(text).next_after(after)
    except ValueError:
        # Only allowed when no day matches (`0 0 30 2 *` is refused when read): none in 10 years.
        for offset in range(366 * 10):
            assert not _ref_day(sets, either, day + timedelta(days=offset)), text
        return
    assert got > after
    assert got.second == 0 and got.microsecond == 0
    assert got.minute in sets["minute"] and got.hour in sets["hour"]
    assert _ref_day(sets, either, got)
    # Enumerate every matching minute day by day between `after` and `got`: none may be earlier.
    while day <= got:
        if _ref_day(sets, either, day):
            for hour in sorted(sets["hour"]):
                for minute in sorted(sets["minute"]):
                    candidate = day.replace(hour=hour, minute=minute)
                    assert not after < candidate < got, (text, after, got, candidate)
        day += timedelta(days=1)


# --------------------------------------------------------------------------- next_run


def test_every_without_jitter() -> None:
    sched = Schedule(every="15m")
    rng = random.Random(1)
    now = at(2025, 5, 6, 12)
    assert next_run(sched, None, now, rng) == now  # never ran: now
    assert next_run(sched, at(2025, 5, 6, 11, 50), now, rng) == at(2025, 5, 6, 12, 5)
    # overdue (daemon was down): one run, now-ish, not one per missed interval
    assert next_run(sched, at(2025, 5, 6, 9), now, rng) == at(2025, 5, 6, 9, 15)


def test_every_with_jitter_stays_in_bounds_and_is_deterministic() -> None:
    sched = Schedule(every="1h", jitter="5m")
    last = at(2025, 5, 6, 11)
    now = at(2025, 5, 6, 11, 30)
    base = at(2025, 5, 6, 12)
    rng = random.Random(42)
    runs = [next_run(sched, last, now, rng) for _ in range(500)]
    assert all(base <= r <= base + timedelta(minutes=5) for r in runs)
    assert len(set(runs)) > 400  # really jittered
    assert max(runs) - min(runs) > timedelta(minutes=4)
    again = random.Random(42)
    assert [next_run(sched, last, now, again) for _ in range(500)] == runs


def test_cron_next_run_uses_later_of_now_and_last_start() -> None:
    sched = Schedule(cron="0 * * * *")
    rng = random.Random(0)
    assert next_run(sched, None, at(2025, 5, 6, 12, 10), rng) == at(2025, 5, 6, 13)
    assert next_run(sched, at(2025, 5, 6, 9, 0), at(2025, 5, 6, 12, 10), rng) == at(2025, 5, 6, 13)
    # a start slightly in the "future" (clock skew) never yields the same slot again
    assert next_run(sched, at(2025, 5, 6, 13, 0), at(2025, 5, 6, 12, 59), rng) == at(2025, 5, 6, 14)


def test_cron_next_run_with_jitter() -> None:
    sched = Schedule(cron="0 * * * *", jitter="30s")
    rng = random.Random(7)
    got = [next_run(sched, None, at(2025, 5, 6, 12, 10), rng) for _ in range(200)]
    assert all(at(2025, 5, 6, 13) <= g <= at(2025, 5, 6, 13, 0, 30) for g in got)
    assert len(set(got)) > 150


# --------------------------------------------------------------------------- JobTimer


def test_failure_backoff_doubles_and_caps() -> None:
    assert [failure_backoff(n) for n in range(6)] == [0.0, 30.0, 60.0, 120.0, 240.0, 480.0]
    assert failure_backoff(7) == 1920.0
    assert failure_backoff(8) == BACKOFF_CAP
    assert failure_backoff(10_000) == BACKOFF_CAP


def test_timer_due_start_finish_every() -> None:
    rng = random.Random(0)
    now = at(2025, 5, 6, 12)
    timer = JobTimer.create(Schedule(every="10m"), now, rng)
    assert timer.due(now)  # never ran: due immediately
    timer.start(now)
    assert timer.running and not timer.due(now + timedelta(hours=1))
    with pytest.raises(RuntimeError):
        timer.start(now)  # one run at a time
    timer.finish(now + timedelta(minutes=2), ok=True, rng=rng)
    assert not timer.running
    assert timer.next_due == at(2025, 5, 6, 12, 10)  # start to start
    assert not timer.due(at(2025, 5, 6, 12, 9, 59))
    assert timer.due(at(2025, 5, 6, 12, 10))


def test_timer_create_respects_known_last_start() -> None:
    rng = random.Random(0)
    timer = JobTimer.create(Schedule(every="1h"), at(2025, 5, 6, 12), rng, last_start=at(2025, 5, 6, 11, 30))
    assert timer.next_due == at(2025, 5, 6, 12, 30)


def test_finish_without_start_is_an_error() -> None:
    timer = JobTimer.create(Schedule(every="1h"), at(2025, 1, 1), random.Random(0))
    with pytest.raises(RuntimeError):
        timer.finish(at(2025, 1, 1), ok=True, rng=random.Random(0))


def test_failures_back_off_exponentially_capped_and_success_resets() -> None:
    rng = random.Random(0)
    now = at(2025, 5, 6, 12)
    timer = JobTimer.create(Schedule(every="10s"), now, rng)
    waits = []
    for _ in range(10):
        timer.start(now)
        timer.finish(now, ok=False, rng=rng)
        assert timer.next_due is not None
        waits.append((timer.next_due - now).total_seconds())
        now = timer.next_due
    assert waits == [30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]
    assert timer.consecutive_failures == 10
    timer.start(now)
    timer.finish(now, ok=True, rng=rng)
    assert timer.consecutive_failures == 0
    assert timer.next_due == now + timedelta(seconds=10)  # back on schedule
    timer.start(now)
    timer.finish(now, ok=False, rng=rng)
    assert timer.next_due == now + timedelta(seconds=30)  # backoff starts over


def test_failure_never_retries_before_next_schedule_time() -> None:
    rng = random.Random(0)
    now = at(2025, 5, 6, 12)
    timer = JobTimer.create(Schedule(every="2h"), now, rng)
    timer.start(now)
    timer.finish(now + timedelta(minutes=1), ok=False, rng=rng)
    assert timer.next_due == at(2025, 5, 6, 14)  # schedule is later than now + 30 s
    assert timer.consecutive_failures == 1


def test_failure_on_cron_schedule() -> None:
    rng = random.Random(0)
    timer = JobTimer.create(Schedule(cron="* * * * *"), at(2025, 5, 6, 12), rng)
    assert timer.next_due == at(2025, 5, 6, 12, 1)
    for _ in range(3):
        timer.start(at(2025, 5, 6, 12, 1))
        timer.finish(at(2025, 5, 6, 12, 1, 5), ok=False, rng=rng)
    # third failure: 120 s backoff beats the next cron minute
    assert timer.next_due == at(2025, 5, 6, 12, 3, 5)


def test_triggers_during_a_run_coalesce_into_one_follow_up() -> None:
    rng = random.Random(0)
    now = at(2025, 5, 6, 12)
    timer = JobTimer.create(Schedule(every="1h"), now, rng)
    timer.start(now)
    assert timer.trigger(now + timedelta(seconds=1)) == "coalesced"
    assert timer.trigger(now + timedelta(seconds=2)) == "coalesced"
    assert timer.pending_trigger
    done = now + timedelta(minutes=5)
    timer.finish(done, ok=True, rng=rng)
    assert not timer.pending_trigger
    assert timer.next_due == done and timer.due(done)
    timer.start(done)  # the single follow-up run
    timer.finish(done + timedelta(minutes=1), ok=True, rng=rng)
    assert timer.next_due == done + timedelta(hours=1)  # back to the schedule: no second extra run
    assert not timer.due(done + timedelta(minutes=2))


def test_pending_trigger_overrides_failure_backoff() -> None:
    rng = random.Random(0)
    now = at(2025, 5, 6, 12)
    timer = JobTimer.create(Schedule(every="1h"), now, rng)
    timer.start(now)
    timer.trigger(now)
    timer.finish(now + timedelta(seconds=5), ok=False, rng=rng)
    assert timer.next_due == now + timedelta(seconds=5)
    assert timer.consecutive_failures == 1


def test_trigger_when_idle_schedules_now() -> None:
    rng = random.Random(0)
    now = at(2025, 5, 6, 12)
    timer = JobTimer.create(Schedule(cron="0 0 * * *"), now, rng)
    assert not timer.due(now)
    assert timer.trigger(now) == "scheduled"
    assert timer.next_due == now and timer.due(now)
    assert timer.trigger(now + timedelta(seconds=1)) == "scheduled"  # still one run
    assert timer.next_due == now


def test_unscheduled_job_runs_only_on_trigger() -> None:
    rng = random.Random(0)
    now = at(2025, 5, 6, 12)
    timer = JobTimer.create(None, now, rng)
    assert timer.next_due is None
    assert not timer.due(now + timedelta(days=365))
    assert timer.trigger(now) == "scheduled"
    assert timer.due(now)
    timer.start(now)
    timer.finish(now + timedelta(minutes=1), ok=False, rng=rng)
    assert timer.next_due is None  # no schedule to retry on
    assert not timer.due(now + timedelta(days=365))
    timer.start(now + timedelta(days=1))
    assert timer.trigger(now + timedelta(days=1)) == "coalesced"
    timer.finish(now + timedelta(days=1, minutes=1), ok=True, rng=rng)
    assert timer.next_due == now + timedelta(days=1, minutes=1)


def test_reschedule_applies_new_schedule_when_idle() -> None:
    rng = random.Random(0)
    now = at(2025, 5, 6, 12)
    timer = JobTimer.create(Schedule(every="1h"), now, rng, last_start=at(2025, 5, 6, 11, 50))
    assert timer.next_due == at(2025, 5, 6, 12, 50)
    timer.reschedule(Schedule(every="15m"), now, rng)
    assert timer.next_due == at(2025, 5, 6, 12, 5)
    timer.reschedule(None, now, rng)
    assert timer.next_due is None
    timer.trigger(now)
    timer.reschedule(Schedule(every="1d"), now, rng)
    assert timer.due(now)  # a trigger already due survives the reload


def test_a_resumed_job_is_due_at_its_next_time_not_for_the_times_it_missed() -> None:
    """Issue 39: resuming after a long pause gives no run for the missed times (no burst, and
    not one catch-up run at once): the next time on the job's grid, or its next cron time."""
    rng = random.Random(0)
    timer = JobTimer.create(Schedule(every="10m"), at(2025, 5, 6, 12), rng, last_start=at(2025, 5, 6, 11, 55))
    timer.resume(at(2025, 5, 6, 14, 33), rng)  # paused for hours: a dozen times missed
    assert timer.next_due == at(2025, 5, 6, 14, 35)  # on the grid of its last start, after now
    never = JobTimer.create(Schedule(every="10m"), at(2025, 5, 6, 12), rng)
    never.resume(at(2025, 5, 6, 12, 1), rng)
    assert never.next_due == at(2025, 5, 6, 12, 11)
    cron = JobTimer.create(Schedule(cron="0 3 * * *"), at(2025, 5, 6, 12), rng, last_start=at(2025, 5, 1, 3))
    cron.resume(at(2025, 5, 6, 12), rng)
    assert cron.next_due == at(2025, 5, 7, 3)
    on_trigger = JobTimer.create(None, at(2025, 5, 6, 12), rng)
    on_trigger.resume(at(2025, 5, 6, 12), rng)
    assert on_trigger.next_due is None


def test_reschedule_keeps_a_failing_jobs_backoff() -> None:
    """A reload that shortens the schedule must not retry a failing job sooner than its backoff."""
    rng = random.Random(0)
    now = at(2025, 5, 6, 12)
    timer = JobTimer.create(Schedule(every="10s"), now, rng)
    for failures in range(1, 4):
        timer.start(now)
        now += timedelta(seconds=5)
        timer.finish(now, ok=False, rng=rng)
        assert timer.next_due == now + timedelta(seconds=failure_backoff(failures))
    backoff_end = timer.next_due
    assert backoff_end is not None
    timer.reschedule(Schedule(every="5s"), now, rng)
    assert timer.next_due == backoff_end
    timer.start(backoff_end)
    timer.finish(backoff_end + timedelta(seconds=1), ok=True, rng=rng)
    assert timer.retry_not_before is None
    timer.reschedule(Schedule(every="10s"), backoff_end + timedelta(seconds=1), rng)
    assert timer.next_due == backoff_end + timedelta(seconds=10)


def test_a_day_that_comes_back_rarely_is_found_near_the_horizon() -> None:
    """Tuesdays that fall on the 1st, 8th, ... of January: after 2020, the next is in 2030."""
    cron = CronExpression.parse("* 0 */7 1 2")
    assert cron.next_after(datetime(2020, 1, 1, tzinfo=UTC)) == datetime(2030, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------- time zones and DST
# Europe/Berlin: CET (+1) in winter, CEST (+2) in summer. In 2025 the clocks went forward on
# 30 March (02:00 CET -> 03:00 CEST, 01:00 UTC) and back on 26 October (03:00 CEST -> 02:00 CET,
# 01:00 UTC): 02:00-02:59 was skipped on the first and came twice on the second.

BERLIN = "Europe/Berlin"


def test_cron_is_read_in_the_schedules_time_zone() -> None:
    assert times("0 3 * * *", at(2025, 1, 10), 1, BERLIN) == [at(2025, 1, 10, 2)]  # 03:00 CET
    assert times("0 3 * * *", at(2025, 7, 10), 1, BERLIN) == [at(2025, 7, 10, 1)]  # 03:00 CEST
    assert times("0 9 * * MON-FRI", at(2025, 5, 9, 14), 1, "America/New_York") == [at(2025, 5, 12, 13)]  # Friday 10:00 EDT
    # "Monday" is Monday in the zone: 00:30 on Monday in Tokyo is still Sunday in UTC.
    assert times("30 0 * * MON", at(2025, 5, 6), 1, "Asia/Tokyo") == [at(2025, 5, 11, 15, 30)]


def test_next_run_uses_the_time_zone_of_the_schedule() -> None:
    sched = Schedule(cron="@daily", timezone="America/New_York")
    assert next_run(sched, None, at(2025, 5, 6, 12), random.Random(0)) == at(2025, 5, 7, 4)  # midnight EDT
    assert sched.describe() == "cron @daily in America/New_York"
    assert Schedule(cron="0 3 * * *").describe() == "cron 0 3 * * * in UTC"
    assert Schedule(every="15m", timezone=BERLIN).describe() == "every 15m"  # a zone changes no interval


def test_a_fixed_time_skipped_by_dst_runs_once_right_after_the_gap() -> None:
    # 02:30 does not exist on 30 March: the run is at 03:00 CEST (01:00 UTC), then 02:30 again.
    got = times("30 2 * * *", at(2025, 3, 29, 12), 3, BERLIN)
    assert got == [at(2025, 3, 30, 1), at(2025, 3, 31, 0, 30), at(2025, 4, 1, 0, 30)]


def test_a_fixed_time_repeated_by_dst_runs_the_first_time_only() -> None:
    got = times("30 2 * * *", at(2025, 10, 25, 12), 3, BERLIN)
    assert got == [at(2025, 10, 26, 0, 30), at(2025, 10, 27, 1, 30), at(2025, 10, 28, 1, 30)]
    # Asked during the second 02:xx (a restart at 02:10 CET, after the 02:30 CEST run): tomorrow.
    assert times("30 2 * * *", at(2025, 10, 26, 1, 10), 1, BERLIN) == [at(2025, 10, 27, 1, 30)]
    timer = JobTimer.create(Schedule(cron="30 2 * * *", timezone=BERLIN), at(2025, 10, 26, 0, 30), random.Random(0))
    assert timer.next_due == at(2025, 10, 27, 1, 30)  # strictly after now: 02:30 CEST is now


def test_a_wildcard_schedule_runs_by_the_real_clock_through_dst() -> None:
    # Every 30 minutes: four runs in the two real hours 02:00-02:59 CEST and CET...
    back = times("*/30 * * * *", at(2025, 10, 25, 23, 59), 5, BERLIN)
    assert back == [at(2025, 10, 26, 0), at(2025, 10, 26, 0, 30), at(2025, 10, 26, 1), at(2025, 10, 26, 1, 30), at(2025, 10, 26, 2)]
    # ... and none in the hour that does not exist: 01:30 CET, then 03:00 CEST.
    forward = times("*/30 * * * *", at(2025, 3, 30, 0, 15), 2, BERLIN)
    assert forward == [at(2025, 3, 30, 0, 30), at(2025, 3, 30, 1)]


@pytest.mark.parametrize("bad", ["Europe/Berln", "Mars/Olympus", "../../etc/passwd", "", "+02:00"])
def test_an_unknown_time_zone_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="time zone"):
        Schedule(cron="@daily", timezone=bad)
    with pytest.raises(ValueError, match="time zone"):
        CronExpression.parse("@daily", bad)
