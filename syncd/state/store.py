"""The local store: snapshots of tenants, their runs and their changes, in one SQLite file or in
the PostgreSQL state a fleet shares (`StateStore("postgresql://...")`, issue 13).

Why snapshots: a crawl reads for minutes and can die at any point. Rows it reads go to
`staged` under its run id; only `finish_run` merges them into `resources` (the current view),
in ONE transaction that also decides deletions and writes `changes` (`syncd.state.merge`).
A run that never finishes is abandoned (staged rows dropped), so the current view is always
the result of whole runs.

Why deletions are driven by listings: a row is deleted only when the list it came from was
read cleanly in the run (`record_listing(ok=True)`) and did not contain it, or when its
parent is deleted in the same run. A list that failed, or was not read, is unknown: its rows
stay current. A run over one organization therefore never deletes another's rows.

Contract for the caller (the crawler):
- `record_listing(ok=True)` only after EVERY row of that list was staged in this run;
- a (tenant, kind, id) comes from one listing; staging it twice keeps the last version;
- `complete_scope` only when every list and object of the scope was read at that token.

Threads: public methods hold an internal lock and the connection allows other threads, so
a StateStore can be used from `anyio.to_thread`; `current()` streams from one cursor, so finish
iterating before writing from another thread.

Backends: the code above sees one interface. Which one is decided once, where the setting is
read (`syncd.state.location`: a `Path` is a file, a `str` a PostgreSQL state's URL, or a
`StateBackend` given as it is). `self.db` is the SQLite file's `Database`
(sqlite-utils) or the PostgreSQL handle (`syncd.state.pg_database`) with the same `execute`,
`query` and `atomic`; the few statements that differ come from `self.dialect`
(`syncd.state.dialect`). One writer process at a time: of the whole file (a `flock` beside
it, `WriterLock`, never waited for), or of each tenant on the server (session advisory locks
waited for up to `lock_wait` seconds, `syncd.state.pg_writers`: replicas of a fleet write
different tenants side by side).

Read-only (`StateStore(path, readonly=True)`): for backups being exported, restored or looked
at, and for a look at a mirror another process writes; every write method raises StateError.
How a file is opened so (nothing written beside it, one snapshot) is in `sqlite_file`; on
PostgreSQL it is one read-only REPEATABLE READ transaction for the StateStore's life.

Failures are one line (module `syncd.errors`): an SQLite error met while a StateStore is used in
a `with` block leaves it as a StateError naming the file when the file is damaged (exit 2),
or a `syncd.files.StorageError` when the disk is full (exit 1) or the place is read-only or not
writable (exit 2). Files it creates (the state file, its folder, `-wal`, `-shm`, `.lock`) are
private (0600, 0700), whatever the umask (`syncd.files`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from syncd.state import packing
from syncd.state.diff import ChangeSummary
from syncd.state.errors import StateError
from syncd.state.holds import StoreHolds
from syncd.state.location import StateBackend, StateLocation, state_backend
from syncd.state.merge import merge_run
from syncd.state.reads import FINISHED, StoreReads
from syncd.state.sqlite_schema import utc_now
from syncd.state.sqlite_file import (  # noqa: F401  (database_failure and the readers: used by syncd.read.check, syncd.cli)
    _connect_readonly,
    _sqlite_header,
    compact_free_pages,
    empty_apart,
    database_failure,
    identity,
)
from syncd.state.staging import StoreStaging, writes

__all__ = ["FINISHED", "StateStore"]

_ENDED = ("failed", "cancelled")
_writes = writes


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


class StateStore(StoreReads, StoreStaging, StoreHolds):
    """A state file, or the PostgreSQL state at a `state_url`, opened for reading and for
    writing runs (see the module docstring).

    `readonly=True` opens an existing state for reading only (module docstring, "Read-only"):
    StateError, one line, for a missing file, a file that is not SQLite or not syncd's, a
    damaged one, or one whose schema this syncd cannot read without migrating it."""

    def __init__(
        self,
        path: StateLocation | StateBackend,
        *,
        create: bool = True,
        readonly: bool = False,
        busy_timeout: float = 30.0,
        batch_size: int = 1000,
        lock_wait: float = 600.0,
    ) -> None:
        self.readonly = readonly
        self.lock_wait = lock_wait
        """PostgreSQL: seconds a writer waits for another process's run of the same tenant to
        end (`start_run`, `hold`); 0 tries once. SQLite never waits."""
        self.batch_size = batch_size
        self._lock = threading.RLock()
        self._active: dict[int, str] = {}  # open runs of this StateStore -> their tenant
        self._closed = False
        backend = state_backend(path)  # the backend was chosen where the setting was read
        self.path: StateLocation = backend.location
        """The file's path, or the URL of the PostgreSQL state (what reopens it)."""
        self.where = backend.where
        """The state, as messages name it (a URL without its password)."""
        self.dialect = backend.dialect
        opened = backend.open(readonly=readonly, create=create, busy_timeout=busy_timeout)
        self.db: Any = opened.db
        self._writer: Any = opened.writer
        self._opened_as = opened.opened_as
        self.packer = packing.of(self.db.conn) if self.dialect.sqlite else None
        self.immutable = opened.opened_as is not None
        """True when opened read-only as an immutable file (see `check_unchanged`)."""

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.close()
        except sqlite3.DatabaseError as failure:
            if exc is None:
                raise (database_failure(self.path, failure) or failure) from None
            # The block's own error says more; runs left open are recovered by the next writer.
        if exc is None:
            self.check_unchanged()
            return
        leaves = _leaves(exc)
        if all(isinstance(leaf, sqlite3.DatabaseError) for leaf in leaves):  # e.g. from a task group
            failure = database_failure(self.path, leaves[0])
            if failure is not None:
                raise failure from None

    def check_unchanged(self) -> None:
        """StateError when a file opened `immutable` was written since it was opened: what
        was read may mix two states of it, so the command should run again. (Files opened
        otherwise are read through SQLite's locks and need no check.)"""
        if self._opened_as is not None and identity(Path(self.path)) != self._opened_as:
            raise StateError(
                f"{self.where} was written while it was being read (a syncd process uses it): run the command again"
            )

    def close(self) -> None:
        """Fail the runs still open (their rows never become current) and close the file."""
        with self._lock:
            if self._closed:
                return
            try:
                for run in list(self._active):
                    self.abandon_run(run, "failed", "the mirror was closed before the run finished")
            finally:
                self._writer.release()
                self._closed = True
                self.db.close()

    # -- writing a run ---------------------------------------------------------------------

    @_writes
    def start_run(self, job: str, tenant: str, scope_ref: str, *, on_wait: Callable[[], object] | None = None) -> int:
        """Open a run. SQLite: the first open run of this StateStore takes the file's writer lock
        (StateBusyError at once when another process holds it) and recovers the runs a dead
        process left `running`. PostgreSQL: the first open run of `tenant` takes that tenant's
        lock, waiting up to `lock_wait` seconds for another process's run of it to end
        (`on_wait` is called between tries: raise from it to stop waiting), and recovers the
        dead runs of that tenant only. It may block: async code calls it through `anyio.to_thread`."""
        if not self.dialect.sqlite:
            return self._start_tenant_run(job, tenant, scope_ref, on_wait)
        with self._lock:
            first = not self._active
            if first:
                self._writer.acquire()
                try:
                    self._recover_locked()
                except BaseException:
                    self._writer.release()
                    raise
            try:
                run = self._insert_run(job, tenant, scope_ref)
            except BaseException:
                if first:
                    self._writer.release()
                raise
            self._active[run] = tenant
            return run

    def _insert_run(self, job: str, tenant: str, scope_ref: str) -> int:
        cursor = self.db.execute(
            "INSERT INTO runs (job, tenant, scope_ref, started_at, status, pid, host) "
            "VALUES (?, ?, ?, ?, 'running', ?, ?)" + ("" if self.dialect.sqlite else " RETURNING id"),
            [job, tenant, scope_ref, utc_now(), os.getpid(), socket.gethostname()],
        )
        return int(cursor.lastrowid or 0) if self.dialect.sqlite else int(cursor.fetchone()[0])

    def require_open(self, run: int) -> str:
        """The tenant of `run`; StateError unless the run is open in this StateStore."""
        with self._lock:
            return self._tenant_of(run)

    def open_runs(self) -> frozenset[int]:
        """Runs open in this StateStore (their rows and intents are still being written)."""
        with self._lock:
            return frozenset(self._active)

    @_writes
    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction under this StateStore's lock.

        Why public: other parts of syncd keep tables of their own in the state file (the write
        side's journal and id map) and must write them atomically, between the crawler's
        transactions, without reaching into the StateStore's internals."""
        with self._lock, self.db.atomic():
            yield self.db

    @contextlib.contextmanager
    def reading(self) -> Iterator[Any]:
        """The database under this StateStore's lock, for consistent reads from any thread."""
        with self._lock:
            yield self.db

    @_writes
    def set_run_stats(self, run: int, stats: Mapping[str, Any]) -> None:
        """Merge `stats` into an open run's statistics (kept with the run)."""
        with self._lock, self.db.atomic():
            self._tenant_of(run)
            previous = self.run(run) or {}
            merged = {**(previous.get("stats") or {}), **stats}
            self.db.execute("UPDATE runs SET stats = ? WHERE id = ?", [json.dumps(merged, default=str), run])

    @_writes
    def close_run(self, run: int, status: str, stats: Mapping[str, Any] | None = None, reason: str = "") -> None:
        """End a run that merges no rows (an apply run, whose effects are its own committed
        rows) as complete, partial, failed or cancelled, and let the writer lock go when it was
        this StateStore's last open run."""
        if status not in FINISHED + _ENDED:
            raise StateError(f"a run ends as one of {FINISHED + _ENDED}, not {status!r}")
        with self._lock:
            self._tenant_of(run)
            previous = self.run(run) or {}
            merged = {**(previous.get("stats") or {}), **(stats or {})}
            self.db.execute(
                "UPDATE runs SET status = ?, finished_at = ?, stats = ?, reason = ? WHERE id = ?",
                [status, utc_now(), json.dumps(merged, default=str), reason or None, run],
            )
            self._end(run)
    @_writes
    def finish_run(
        self,
        run: int,
        status: str = "complete",
        stats: Mapping[str, Any] | None = None,
        quiet_kinds: Iterable[str] = (),
        volatile: Mapping[str, Iterable[str]] | None = None,
    ) -> ChangeSummary:
        """Make what `run` read current, in one transaction, and return its changes' totals.

        `status` is "complete" or "partial" (something was skipped); a run with a failed
        listing is recorded as partial whatever is asked. `stats` (JSON) is kept with the
        run, plus a "mirror" entry with the counts of this merge. Rows of `quiet_kinds`
        (views derived from other rows) are kept current but their changes are not logged.
        An update records the fields that changed, old and new, except a kind's `volatile`
        ones (kind -> field names)."""
        quiet_kinds = frozenset(quiet_kinds)
        if status not in FINISHED:
            raise StateError(f"a run finishes as one of {FINISHED}, not {status!r}")
        with self._lock:
            tenant = self._tenant_of(run)
            try:
                with self.db.atomic():
                    staged = self._scalar("SELECT count(*) FROM staged WHERE run = ?", [run])
                    listing_counts = dict(
                        self.db.execute(
                            f"SELECT status, count(*) FROM {self.dialect.run_listings} WHERE run = ? GROUP BY status", [run]
                        ).fetchall()
                    )
                    if listing_counts.get("failed"):
                        status = "partial"
                    merge_run(self.db, self.dialect, run, tenant, volatile or {}, quiet_kinds, staged=staged)
                    summary = self.summary(run)
                    self._clear_staging(run)
                    merged = {
                        **(stats or {}),
                        "mirror": {
                            "rows": staged,
                            "listings_ok": listing_counts.get("ok", 0),
                            "listings_failed": listing_counts.get("failed", 0),
                            "changes": summary.to_dict(),
                        },
                    }
                    self.db.execute(
                        "UPDATE runs SET status = ?, finished_at = ?, stats = ? WHERE id = ?",
                        [status, utc_now(), json.dumps(merged, default=str), run],
                    )
            except BaseException:
                if self.packer is not None:  # it may hold a dictionary the rollback took away
                    self.packer.forget()
                raise
            try:
                if self.dialect.sqlite and self._alone(run):
                    empty_apart(self.db)  # (after the commit: what it held is merged)
                    compact_free_pages(self.db)  # (its own transaction: the merge is committed)
            finally:
                self._end(run)
            return summary

    @_writes
    def abandon_run(self, run: int, status: str = "cancelled", reason: str = "") -> None:
        """End `run` without merging: the previous snapshot stays current.

        Safe to call on a run that already ended (does nothing), e.g. from a cleanup path.
        """
        if status not in _ENDED:
            raise StateError(f"a run is abandoned as one of {_ENDED}, not {status!r}")
        with self._lock:
            if run not in self._active:
                row = self.run(run)
                if row is None or row["status"] != "running":
                    return
                raise StateError(f"run {run} is not open in this process")
            alone = self.dialect.sqlite and self._alone(run)
            self._drop_runs([run], status, reason, staged=not alone)
            try:
                if alone:  # emptied whole and given back, as after a merge; a failure here loses nothing
                    with contextlib.suppress(sqlite3.DatabaseError):  # (the pages wait for the next run)
                        empty_apart(self.db)
            finally:
                self._end(run)

    @_writes
    def recover(self) -> list[int]:
        """Fail the runs left `running` by a process that died; returns their ids.

        SQLite: raises `StateBusyError` when another live process is writing the file.
        PostgreSQL: the runs of tenants another live process writes are left alone.
        """
        with self._lock:
            if not self.dialect.sqlite:
                return self._writer.recover_idle(self._recover_locked)
            if self._active:
                return self._recover_locked()
            self._writer.acquire()
            try:
                return self._recover_locked()
            finally:
                self._writer.release()

    def _recover_locked(self, tenant: str | None = None) -> list[int]:
        """Fail the `running` runs not open here: of every tenant (SQLite: the file's lock is
        held), or of `tenant` (PostgreSQL: its lock is held, other tenants may be written)."""
        sql, params = "SELECT id FROM runs WHERE status = 'running' ORDER BY id", []
        if tenant is not None:
            sql, params = "SELECT id FROM runs WHERE status = 'running' AND tenant = ? ORDER BY id", [tenant]
        dead = [row[0] for row in self.db.execute(sql, params).fetchall() if row[0] not in self._active]
        if dead:
            self._drop_runs(dead, "failed", "the process writing this run ended before it finished")
        return dead

    def _drop_runs(self, runs: list[int], status: str, reason: str, *, staged: bool = True) -> None:
        """Mark `runs` ended without a merge and drop what they staged (`staged=False`: the
        caller empties this connection's TEMP tables whole afterwards)."""
        with self.db.atomic():
            for run in runs:
                if staged:
                    self._drop_staged(run)
                if self.dialect.sqlite:  # what an earlier syncd staged in the file itself
                    for table in ("staged", "staged_scopes", "listings"):
                        self.db.execute(f"DELETE FROM main.{table} WHERE run = ?", [run])
                self.db.execute(
                    "UPDATE runs SET status = ?, finished_at = ?, reason = ? WHERE id = ?",
                    [status, utc_now(), reason or None, run],
                )

    def _clear_staging(self, run: int) -> None:
        """Drop what `run` staged, once merged; its failed listings stay (in the file itself:
        a file's writer stages in TEMP tables of its own, `syncd.state.tables.apart`)."""
        if not self.dialect.sqlite:
            for table in ("staged", "staged_scopes"):
                self.db.execute(f"DELETE FROM {table} WHERE run = ?", [run])
            self.db.execute("DELETE FROM listings WHERE run = ? AND status = 'ok'", [run])
            return
        self.db.execute(
            "INSERT INTO main.listings (run, tenant, listing, status, error) "
            "SELECT run, tenant, listing, status, error FROM temp.run_listings WHERE run = ? AND status = 'failed'",
            [run],
        )
        if not self._alone(run):  # shared with another run; else emptied whole after the commit (`empty_apart`)
            self._drop_staged(run)

    def _drop_staged(self, run: int) -> None:
        """Delete what `run` staged (on SQLite the names are the writer's TEMP tables, which
        shadow the file's)."""
        for table in ("staged", "staged_scopes", self.dialect.run_listings):
            self.db.execute(f"DELETE FROM {table} WHERE run = ?", [run])

    def _alone(self, run: int) -> bool:
        """Whether `run` is the only run open on this StateStore (its connection's TEMP tables
        hold nothing else)."""
        return not self._active.keys() - {run}

    def _end(self, run: int) -> None:
        tenant = self._active.pop(run)
        if not self.dialect.sqlite:
            self._writer.give(tenant)
        elif not self._active:
            self._writer.release()
