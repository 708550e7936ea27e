"""Moving a SQLite state into the PostgreSQL state a fleet shares: `syncd state migrate` (issue 13).

What moves: every table of the state file (`runs`, `resources`, `staged`, `listings`, `scopes`,
`staged_scopes`, `changes`, `idmap`, `journal`) into the same tables on the server
(`syncd.state.pg_schema`), ids as they are, and what else the state directory holds, as the
command hands it in (`StatePart`): the daemon's run history (`daemon.db`) into `fleet_runs`
(`syncd.daemon.history_copy`). The id sequences move past the highest id the file
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

from collections.abc import Callable
from pathlib import Path

import psycopg

from syncd.config import names_postgres
from syncd.errors import UsageError
from syncd.pg.connect import PgError, connect, display_url
from syncd.pg.migrations import migrate
from syncd.state.errors import StateBusyError, StateError
from syncd.state.lock import lock_holder
from syncd.state.pg_database import PgDatabase
from syncd.state.pg_schema import MIRROR_MIGRATIONS
from syncd.state.state_copy import MigrationMismatch, Progress, StateCopier, StateMigration, StatePart, TableCount
from syncd.state.store import StateStore

__all__ = ["MigrationMismatch", "PartOf", "StateMigration", "TableCount", "migrate_state"]

PartOf = Callable[[Path | None], StatePart]
"""What else moves, given the state directory (None: one state file was given)."""


def _sources(source: Path, part_of: PartOf | None) -> tuple[Path, StatePart | None]:
    """(the state file, what else moves): a state directory holds both."""
    if source.is_dir():
        return source / "syncd.db", (part_of(source) if part_of is not None else None)
    if not source.exists():
        raise StateError(f"no state directory or state file at {source}")
    return source, (part_of(None) if part_of is not None else None)


def migrate_state(
    source: Path, url: str, *, with_open_runs: bool = False, progress: Progress | None = None, part_of: PartOf | None = None
) -> StateMigration:
    """Copy the SQLite state at `source` (a state directory, or one state file) into the empty
    PostgreSQL state at `url`, verified, in one transaction (module docstring); with it what
    `part_of` finds beside it (the daemon's history: the command hands it). One-line errors:
    UsageError (not a URL), StateError (file missing or damaged, open runs, a live writer, a
    target in use), PgError (server), MigrationMismatch (verification)."""
    if not names_postgres(url):
        raise UsageError("--to must be the URL of a PostgreSQL state (postgresql://USER@HOST/DB)")
    db_path, part = _sources(source, part_of)
    holder = lock_holder(db_path.with_name(db_path.name + ".lock"))
    if holder is not None:
        raise StateBusyError(f"state file {db_path} is being written by a syncd process ({holder}): stop it, then migrate")
    report = StateMigration(source=db_path, daemon_history=part.path if part is not None else None, target=display_url(url))
    show: Progress = progress or (lambda table, done, total: None)
    with StateStore(db_path, readonly=True) as store:
        report.open_runs = [run for (run,) in store.db.execute("SELECT id FROM runs WHERE status = 'running' ORDER BY id").fetchall()]
        if report.open_runs and not with_open_runs:
            raise StateError(
                f"{db_path} has runs still open ({', '.join(map(str, report.open_runs[:5]))}): a syncd process ended during them; "
                "pass --with-open-runs to copy them as they are (the next writer of their tenant on PostgreSQL ends them as failed)"
            )
        if part is not None:
            part.open()
        try:
            conn = connect(url, application_name="syncd state migrate")
            try:
                migrate(conn, (*MIRROR_MIGRATIONS, *(part.migrations if part is not None else ())))
                copier = StateCopier(store, part, PgDatabase(conn), report, show)
                with conn.transaction():
                    copier.claim_empty_target()
                    copier.copy_mirror()
                    copier.copy_part()
                    copier.verify()
                    store.check_unchanged()  # an immutable read of a file written meanwhile: refuse, roll back
                    if part is not None:
                        part.check_unchanged()
            except psycopg.Error as exc:
                why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise PgError(f"the copy into the PostgreSQL state at {report.target} failed, nothing was copied: {why}") from None
            finally:
                conn.close()
        finally:
            if part is not None:
                part.close()
    _check_committed(url, report)
    return report


def _check_committed(url: str, report: StateMigration) -> None:
    """After the commit, a new reader (`StateStore(url, readonly=True)`) sees each tenant's objects."""
    with StateStore(url, readonly=True) as store:
        for tenant, counts in report.objects.items():
            if store.counts(tenant) != counts:
                raise MigrationMismatch(
                    f"after the commit, PostgreSQL shows other objects of tenant {tenant} than the file: another process writes it"
                )
