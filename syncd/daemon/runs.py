"""One daemon's run history (a `RunHistory`, `syncd.daemon.run_history`): what ran, why, when,
how it ended; kept in `state/daemon.db`, with the jobs an operator paused (`syncd.daemon.pauses`).

Persisted so that `GET /runs/{id}` and the jobs' last start times survive a restart (a
restart does not rerun a job that has just run), and bounded in memory so a daemon that
runs for months does not grow: only the latest runs are held, the rest are read back on
demand. The file (and its -wal and -shm) is private, 0600, when the daemon creates it: run
errors quote what the API said.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlite_utils

from syncd.daemon.run_history import DIED, KEEP_RUNS, NEVER_STARTED, PRUNE_EVERY, Pause, RecentRuns, RunRecord, RunTable
from syncd.files import create_private
from syncd.logging import get_logger

__all__ = ["RunLog"]

log = get_logger("syncd.daemon")
_TABLE = RunTable("runs", "?", full_read="json_extract(summary, '$.full') = 1", prune_below="(SELECT max(id) FROM runs) - ?")


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _record(row: dict[str, Any]) -> RunRecord:
    return RunRecord(
        id=row["id"],
        job=row["job"],
        kind=row["kind"],
        cause=row["reason"],
        queued_at=_parse(row["queued_at"]) or datetime.now(UTC),
        started_at=_parse(row["started_at"]),
        ended_at=_parse(row["ended_at"]),
        outcome=row["outcome"],
        error=row["error"],
        summary=json.loads(row["summary"] or "{}"),
    )


class RunLog:
    """Runs by id: the latest in memory, all of them in SQLite (a `RunHistory`)."""

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
        self.db["paused_jobs"].create({"job": str, "paused_at": str, "paused_by": str}, pk="job", if_not_exists=True)
        self._recent: RecentRuns[RunRecord] = RecentRuns()
        last = self.db.execute("SELECT max(id) FROM runs").fetchone()[0]
        self._next_id = (last or 0) + 1
        # A run the previous process left open was interrupted by its death (a graceful stop
        # closes its runs as `cancelled`): a failure, and it counts as the job's last start, so
        # a job that kills the daemon is not rerun in a loop at every restart.
        self.db.execute("UPDATE runs SET outcome = 'failed', error = ? WHERE outcome = 'running'", [DIED])
        self.db.execute("UPDATE runs SET outcome = 'cancelled', error = ? WHERE outcome = 'queued'", [NEVER_STARTED])

    def close(self) -> None:
        self.db.conn.close()

    def prune(self, keep: int = KEEP_RUNS) -> int:
        """Forget all but the latest `keep` finished runs (each job's latest success and full
        read stay: scheduling reads them)."""
        return self.db.execute(_TABLE.prune(), [keep]).rowcount

    def new(self, job: str, kind: str, cause: str, now: datetime) -> RunRecord:
        record = RunRecord(id=self._next_id, job=job, kind=kind, cause=cause, queued_at=now)
        self._next_id += 1
        if record.id % PRUNE_EVERY == 0:
            self.prune()
        self.save(record)
        return record

    def save(self, record: RunRecord) -> bool:
        """Keep the record; a write error (disk full) is logged, never fatal to the daemon
        (False: kept in memory only)."""
        row = record.as_dict()
        row.pop("seconds")
        row.pop("progress")  # live only: not worth a write per update
        row["reason"] = row.pop("cause")  # the column's name since the first release; the explanation lives in the summary
        row["summary"] = json.dumps(record.summary, sort_keys=True, default=str)
        written = True
        try:
            self.db["runs"].upsert(row, pk="id")
        except sqlite3.Error as exc:
            log.error("runs.save_failed", run=record.id, error=str(exc), path=str(self.path))
            written = False
        self._recent.remember(record)
        return written

    def get(self, run_id: int) -> RunRecord | None:
        record = self._recent.get(run_id)
        if record is not None:
            return record
        rows = list(self.db.query("SELECT * FROM runs WHERE id = ?", [run_id]))
        return _record(rows[0]) if rows else None

    def of_job(self, job: str, limit: int = 20) -> list[RunRecord]:
        """The job's latest runs, newest first."""
        return self._records(self.db.query(_TABLE.of_job("id"), [job, limit]))

    def latest(self, limit: int = 50) -> list[RunRecord]:
        return self._records(self.db.query(_TABLE.latest("id"), [limit]))

    def _records(self, rows: Any) -> list[RunRecord]:
        return [record for row in rows if (record := self.get(row["id"])) is not None]

    def _time(self, query: str, job: str) -> datetime | None:
        row = self.db.execute(query, [job]).fetchone()
        return _parse(row[0]) if row and row[0] else None

    def last_start(self, job: str) -> datetime | None:
        """When the job's latest run started, not counting runs a shutdown cancelled: a
        restart during a deploy must not skip a day's backup."""
        return self._time(_TABLE.last_start(), job)

    def last_full(self, job: str) -> datetime | None:
        """When the job's latest full read (summary `full`) that finished started."""
        return self._time(_TABLE.last_full(), job)

    def last_success(self, job: str) -> datetime | None:
        return self._time(_TABLE.last_success(), job)

    # -- paused jobs --------------------------------------------------------------------------

    def paused_jobs(self) -> dict[str, Pause]:
        """The jobs an operator paused, by name (kept across restarts)."""
        rows = self.db.execute("SELECT job, paused_at, paused_by FROM paused_jobs").fetchall()
        return {job: Pause(job, datetime.fromisoformat(at), by) for job, at, by in rows}

    def pause(self, job: str, by: str, now: datetime) -> tuple[Pause, bool]:
        """Pause `job` (kept as it was when already paused); the pause, and whether it is new."""
        new = self.db.execute(
            "INSERT INTO paused_jobs (job, paused_at, paused_by) VALUES (?, ?, ?) ON CONFLICT (job) DO NOTHING",
            [job, now.isoformat(), by],
        ).rowcount == 1
        return self.paused_jobs()[job], new

    def resume(self, job: str, by: str, now: datetime) -> bool:
        """Lift the pause of `job`; False when it was not paused."""
        return self.db.execute("DELETE FROM paused_jobs WHERE job = ?", [job]).rowcount == 1
