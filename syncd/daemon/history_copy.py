"""The daemon's run history as a part of `syncd state migrate`: `daemon.db` (`RunLog`) into the
fleet's `fleet_runs` (`FleetRunLog`), and its paused jobs into `fleet_job_pauses` (a job paused
for a target's maintenance stays paused in the fleet), in the mirror's transaction
(`syncd.state.migrate_state`).

Why in the daemon: the history is the daemon's, and so are the rules of its copy. The state
layer copies the mirror and is handed this part (`syncd.state.state_copy.StatePart`) by the
command, so it never imports the daemon.

The history takes `fleet_runs`' types (ISO text to timestamptz, summary to jsonb); a run it left
queued or running is closed as `RunLog` closes it on the next start. A daemon running on the
state directory (`daemon.lock`) is refused: what it wrote after the copy would be lost.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syncd.daemon.fleet_runs import storable
from syncd.daemon.fleet_tables import FLEET_MIGRATIONS
from syncd.daemon.run_history import DIED, NEVER_STARTED, OUTCOMES
from syncd.pg.migrations import PgMigration
from syncd.state.errors import StateBusyError, StateError
from syncd.state.lock import lock_holder
from syncd.state.pg_database import PgDatabase
from syncd.state.sqlite_file import _connect_readonly, _sqlite_header, identity
from syncd.state.state_copy import BATCH, MigrationMismatch, Progress, StateMigration, TableCount, move_sequence

__all__ = ["DAEMON_COLUMNS", "DaemonHistoryCopy"]

DAEMON_COLUMNS = ("id", "job", "kind", "reason", "queued_at", "started_at", "ended_at", "outcome", "error", "summary")
"""The columns of daemon.db's runs, the same in `fleet_runs`."""


def _open(path: Path) -> sqlite3.Connection:
    """daemon.db read-only, as one snapshot (like `StateStore(readonly=True)`); StateError when unusable."""
    header = _sqlite_header(path)
    immutable = header[18] == 2 and not path.with_name(path.name + "-wal").exists()
    try:
        conn = _connect_readonly(path, immutable, 30.0)
    except sqlite3.DatabaseError as exc:
        raise StateError(f"{path} is not a usable syncd daemon history: {exc}") from None
    try:
        conn.execute("BEGIN")
        problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(3)")]
        columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StateError(f"{path} is not a usable syncd daemon history: {exc}") from None
    missing = [name for name in DAEMON_COLUMNS if name not in columns]
    if problems != ["ok"] or missing:
        conn.close()
        why = f"it is damaged ({'; '.join(problems)[:200]})" if problems != ["ok"] else f"its runs table lacks {missing[0]!r}"
        raise StateError(f"{path} is not a usable syncd daemon history: {why}")
    return conn


def _time(value: Any, what: str) -> datetime | None:
    if value is None or value == "":
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise StateError(f"{what} has a time that is not ISO 8601: {str(value)[:40]!r}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _run_key(row: Sequence[Any]) -> tuple[Any, ...]:
    """A `fleet_runs` row as compared: times in UTC, the summary decoded."""
    times = tuple(None if t is None else t.astimezone(UTC) for t in row[4:7])
    summary = json.loads(row[9]) if isinstance(row[9], str) else row[9]
    return (*row[:4], *times, *row[7:9], summary)


class DaemonHistoryCopy:
    """`daemon.db` of a state directory into `fleet_runs` (a `StatePart`); with no history
    (`path` None) it still claims `fleet_runs` empty: a server holding runs is not a copy's target."""

    tables: tuple[str, ...] = ("fleet_runs", "fleet_job_pauses")
    migrations: tuple[PgMigration, ...] = FLEET_MIGRATIONS
    """Every table a replica uses: a server `syncd state migrate` fills is ready for a fleet."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._seen: tuple[int, int, int, int] | None = None
        self._rows: dict[int, tuple[Any, ...]] = {}
        self._pauses: dict[str, tuple[datetime | None, str]] = {}

    @classmethod
    def of(cls, directory: Path | None) -> DaemonHistoryCopy:
        """The history in state directory `directory` (None: one state file was given, no history);
        StateBusyError when a daemon runs on it."""
        if directory is None:
            return cls(None)
        holder = lock_holder(directory / "daemon.lock")
        if holder is not None:
            raise StateBusyError(
                f"a syncd daemon is running on state directory {directory} ({holder}): stop it, then migrate "
                "(what it writes after the copy would not be in PostgreSQL)"
            )
        daemon = directory / "daemon.db"
        return cls(daemon if daemon.exists() else None)

    def open(self) -> None:
        if self.path is not None:
            self._seen = identity(self.path)
            self._conn = _open(self.path)

    def close(self) -> None:
        if self._conn is not None:
            self._conn, conn = None, self._conn
            conn.close()

    def copy(self, db: PgDatabase, report: StateMigration, progress: Progress) -> None:
        if self._conn is None or self.path is None:
            return
        rows = []
        for raw in self._conn.execute(f"SELECT {', '.join(DAEMON_COLUMNS)} FROM runs ORDER BY id"):
            run_id, job, kind, reason, queued, started, ended, outcome, error, summary = raw
            what = f"{self.path}: run {run_id}"
            if outcome in ("running", "queued"):  # closed as RunLog closes them at the next start
                outcome, error = ("failed", DIED) if outcome == "running" else ("cancelled", NEVER_STARTED)
                report.closed_daemon_runs += 1
            elif outcome not in OUTCOMES:
                raise StateError(f"{what} has an outcome syncd does not know ({str(outcome)[:40]!r}): the file is damaged")
            try:
                decoded = json.loads(summary or "{}")
            except (ValueError, RecursionError):
                raise StateError(f"{what} has a summary that is not JSON: the file is damaged") from None
            times = [_time(value, what) for value in (queued, started, ended)]
            queued_at = next((t for t in times if t is not None), datetime.now(UTC))
            text = [None if v is None else str(v).replace("\x00", "\ufffd") for v in (job, kind, reason, error)]
            summary_text = json.dumps(storable(decoded if isinstance(decoded, dict) else {}), sort_keys=True)
            rows.append((run_id, *text[:3], queued_at, *times[1:], outcome, text[3], summary_text))
        columns = ", ".join(DAEMON_COLUMNS)
        for start in range(0, len(rows), BATCH):
            with db.conn.cursor() as cur, cur.copy(f"COPY fleet_runs ({columns}) FROM STDIN") as copy:
                for row in rows[start : start + BATCH]:
                    copy.write_row(row)
            progress("fleet_runs", min(start + BATCH, len(rows)), len(rows))
        self._rows = {row[0]: _run_key(row) for row in rows}
        copied = db.execute("SELECT count(*) FROM fleet_runs").fetchone()[0]
        report.tables.append(TableCount("fleet_runs", self.path.name, len(rows), copied))
        report.next_daemon_run_id = move_sequence(db, "fleet_runs", "id", 0)
        self._copy_pauses(db, report)

    def _copy_pauses(self, db: PgDatabase, report: StateMigration) -> None:
        """The jobs paused in daemon.db (a history older than pauses has none)."""
        assert self._conn is not None and self.path is not None
        if not self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'paused_jobs'").fetchone():
            return
        for job, at, by in self._conn.execute("SELECT job, paused_at, paused_by FROM paused_jobs ORDER BY job"):
            self._pauses[str(job)] = (_time(at, f"{self.path}: the pause of job {job}"), str(by))
        db.executemany("INSERT INTO fleet_job_pauses (job, paused_at, paused_by) VALUES (?, ?, ?)", [(job, at, by) for job, (at, by) in self._pauses.items()])
        copied = db.execute("SELECT count(*) FROM fleet_job_pauses").fetchone()[0]
        report.tables.append(TableCount("fleet_job_pauses", self.path.name, len(self._pauses), copied))

    def verify(self, db: PgDatabase) -> None:
        if self._conn is None:
            return
        got = {row[0]: _run_key(row) for row in db.execute(f"SELECT {', '.join(DAEMON_COLUMNS)} FROM fleet_runs")}
        if got != self._rows:
            raise MigrationMismatch("verification failed, nothing was copied: the daemon's runs differ between daemon.db and PostgreSQL")
        pauses = {job: (at.astimezone(UTC), by) for job, at, by in db.execute("SELECT job, paused_at, paused_by FROM fleet_job_pauses")}
        if pauses != {job: (at.astimezone(UTC) if at else None, by) for job, (at, by) in self._pauses.items()}:
            raise MigrationMismatch("verification failed, nothing was copied: the paused jobs differ between daemon.db and PostgreSQL")

    def check_unchanged(self) -> None:
        if self.path is not None and identity(self.path) != self._seen:
            raise StateError(f"{self.path} was written while it was being copied: stop the daemon, then migrate again")
