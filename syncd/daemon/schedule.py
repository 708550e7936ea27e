"""Pure scheduling core of the daemon: cron expressions, next-run times, per-job timers.

No I/O, no asyncio, no clock: every function takes `now` (and an `random.Random` for
jitter), so the daemon's timing decisions are deterministic and testable in microseconds.
All datetimes are timezone-aware; results are in UTC (cron fields are read in UTC too).
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from syncd.config import Schedule, validate_cron

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "CRON_HORIZON_YEARS",
    "CronExpression",
    "JobTimer",
    "failure_backoff",
    "next_run",
]

BACKOFF_BASE = 30.0
"""Seconds of backoff after the first consecutive failure; doubles with each further one."""
BACKOFF_CAP = 3600.0
"""Backoff never exceeds an hour: a broken tenant is retried at least hourly."""
CRON_HORIZON_YEARS = 10
"""How far `next_after` looks before declaring an expression impossible.

Ten, not five: Feb 29 can be eight years away (2096 -> 2104, 2100 is no leap year).
"""

_MINUTE = timedelta(minutes=1)


def _require_aware(dt: datetime, name: str) -> datetime:
    """Naive datetimes are refused: a local-time mix-up would shift every schedule silently."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {dt!r}")
    return dt.astimezone(UTC)


def _expand(text: str, low: int, high: int) -> frozenset[int]:
    """Expand one (already validated) cron field into the set of values it allows.

    `a/n` (no range) means `a-high/n`, as in cronie; `*` spans the field's full range.
    """
    values: set[int] = set()
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            start, stop = low, high
        elif "-" in base:
            first, last = base.split("-")
            start, stop = int(first), int(last)
        else:
            start = int(base)
            stop = high if step_text else start
        values.update(range(start, stop + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A parsed 5-field cron expression (minute hour day-of-month month day-of-week), in UTC.

    Day-of-week is 0-7 with both 0 and 7 meaning Sunday. Day-of-month and day-of-week follow
    Vixie cron: if either field starts with `*` the day must match both (the `*` one matches
    anything); if both are restricted, a day matching EITHER is enough ("0 0 13 * 5" runs on
    every 13th and every Friday).
    """

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: tuple[int, ...]
    weekdays: frozenset[int]  # 0 = Sunday .. 6 = Saturday (7 folded into 0)
    dom_restricted: bool
    dow_restricted: bool

    @classmethod
    def parse(cls, expr: str) -> CronExpression:
        """Parse `expr` (syntax as accepted by `validate_cron`; ValueError otherwise)."""
        text = validate_cron(expr)
        minute, hour, dom, month, dow = text.split()
        weekdays = frozenset(d % 7 for d in _expand(dow, 0, 7))
        return cls(
            text=text,
            minutes=tuple(sorted(_expand(minute, 0, 59))),
            hours=tuple(sorted(_expand(hour, 0, 23))),
            days=_expand(dom, 1, 31),
            months=tuple(sorted(_expand(month, 1, 12))),
            weekdays=weekdays,
            dom_restricted=not dom.startswith("*"),
            dow_restricted=not dow.startswith("*"),
        )

    def __str__(self) -> str:
        return self.text

    def _day_matches(self, dt: datetime) -> bool:
        in_dom = dt.day in self.days
        in_dow = (dt.weekday() + 1) % 7 in self.weekdays
        if self.dom_restricted and self.dow_restricted:
            return in_dom or in_dow
        return in_dom and in_dow

    def matches(self, dt: datetime) -> bool:
        """Whether the minute containing `dt` (aware; read in UTC) is one of the expression's."""
        dt = _require_aware(dt, "dt")
        return (
            dt.minute in self.minutes
            and dt.hour in self.hours
            and dt.month in self.months
            and self._day_matches(dt)
        )

    def next_after(self, dt: datetime) -> datetime:
        """The first matching minute strictly after `dt` (aware), as a UTC datetime.

        Skips whole months, days and hours that cannot match, so even a yearly expression
        costs a few hundred steps. An expression that never matches (`0 0 30 2 *`) raises
        ValueError after `CRON_HORIZON_YEARS` instead of looping forever.
        """
        start = _require_aware(dt, "dt").replace(second=0, microsecond=0) + _MINUTE
        # Whole calendar years past the horizon: a day that comes back rarely (Tuesday the 1st of
        # January, say) is still found when it is just under CRON_HORIZON_YEARS years away.
        limit = start.replace(year=start.year + CRON_HORIZON_YEARS + 1, month=1, day=1, hour=0, minute=0)
        cur = start
        while cur < limit:
            if cur.month not in self.months:
                index = bisect.bisect_right(self.months, cur.month)
                if index < len(self.months):
                    cur = cur.replace(month=self.months[index], day=1, hour=0, minute=0)
                else:
                    cur = cur.replace(year=cur.year + 1, month=self.months[0], day=1, hour=0, minute=0)
                continue
            if not self._day_matches(cur):
                cur = cur.replace(hour=0, minute=0) + timedelta(days=1)
                continue
            index = bisect.bisect_left(self.hours, cur.hour)
            if index == len(self.hours):
                cur = cur.replace(hour=0, minute=0) + timedelta(days=1)
                continue
            if self.hours[index] != cur.hour:
                cur = cur.replace(hour=self.hours[index], minute=0)
            index = bisect.bisect_left(self.minutes, cur.minute)
            if index == len(self.minutes):
                cur = cur.replace(minute=0) + timedelta(hours=1)
                continue
            return cur.replace(minute=self.minutes[index])
        raise ValueError(
            f"cron expression {self.text!r} has no matching time within "
            f"{CRON_HORIZON_YEARS} years after {start.isoformat()}"
        )


@lru_cache(maxsize=256)
def _parse_cached(expr: str) -> CronExpression:
    """Schedules are re-evaluated after every run; parse each expression once."""
    return CronExpression.parse(expr)


def _jitter(schedule: Schedule, rng: random.Random) -> timedelta:
    """Uniform in [0, jitter]: spreads jobs with the same schedule so they don't stampede."""
    if schedule.jitter <= 0:
        return timedelta(0)
    return timedelta(seconds=rng.uniform(0.0, schedule.jitter))


def next_run(
    schedule: Schedule, last_start: datetime | None, now: datetime, rng: random.Random
) -> datetime:
    """When a job with `schedule` should start next (UTC), jitter included.

    `every`: `last_start + every` (intervals run start to start, so a slow run does not drift
    the schedule), or `now` if the job never ran; the result may lie in the past, meaning
    "overdue, run now" (one run, not one per missed interval). `cron`: the next cron time
    strictly after `max(now, last_start)`. Deterministic for a given `rng` state.
    """
    now = _require_aware(now, "now")
    if last_start is not None:
        last_start = _require_aware(last_start, "last_start")
    if schedule.every is not None:
        base = now if last_start is None else last_start + timedelta(seconds=schedule.every)
    else:
        assert schedule.cron is not None
        after = now if last_start is None else max(now, last_start)
        base = _parse_cached(schedule.cron).next_after(after)
    return base + _jitter(schedule, rng)


def failure_backoff(failures: int, base: float = BACKOFF_BASE) -> float:
    """Seconds to wait after `failures` consecutive failures: 30 s, 60 s, 120 s ... capped at 1 h
    (`base` replaces the 30 s: `daemon.failure_backoff` in the configuration)."""
    if failures < 1:
        return 0.0
    # Cap the exponent too: 2**10000 as a float would overflow long before the min() applies.
    return min(base * 2 ** min(failures - 1, 64), max(BACKOFF_CAP, base))


@dataclass(slots=True)
class JobTimer:
    """Timing state of one daemon job: when it is due, whether it runs, what is queued.

    A pure state machine the daemon drives with `due` / `start` / `finish` / `trigger`, so
    the rules live here and are tested here: one run at a time; triggers during a run
    coalesce into ONE follow-up run; a failed run is retried at the later of its next
    schedule time and `now + backoff` (backoff doubling from 30 s, capped at 1 h).
    `schedule` None: the job runs only when triggered (`next_due` stays None otherwise).
    """

    schedule: Schedule | None
    next_due: datetime | None = None
    running: bool = False
    pending_trigger: bool = False
    consecutive_failures: int = 0
    last_start: datetime | None = field(default=None)
    backoff_base: float = BACKOFF_BASE
    retry_not_before: datetime | None = None
    """After a failure: the backoff's end, which a new schedule (reload) must respect too."""

    @classmethod
    def create(
        cls,
        schedule: Schedule | None,
        now: datetime,
        rng: random.Random,
        last_start: datetime | None = None,
    ) -> JobTimer:
        """A timer whose first `next_due` follows from the schedule (and a known last start,
        e.g. from the state directory, so a restart does not rerun a job that just ran)."""
        timer = cls(schedule=schedule, last_start=last_start)
        if schedule is not None:
            timer.next_due = next_run(schedule, last_start, now, rng)
        return timer

    def due(self, now: datetime) -> bool:
        """Whether the job should start now: idle, and its due time has come."""
        return not self.running and self.next_due is not None and now >= self.next_due

    def start(self, now: datetime) -> None:
        """Mark the job running; RuntimeError if it already is (one run at a time)."""
        if self.running:
            raise RuntimeError("job is already running; one run at a time")
        self.running = True
        self.last_start = _require_aware(now, "now")
        self.next_due = None

    def finish(self, now: datetime, ok: bool, rng: random.Random) -> None:
        """Mark the run over and compute `next_due`.

        Success resets the failure count. Failure n (consecutive) waits at least
        `failure_backoff(n)` (30 s doubling, capped at 1 h) but never less than the next
        schedule time: `max(next schedule time, now + backoff)`, so a failing job is
        retried on its schedule, only spaced further out while it keeps failing. A trigger
        that arrived during the run wins over both: one follow-up run, due now.
        """
        if not self.running:
            raise RuntimeError("job is not running")
        now = _require_aware(now, "now")
        self.running = False
        self.consecutive_failures = 0 if ok else self.consecutive_failures + 1
        retry = None if ok else now + timedelta(seconds=failure_backoff(self.consecutive_failures, self.backoff_base))
        self.retry_not_before = retry
        if self.schedule is None:
            self.next_due = None
        else:
            self.next_due = next_run(self.schedule, self.last_start, now, rng)
            if retry is not None:
                self.next_due = max(self.next_due, retry)
        if self.pending_trigger:
            self.pending_trigger = False
            self.next_due = now

    def trigger(self, now: datetime) -> str:
        """Ask for a run now: "coalesced" if running (one follow-up run, however many
        triggers arrive), else "scheduled" (due immediately)."""
        now = _require_aware(now, "now")
        if self.running:
            self.pending_trigger = True
            return "coalesced"
        self.next_due = now if self.next_due is None else min(self.next_due, now)
        return "scheduled"

    def reschedule(self, schedule: Schedule | None, now: datetime, rng: random.Random) -> None:
        """Adopt a new schedule (configuration reload). While running, `finish` applies it;
        when idle the next due time is recomputed, unless a run (e.g. a trigger) is already due."""
        self.schedule = schedule
        if self.running:
            return
        triggered = self.next_due is not None and self.next_due <= _require_aware(now, "now")
        if schedule is None:
            self.next_due = self.next_due if triggered else None
        elif not triggered:
            self.next_due = next_run(schedule, self.last_start, now, rng)
            if self.retry_not_before is not None:
                self.next_due = max(self.next_due, self.retry_not_before)
