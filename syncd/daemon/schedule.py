"""Pure scheduling core of the daemon: next-run times, jitter, backoff, per-job timers.

No I/O, no asyncio, no clock: every function takes `now` (and an `random.Random` for
jitter), so the daemon's timing decisions are deterministic and testable in microseconds.
All datetimes are timezone-aware; results are in UTC. Cron expressions are read by the
cronsim library through `syncd.config.cron`, in the schedule's time zone (default UTC; what a
daylight saving change does is said there).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache

from syncd.config import Schedule
from syncd.config.cron import YEARS_SEARCHED, next_after, validate_cron, zone

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
CRON_HORIZON_YEARS = YEARS_SEARCHED
"""How far `next_after` looks before declaring an expression impossible (cronsim's limit).

An expression that can never match (`0 0 30 2 *`) is refused when it is read; one that
matches very rarely (`0 0 * 2 MON#5`: a February with five Mondays) is found."""


def _require_aware(dt: datetime, name: str) -> datetime:
    """Naive datetimes are refused: a local-time mix-up would shift every schedule silently."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {dt!r}")
    return dt.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A cron expression (`syncd.config.cron`: 5 fields, names, macros) read in the time zone `tz`."""

    text: str
    tz: tzinfo = UTC

    @classmethod
    def parse(cls, expr: str, timezone: str = "UTC") -> CronExpression:
        """Check `expr` and the IANA name `timezone` (ValueError, one line, otherwise)."""
        return cls(validate_cron(expr), zone(timezone))

    def __str__(self) -> str:
        return self.text

    def next_after(self, dt: datetime) -> datetime:
        """The first time of the expression strictly after `dt` (aware), as a UTC datetime;
        ValueError when there is none within `CRON_HORIZON_YEARS` years."""
        return next_after(self.text, _require_aware(dt, "dt"), self.tz)

    def matches(self, dt: datetime) -> bool:
        """Whether the minute containing `dt` (aware) is one of the expression's times."""
        minute = _require_aware(dt, "dt").replace(second=0, microsecond=0)
        return self.next_after(minute - timedelta(seconds=1)) == minute


@lru_cache(maxsize=256)
def _parse_cached(expr: str, timezone: str) -> CronExpression:
    """Schedules are re-evaluated after every run; parse each expression once."""
    return CronExpression.parse(expr, timezone)


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
    strictly after `max(now, last_start)`, read in the schedule's time zone. Deterministic
    for a given `rng` state.
    """
    now = _require_aware(now, "now")
    if last_start is not None:
        last_start = _require_aware(last_start, "last_start")
    if schedule.every is not None:
        base = now if last_start is None else last_start + timedelta(seconds=schedule.every)
    else:
        assert schedule.cron is not None
        after = now if last_start is None else max(now, last_start)
        base = _parse_cached(schedule.cron, schedule.timezone).next_after(after)
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

    def resume(self, now: datetime, rng: random.Random) -> None:
        """The job's pause is lifted: due at its first schedule time after `now` (the slots
        missed while paused give no run), or on trigger only; a failure's backoff still holds."""
        now = _require_aware(now, "now")
        self.pending_trigger = False
        if self.running:
            return
        if self.schedule is None:
            self.next_due = None
            return
        base = next_run(self.schedule, self.last_start, now, rng)
        if self.schedule.every is not None and base <= now:
            every = timedelta(seconds=self.schedule.every)
            base += every * ((now - base) // every + 1)
        self.next_due = base if self.retry_not_before is None else max(base, self.retry_not_before)

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
