"""Schedule slots that every replica of a fleet computes alike (issue 13).

Why not `JobTimer`: one daemon measures `every` from its own last start and jitters with its
own random numbers; replicas would each compute another time and the fleet would run a job
once per replica. Here a slot is a pure function of the schedule, the fleet's last slot of the
job and the time, so replicas offering "the next slot" offer the same one, and the database
(UNIQUE job, due_at) makes it one run:

- `every`: slots lie on a grid of multiples of `every` since the Unix epoch (start to start, as
  in one daemon, but anchored to the grid, not to whichever replica started first);
- `cron`: slots are the cron times;
- a job that never ran is due at the current grid slot (`every`: run now, as one daemon does) or
  at the next cron time; slots missed while no replica ran collapse into the latest (one run,
  not one per missed slot);
- jitter is drawn from the job's name and the slot (a hash, not a random generator), so every
  replica delays the same slot by the same amount; it goes in `not_before`, never in `due_at`.
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime, timedelta

from syncd.config import Schedule
from syncd.daemon.schedule import _parse_cached, failure_backoff

__all__ = ["MAX_CATCH_UP", "due_slot", "jitter_for", "next_slot", "not_before"]

MAX_CATCH_UP = 100_000
"""Cron times walked to find the latest missed one (a minutely cron down for ~69 days)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _grid(every: float, at: datetime) -> datetime:
    """The latest multiple of `every` seconds since the epoch at or before `at`."""
    seconds = (at - _EPOCH).total_seconds()
    return _EPOCH + timedelta(seconds=math.floor(seconds / every) * every)


def due_slot(schedule: Schedule, last_slot: datetime | None, now: datetime, since: datetime) -> datetime | None:
    """The slot the fleet should run now, or None while the next one lies ahead.

    `last_slot` is the latest slot already offered for the job (by any replica); without one, a
    cron job's first slot is its first time after `since` (when this replica started: replicas
    started before that time agree on it)."""
    if schedule.every is not None:
        current = _grid(schedule.every, now)
        return current if last_slot is None or current > last_slot else None
    assert schedule.cron is not None
    cron = _parse_cached(schedule.cron, schedule.timezone)
    slot = cron.next_after(last_slot if last_slot is not None else since)
    if slot > now:
        return None
    for _ in range(MAX_CATCH_UP):  # several missed: only the latest runs
        following = cron.next_after(slot)
        if following > now:
            return slot
        slot = following
    return slot


def next_slot(schedule: Schedule, last_slot: datetime | None, now: datetime, since: datetime) -> datetime:
    """The slot the fleet runs next: the due one (`due_slot`), else the first after `last_slot`
    (what `/jobs` shows, before jitter and backoff: `not_before`)."""
    due = due_slot(schedule, last_slot, now, since)
    if due is not None:
        return due
    if schedule.every is not None:
        return _grid(schedule.every, now) + timedelta(seconds=schedule.every)
    assert schedule.cron is not None
    return _parse_cached(schedule.cron, schedule.timezone).next_after(last_slot if last_slot is not None else since)


def jitter_for(job: str, slot: datetime, jitter: float) -> timedelta:
    """Uniform in [0, jitter], the same on every replica for this job and slot."""
    if jitter <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{job}\0{slot.astimezone(UTC).isoformat()}".encode()).digest()
    return timedelta(seconds=jitter * int.from_bytes(digest[:8], "big") / 2**64)


def not_before(job: str, schedule: Schedule, slot: datetime, failures: int, last_failure: datetime | None, backoff_base: float) -> datetime:
    """When the slot's run may start: after its jitter, and after the backoff of the job's
    `failures` consecutive failures (counted from `last_failure`), like one daemon's retries."""
    start = slot + jitter_for(job, slot, schedule.jitter)
    if failures and last_failure is not None:
        start = max(start, last_failure + timedelta(seconds=failure_backoff(failures, backoff_base)))
    return start
