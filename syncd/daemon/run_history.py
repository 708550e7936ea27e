"""The daemon's run history: one interface (`RunHistory`), two implementations.

`RunLog` (`syncd.daemon.runs`) keeps one daemon's runs in SQLite (`state/daemon.db`);
`FleetRunLog` (`syncd.daemon.fleet_runs`) keeps a fleet's in PostgreSQL, shared by its
replicas. The service (`syncd.daemon.service`) and the control API use either through
`RunHistory`. What the two share and is not tied to one engine lives here: the record of a run,
its outcomes, the bounded memory of the latest runs (`RecentRuns`), and the queries they both
ask, written once with what differs between their tables made explicit (`RunTable`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, Protocol, TypeVar

__all__ = [
    "DIED",
    "KEEP_RUNS",
    "MEMORY",
    "NEVER_STARTED",
    "OUTCOMES",
    "Pause",
    "PRUNE_EVERY",
    "Outcome",
    "RecentRuns",
    "RunHistory",
    "RunRecord",
    "RunTable",
    "TIME_FORMAT",
    "iso_utc",
    "shown_utc",
]

Outcome = Literal["queued", "running", "succeeded", "partial", "failed", "cancelled"]
OUTCOMES: tuple[Outcome, ...] = ("succeeded", "partial", "failed", "cancelled")
"""How a finished run ended: `partial` did its work but could not read or copy everything."""
DIED = "the daemon process ended during the run"
"""The error of a run its process left `running` (closed as failed by the next start)."""
NEVER_STARTED = "the daemon stopped before the run started"
"""The error of a run its process left `queued` (closed as cancelled)."""
KEEP_RUNS = 10_000
"""Rows of history kept: a job every minute fills them in a week, and never more."""
PRUNE_EVERY = 500
"""Runs made between two prunes."""
MEMORY = 200
"""Records held in memory at most: the latest of this process, with their live progress."""


TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
"""How a time reads for people, everywhere (pages, messages): `2026-11-28 12:05:09 UTC`."""


def shown_utc(dt: datetime) -> str:
    """A moment as people read one in syncd's pages and messages (`TIME_FORMAT` and `UTC`)."""
    return (dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)).astimezone(UTC).strftime(TIME_FORMAT) + " UTC"


def iso_utc(dt: datetime | None) -> str | None:
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z") if dt is not None else None


@dataclass(frozen=True)
class Pause:
    """A job's schedule and triggers held by an operator since `at` (kept beside the runs:
    `daemon.db`, or the fleet's `fleet_job_pauses`)."""

    job: str
    at: datetime
    by: str

    def as_dict(self) -> dict[str, str | None]:
        return {"at": iso_utc(self.at), "by": self.by}


@dataclass
class RunRecord:
    """One run of a job; `outcome` is `queued` or `running` until it ends."""

    id: int
    job: str
    kind: str
    cause: str
    """Why it started: schedule, trigger, or retry (a scheduled run after a failure). Stored
    in the history's `reason` column (its name since the first release); the API calls it `cause`."""
    queued_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: Outcome = "queued"
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    progress: dict[str, Any] = field(default_factory=dict)
    """Where the run is (`syncd.daemon.progress`): updated while it runs, kept in memory only
    (a run read back from the history after a restart has none)."""

    @property
    def finished(self) -> bool:
        return self.outcome in OUTCOMES

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()

    @property
    def explanation(self) -> str | None:
        """Why the outcome is not a plain success, in one sentence (the API's `reason`): what
        the run's summary says (a runner sets `reason` where it knows), else its error; None
        for a plain success and for a run not yet over."""
        if not self.finished:
            return None
        said = self.summary.get("reason")
        if isinstance(said, str) and said:
            return said
        return self.error

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "job": self.job,
            "kind": self.kind,
            "cause": self.cause,
            "reason": self.explanation,
            "outcome": self.outcome,
            "queued_at": iso_utc(self.queued_at),
            "started_at": iso_utc(self.started_at),
            "ended_at": iso_utc(self.ended_at),
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "error": self.error,
            "summary": self.summary,
            "progress": self.progress,
        }


class RunHistory(Protocol):
    """Runs by id, what the service and the control API ask of a history (module docstring)."""

    def new(self, job: str, kind: str, cause: str, now: datetime) -> RunRecord:
        """A run of `job` this process starts, `queued` at `now`."""
        ...

    def save(self, record: RunRecord) -> bool:
        """Write the record; False when it was not written (logged, never fatal to the daemon)."""
        ...

    def get(self, run_id: int) -> RunRecord | None: ...

    def of_job(self, job: str, limit: int = 20) -> list[RunRecord]:
        """The job's latest runs, newest first."""
        ...

    def latest(self, limit: int = 50) -> list[RunRecord]: ...

    def last_start(self, job: str) -> datetime | None:
        """When the job's latest run started, not counting runs a shutdown cancelled."""
        ...

    def last_full(self, job: str) -> datetime | None:
        """When the job's latest full read (summary `full`) that finished started."""
        ...

    def last_success(self, job: str) -> datetime | None: ...

    def prune(self, keep: int = KEEP_RUNS) -> int:
        """Forget all but the latest `keep` finished runs; how many went."""
        ...

    def paused_jobs(self) -> dict[str, Pause]:
        """The jobs an operator paused, by name (`syncd.daemon.pauses`)."""
        ...

    def pause(self, job: str, by: str, now: datetime) -> tuple[Pause, bool]:
        """Pause `job` (kept as it was when already paused); the pause, and whether it is new."""
        ...

    def resume(self, job: str, by: str, now: datetime) -> bool:
        """Lift the pause of `job`; False when it was not paused."""
        ...

    def close(self) -> None: ...


R = TypeVar("R", bound=RunRecord)


class RecentRuns(Generic[R]):
    """The latest records this process made or saved, by id, at most `MEMORY`: they carry the
    live `progress`, and a daemon that runs for months does not grow."""

    def __init__(self, size: int = MEMORY) -> None:
        self.size = size
        self._records: OrderedDict[int, R] = OrderedDict()

    def remember(self, record: R) -> R:
        self._records[record.id] = record
        self._records.move_to_end(record.id)
        while len(self._records) > self.size:
            self._records.popitem(last=False)
        return record

    def get(self, run_id: int) -> R | None:
        return self._records.get(run_id)

    def forget(self, run_id: int) -> None:
        self._records.pop(run_id, None)

    def clear(self) -> None:
        self._records.clear()

    def __len__(self) -> int:
        return len(self._records)


@dataclass(frozen=True)
class RunTable:
    """The SQL both histories ask, and the four things that differ between their tables."""

    name: str
    param: str
    """The driver's placeholder: `?` (sqlite3), `%s` (psycopg)."""
    full_read: str
    """A condition: the run's summary says it was a full read (`"full": true`)."""
    prune_below: str
    """Ids up to this (one `param`: how many to keep) may be pruned."""

    def prune(self) -> str:
        """Drop runs that are over and old, except each job's latest success, latest finished full
        read and latest run not cancelled: scheduling reads them."""
        t = self.name
        return (
            f"DELETE FROM {t} WHERE id <= {self.prune_below} "
            "AND outcome NOT IN ('queued', 'running') "
            f"AND id NOT IN (SELECT max(id) FROM {t} WHERE outcome = 'succeeded' GROUP BY job) "
            f"AND id NOT IN (SELECT max(id) FROM {t} WHERE outcome IN ('succeeded', 'partial') "
            f"AND {self.full_read} GROUP BY job) "
            f"AND id NOT IN (SELECT max(id) FROM {t} WHERE outcome != 'cancelled' GROUP BY job)"
        )

    def of_job(self, columns: str) -> str:
        return f"SELECT {columns} FROM {self.name} WHERE job = {self.param} ORDER BY id DESC LIMIT {self.param}"

    def latest(self, columns: str) -> str:
        return f"SELECT {columns} FROM {self.name} ORDER BY id DESC LIMIT {self.param}"

    def last_start(self) -> str:
        return f"SELECT max(started_at) FROM {self.name} WHERE job = {self.param} AND outcome != 'cancelled'"

    def last_full(self) -> str:
        return (
            f"SELECT max(started_at) FROM {self.name} WHERE job = {self.param} AND outcome IN ('succeeded', 'partial') "
            f"AND {self.full_read}"
        )

    def last_success(self) -> str:
        return f"SELECT max(ended_at) FROM {self.name} WHERE job = {self.param} AND outcome = 'succeeded'"
