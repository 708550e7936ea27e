"""The daemon's run history: what ran, why, when, how it ended; kept in `state/daemon.db`.

Persisted so that `GET /runs/{id}` and the jobs' last start times survive a restart (a
restart does not rerun a job that has just run), and bounded in memory so a daemon that
runs for months does not grow: only the latest runs are held, the rest are read back on
demand. The file (and its -wal and -shm) is private, 0600, when the daemon creates it: run
errors quote what the API said.
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import sqlite_utils

from syncd.files import create_private
from syncd.logging import get_logger

__all__ = ["OUTCOMES", "Outcome", "RunLog", "RunRecord", "iso_utc"]

Outcome = Literal["queued", "running", "succeeded", "partial", "failed", "cancelled"]
OUTCOMES: tuple[Outcome, ...] = ("succeeded", "partial", "failed", "cancelled")
"""How a finished run ended: `partial` did its work but could not read or copy everything."""
log = get_logger("syncd.daemon")
_MEMORY = 200
KEEP_RUNS = 10_000
"""Rows of history kept in daemon.db: a job every minute fills it in a week, and never more."""
_PRUNE_EVERY = 500
DIED = "the daemon process ended during the run"


def iso_utc(dt: datetime | None) -> str | None:
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z") if dt is not None else None


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


@dataclass
class RunRecord:
    """One run of a job; `outcome` is `queued` or `running` until it ends."""

    id: int
    job: str
    kind: str
    reason: str
    """schedule, trigger, or retry (a scheduled run after a failure)."""
    queued_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: Outcome = "queued"
    error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    progress: dict[str, Any] = field(default_factory=dict)
    """Where the run is (`syncd.daemon.progress`): updated while it runs, kept in memory only
    (a run read back from the file after a restart has none)."""

    @property
    def finished(self) -> bool:
        return self.outcome in OUTCOMES

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "job": self.job,
            "kind": self.kind,
            "reason": self.reason,
            "outcome": self.outcome,
            "queued_at": iso_utc(self.queued_at),
            "started_at": iso_utc(self.started_at),
            "ended_at": iso_utc(self.ended_at),
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "error": self.error,
            "summary": self.summary,
            "progress": self.progress,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        return cls(
            id=row["id"],
            job=row["job"],
            kind=row["kind"],
            reason=row["reason"],
            queued_at=_parse(row["queued_at"]) or datetime.now(UTC),
            started_at=_parse(row["started_at"]),
            ended_at=_parse(row["ended_at"]),
            outcome=row["outcome"],
            error=row["error"],
            summary=json.loads(row["summary"] or "{}"),
        )


class RunLog:
    """Runs by id: the latest in memory, all of them in SQLite."""

    def __init__(self, path: Path) -> None:
        self.path = path
        create_private(path)  # SQLite gives -wal and -shm the file's mode
        self.db = sqlite_utils.Database(sqlite3.connect(str(path), isolation_level=None))
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db["runs"].create(
            {
                "id": int,
                "job": str,
                "kind": str,
                "reason": str,
                "queued_at": str,
                "started_at": str,
                "ended_at": str,
                "outcome": str,
                "error": str,
                "summary": str,
            },
            pk="id",
            if_not_exists=True,
        )
        self.db["runs"].create_index(["job", "id"], if_not_exists=True)
        self._recent: OrderedDict[int, RunRecord] = OrderedDict()
        last = self.db.execute("SELECT max(id) FROM runs").fetchone()[0]
        self._next_id = (last or 0) + 1
        # A run the previous process left open was interrupted by its death (a graceful stop
        # closes its runs as `cancelled`): a failure, and it counts as the job's last start, so
        # a job that kills the daemon is not rerun in a loop at every restart.
        self.db.execute(
            f"UPDATE runs SET outcome = 'failed', error = '{DIED}' WHERE outcome = 'running'"
        )
        self.db.execute(
            "UPDATE runs SET outcome = 'cancelled', error = 'the daemon stopped before the run started' "
            "WHERE outcome = 'queued'"
        )

    def close(self) -> None:
        self.db.conn.close()

    def prune(self, keep: int = KEEP_RUNS) -> int:
        """Forget all but the latest `keep` finished runs (each job's latest success and full
        read stay: scheduling reads them)."""
        cursor = self.db.execute(
            "DELETE FROM runs WHERE id <= (SELECT max(id) FROM runs) - ? "
            "AND outcome NOT IN ('queued', 'running') "
            "AND id NOT IN (SELECT max(id) FROM runs WHERE outcome = 'succeeded' GROUP BY job) "
            "AND id NOT IN (SELECT max(id) FROM runs WHERE outcome IN ('succeeded', 'partial') "
            "AND json_extract(summary, '$.full') = 1 GROUP BY job) "
            "AND id NOT IN (SELECT max(id) FROM runs WHERE outcome != 'cancelled' GROUP BY job)",
            [keep],
        )
        return cursor.rowcount

    def new(self, job: str, kind: str, reason: str, now: datetime) -> RunRecord:
        record = RunRecord(id=self._next_id, job=job, kind=kind, reason=reason, queued_at=now)
        self._next_id += 1
        if record.id % _PRUNE_EVERY == 0:
            self.prune()
        self.save(record)
        return record

    def save(self, record: RunRecord) -> None:
        """Keep the record; a write error (disk full) is logged, never fatal to the daemon."""
        row = record.as_dict()
        row.pop("seconds")
        row.pop("progress")  # live only: not worth a write per update
        row["summary"] = json.dumps(record.summary, sort_keys=True, default=str)
        try:
            self.db["runs"].upsert(row, pk="id")
        except sqlite3.Error as exc:
            log.error("runs.save_failed", run=record.id, error=str(exc), path=str(self.path))
        self._recent[record.id] = record
        self._recent.move_to_end(record.id)
        while len(self._recent) > _MEMORY:
            self._recent.popitem(last=False)

    def get(self, run_id: int) -> RunRecord | None:
        record = self._recent.get(run_id)
        if record is not None:
            return record
        rows = list(self.db.query("SELECT * FROM runs WHERE id = ?", [run_id]))
        return RunRecord.from_row(rows[0]) if rows else None

    def of_job(self, job: str, limit: int = 20) -> list[RunRecord]:
        """The job's latest runs, newest first."""
        rows = self.db.query("SELECT id FROM runs WHERE job = ? ORDER BY id DESC LIMIT ?", [job, limit])
        return [record for row in rows if (record := self.get(row["id"])) is not None]

    def latest(self, limit: int = 50) -> list[RunRecord]:
        rows = self.db.query("SELECT id FROM runs ORDER BY id DESC LIMIT ?", [limit])
        return [record for row in rows if (record := self.get(row["id"])) is not None]

    def last_start(self, job: str) -> datetime | None:
        """When the job's latest run started, not counting runs a shutdown cancelled: a
        restart during a deploy must not skip a day's backup."""
        row = self.db.execute(
            "SELECT max(started_at) FROM runs WHERE job = ? AND outcome != 'cancelled'", [job]
        ).fetchone()
        return _parse(row[0]) if row and row[0] else None

    def last_full(self, job: str) -> datetime | None:
        """When the job's latest full read (summary `full`) that finished started."""
        row = self.db.execute(
            "SELECT max(started_at) FROM runs WHERE job = ? AND outcome IN ('succeeded', 'partial') "
            "AND json_extract(summary, '$.full') = 1",
            [job],
        ).fetchone()
        return _parse(row[0]) if row and row[0] else None

    def last_success(self, job: str) -> datetime | None:
        row = self.db.execute(
            "SELECT max(ended_at) FROM runs WHERE job = ? AND outcome = 'succeeded'", [job]
        ).fetchone()
        return _parse(row[0]) if row and row[0] else None
