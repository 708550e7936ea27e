"""Moving a SQLite state into the PostgreSQL state a fleet shares: `syncd state migrate` (issue 13).

What moves: every table of the state file (`runs`, `resources`, `staged`, `listings`, `scopes`,
`staged_scopes`, `changes`, `idmap`, `journal`) into the same tables on the server
(`syncd.state.pg_schema`), ids as they are, and the daemon's run history (`daemon.db`,
`syncd.daemon.runs`) into `fleet_runs`. The id sequences move past the highest id the file
ever gave (SQLite's AUTOINCREMENT counter, which may be above the highest row left), so a run
started on the server gets a larger id than any the file knew, and the id map and journal
keep naming the runs they named.

Why it refuses rather than merges: ids are kept, so a target holding runs could collide, and
two interleaved histories are not a copy; it fills an empty state only. A live process writing
the file (its writer lock, `syncd.state.lock`) or a daemon on the state directory
(`daemon.lock`) is refused: what it wrote after the copy would be lost. A run a dead process
left `running` is refused unless asked (`with_open_runs`): then it is copied as it is, and the
first writer of its tenant on the server fails it, as the next writer of the file would have.

Nothing half-copied: everything is one PostgreSQL transaction, verified before the commit
(rows per table, an order-free digest of each table's rows, the current view of each tenant
read through the StateStore's own read code), so a mismatch rolls it all back. The file is read
through `StateStore(path, readonly=True)`: one snapshot, nothing written in or beside it.

Types: both schemas keep JSON and times as text, so the mirror's values go as they are, but a
NUL character (PostgreSQL's text cannot hold one) becomes U+FFFD, counted in the report. The
daemon's history takes `fleet_runs`' types (ISO text to timestamptz, summary to jsonb); a run
it left queued or running is closed as `RunLog` closes it on the next start.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import psycopg

from syncd.config import names_postgres
from syncd.errors import UsageError
from syncd.pg.connect import PgError, connect, display_url
from syncd.daemon.fleet_tables import FLEET_MIGRATIONS
from syncd.pg.migrations import migrate
from syncd.state.errors import StateBusyError, StateError
from syncd.state.pg_database import PgDatabase
from syncd.state.sqlite_file import _connect_readonly, _sqlite_header, identity
from syncd.state.state_copy import DAEMON_COLUMNS, MigrationMismatch, Progress, StateCopier, StateMigration, TableCount
from syncd.state.store import StateStore

try:  # pragma: no cover - the import only fails on Windows
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["MigrationMismatch", "StateMigration", "TableCount", "migrate_state"]


def _lock_holder(lock: Path) -> str | None:
    """Who holds the `flock` writer lock at `lock` (`syncd.state.lock`), or None; creates nothing."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None  # no lock file: nobody holds it (the holder creates it, and removes it when done)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.read(fd, 200).decode(errors="replace").strip() or "unknown"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _source_files(source: Path) -> tuple[Path, Path | None]:
    """(the state file, the daemon's history or None): a state directory holds both."""
    if source.is_dir():
        daemon = source / "daemon.db"
        holder = _lock_holder(source / "daemon.lock")
        if holder is not None:
            raise StateBusyError(
                f"a syncd daemon is running on state directory {source} ({holder}): stop it, then migrate "
                "(what it writes after the copy would not be in PostgreSQL)"
            )
        return source / "syncd.db", (daemon if daemon.exists() else None)
    if not source.exists():
        raise StateError(f"no state directory or state file at {source}")
    return source, None


def _open_daemon_history(path: Path) -> sqlite3.Connection:
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


def migrate_state(source: Path, url: str, *, with_open_runs: bool = False, progress: Progress | None = None) -> StateMigration:
    """Copy the SQLite state at `source` (a state directory, or one state file) into the empty
    PostgreSQL state at `url`, verified, in one transaction (module docstring). One-line
    errors: UsageError (not a URL), StateError (file missing or damaged, open runs, a live
    writer, a target in use), PgError (server), MigrationMismatch (verification)."""
    if not names_postgres(url):
        raise UsageError("--to must be the URL of a PostgreSQL state (postgresql://USER@HOST/DB)")
    db_path, daemon_path = _source_files(source)
    holder = _lock_holder(db_path.with_name(db_path.name + ".lock"))
    if holder is not None:
        raise StateBusyError(f"state file {db_path} is being written by a syncd process ({holder}): stop it, then migrate")
    report = StateMigration(source=db_path, daemon_history=daemon_path, target=display_url(url))
    show: Progress = progress or (lambda table, done, total: None)
    with StateStore(db_path, readonly=True) as mirror:
        report.open_runs = [run for (run,) in mirror.db.execute("SELECT id FROM runs WHERE status = 'running' ORDER BY id").fetchall()]
        if report.open_runs and not with_open_runs:
            raise StateError(
                f"{db_path} has runs still open ({', '.join(map(str, report.open_runs[:5]))}): a syncd process ended during them; "
                "pass --with-open-runs to copy them as they are (the next writer of their tenant on PostgreSQL ends them as failed)"
            )
        daemon_seen = identity(daemon_path) if daemon_path is not None else None
        daemon = _open_daemon_history(daemon_path) if daemon_path is not None else None
        try:
            conn = connect(url, application_name="syncd state migrate")
            try:
                migrate(conn, FLEET_MIGRATIONS)
                copier = StateCopier(mirror, daemon, PgDatabase(conn), report, show)
                with conn.transaction():
                    copier.claim_empty_target()
                    copier.copy_mirror()
                    if daemon_path is not None:
                        copier.copy_daemon_history(daemon_path)
                    copier.verify()
                    mirror.check_unchanged()  # an immutable read of a file written meanwhile: refuse, roll back
                    if daemon_path is not None and identity(daemon_path) != daemon_seen:
                        raise StateError(f"{daemon_path} was written while it was being copied: stop the daemon, then migrate again")
            except psycopg.Error as exc:
                why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise PgError(f"the copy into the PostgreSQL state at {report.target} failed, nothing was copied: {why}") from None
            finally:
                conn.close()
        finally:
            if daemon is not None:
                daemon.close()
    _check_committed(url, report)
    return report


def _check_committed(url: str, report: StateMigration) -> None:
    """After the commit, a new reader (`StateStore(url, readonly=True)`) sees each tenant's objects."""
    with StateStore(url, readonly=True) as mirror:
        for tenant, counts in report.objects.items():
            if mirror.counts(tenant) != counts:
                raise MigrationMismatch(
                    f"after the commit, PostgreSQL shows other objects of tenant {tenant} than the file: another process writes it"
                )
