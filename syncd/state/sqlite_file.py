"""Opening the SQLite state file, and what its failures mean (one line each).

Read-only (`StateStore(path, readonly=True)`): for backups being exported, restored or looked
at, and for a look at a mirror another process writes. Nothing is written into the file or
beside it: no migration (an older schema is read as it is, see `sqlite_schema.check_readable`), no
switch to WAL, no writer lock. Why two ways to open:
- a WAL file with no `-wal` beside it is closed (SQLite removes the `-wal` when the last
  connection closes; every backup is such a file). It is opened `immutable`: `mode=ro` alone
  would create `-wal` and `-shm` beside it (and leave them there), and fails on read-only media.
  Should a writer start meanwhile and write the file (a checkpoint), its size or time changes:
  `StateStore.check_unchanged` (run on leaving a `with` block) says so, instead of trusting mixed reads;
- any other file is opened `mode=ro`: a WAL file with a `-wal` beside it (a writer may be
  using it) shares the writers' WAL index, so reads see committed runs only; a
  rollback-journal file (an old one) gets nothing beside it. On read-only media a WAL file
  whose `-wal` is empty is opened `immutable` instead; one whose `-wal` holds frames is
  refused in one line (an immutable read would miss them).
Either way the StateStore reads ONE snapshot: a read transaction is held from the first read
until `close()`, so a run that finishes meanwhile is not half seen.

Every open checks the whole file first (`PRAGMA quick_check`, about a second per GB): a
damaged page is an error (StateError, one line), not a silently shorter status or export,
and a damaged file is not written into; and its schema must be the one syncd's migrations made
(`sqlite_schema.check_made_by_syncd`): what a crafted schema would run (a view over an endless
query in place of a table) is refused before anything reads it.

A stop request (SIGINT, SIGTERM: `syncd.interrupt`) aborts a query under way on a read-only
connection (a progress handler, `stop_on_request`): it only reads, nothing is left half done.
A writer's connection has it only while its file is checked at the open: the writes a stopped
command still makes (its run marked cancelled) must not be aborted.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from sqlite_utils import Database

from syncd import interrupt
from syncd.errors import SyncdError
from syncd.files import create_private, private_dir, storage_error
from syncd.safe_read import FileRefused, check_regular, open_regular_file
from syncd.state import packing
from syncd.state.errors import StateError
from syncd.state.dialect import SQLITE
from syncd.state.sqlite_schema import PACKED, check_readable, migrate
from syncd.state.tables import LISTINGS, STAGED, STAGED_SCOPES, apart
from syncd.temp_dir import TempDirError, chosen, sqlite_temp_dir, use_chosen

__all__ = ["database_failure", "identity", "open_readonly", "open_writable", "stop_on_request", "stopped"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
PROGRESS_STEPS = 10_000
"""SQLite steps between two calls of the progress handler: well under a millisecond of a query,
and a negligible share of its time."""


def stop_on_request(conn: sqlite3.Connection) -> None:
    """Abort the query under way on `conn` once a stop was requested (module docstring); the
    query raises `sqlite3.OperationalError` ("interrupted")."""
    conn.set_progress_handler(interrupt.stop_requested, PROGRESS_STEPS)


def stopped(exc: BaseException) -> bool:
    """Whether `exc` is a query a stop request aborted (`stop_on_request`): not damage to report."""
    return isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorname", "") == "SQLITE_INTERRUPT"


def identity(path: Path) -> tuple[int, int, int, int] | None:
    """What changes when a file is written (inode, size, modification time), or None."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _sqlite_header(path: Path) -> bytes:
    """The first 100 bytes of `path`, after checking it is an SQLite file (StateError). Opened
    without waiting and checked regular first (`syncd.safe_read`): SQLite, which opens it next,
    would wait on a FIFO for ever."""
    try:
        with open_regular_file(path, "state file") as handle:
            header = handle.read(100)
    except FileNotFoundError:
        raise StateError(f"no state file at {path}") from None
    except FileRefused as exc:
        raise StateError(f"{path} is not a syncd mirror or backup ({exc.kind or exc.reason})") from None
    except OSError as exc:
        raise StateError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if not header:
        raise StateError(f"{path} is not a syncd mirror or backup (an empty file)")
    if not header.startswith(_SQLITE_MAGIC):
        raise StateError(f"{path} is not a syncd mirror or backup (not an SQLite database)")
    if len(header) < 100:
        raise StateError(f"{path} is not a usable syncd mirror or backup (a truncated SQLite file)")
    return header


def _connect_readonly(path: Path, immutable: bool, busy_timeout: float) -> sqlite3.Connection:
    """A read-only connection whose schema was read (so a file SQLite cannot open fails here)."""
    query = "immutable=1" if immutable else "mode=ro"
    conn = packing.connect(f"{path.resolve().as_uri()}?{query}", uri=True, timeout=busy_timeout, check_same_thread=False)
    try:
        stop_on_request(conn)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def _unwritable_errno(path: Path) -> int | None:
    """Why `path` (or the folder it would be made in) cannot be written: EROFS, EACCES or None."""
    place = path if path.exists() else path.parent
    try:
        if os.statvfs(place).f_flag & os.ST_RDONLY:
            return errno.EROFS
    except OSError:
        return None
    return None if os.access(place, os.W_OK) else errno.EACCES


def database_failure(path: Path | str, exc: BaseException) -> SyncdError | None:
    """The one-line error for an SQLite error met on the state file `path` (a Path, or a
    description when the file is not known): damaged (StateError, exit 2), disk full
    (StorageError, exit 1), read-only or not writable (StorageError, exit 2); None when `exc`
    is none of these (it stays what it is)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if name.startswith("SQLITE_FULL") or "disk is full" in text:
        error = storage_error(OSError(errno.ENOSPC, "no space left on the device (the database or disk is full)"), path)
        if error is not None:  # the staging is in the temporary directory (`stage_apart`): it may be the one full
            error.args = (f"{error} (or free space in {sqlite_temp_dir()}: the temporary directory, where a run stages "
                          "what it reads; set temp_dir to choose another)",)  # fmt: skip
        return error
    if name.startswith(("SQLITE_IOERR_GETTEMPPATH", "SQLITE_CANTOPEN_NOTEMPDIR")):
        place = chosen()  # None: a command that reads no configuration (export, check), SQLite's own choice
        if place is not None:
            return TempDirError(f"{path}: no writable temporary directory: the temporary directory {place} is not "
                                "writable or is gone: set temp_dir to a writable place or make it writable")  # fmt: skip
        return TempDirError(f"{path}: no writable temporary directory (SQLITE_TMPDIR, TMPDIR, /var/tmp, /usr/tmp, /tmp): "
                            "set SQLITE_TMPDIR to a writable place")  # fmt: skip
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in text or "not a database" in text:
        return StateError(
            f"{path} cannot be read, it is damaged: {text}; restore it from a backup, or sync into a new file (--db)"
        )
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")) or "readonly database" in text:
        why = _unwritable_errno(path) if isinstance(path, Path) else None
        if why is not None:
            error = storage_error(OSError(why, os.strerror(why)), path, doing="write it")
            if error is not None:
                error.args = (f"{error}; `syncd status` and `syncd export` only read a mirror or backup",)
            return error
        return StateError(f"{path} cannot be opened: {text}")
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
        return storage_error(OSError(errno.EIO, text), path) or StateError(f"{path}: {text}: check the disk and run again")
    return None


def _check_whole(conn: sqlite3.Connection, path: Path) -> None:
    """StateError (one line) unless SQLite finds every page of the file sound."""
    try:
        problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as exc:
        failure = database_failure(path, exc)
        if failure is None:
            raise
        raise failure from None
    if problems != ["ok"]:
        raise StateError(
            f"{path} cannot be read, it is damaged: database disk image is malformed "
            f"({'; '.join(problems)[:200]}); restore it from a backup, or sync into a new file (--db)"
        )



def open_writable(path: Path, *, create: bool, busy_timeout: float) -> Database:
    """The state file opened for writing (created, private, when missing and `create`),
    in WAL mode, checked whole and migrated; StateError or StorageError in one line."""
    if not create and not path.exists():
        raise StateError(f"no state file at {path}")
    use_chosen(create=True)  # before the first TEMP table: the staging's file goes there
    try:
        # Private from the start: SQLite gives -wal and -shm the mode of the file.
        private_dir(path.parent)
        created = create_private(path)
        check_regular(path, "state file")  # SQLite would wait on a FIFO for ever
    except FileRefused as exc:
        raise StateError(f"{path} is not a syncd mirror or backup ({exc.kind})") from None
    except OSError as exc:
        failure = storage_error(exc, doing="create the state file")
        raise (failure or StateError(f"{path}: cannot create the state file: {exc.strerror or exc}")) from None
    try:
        conn = packing.connect(str(path), timeout=busy_timeout, check_same_thread=False)
    except sqlite3.DatabaseError as exc:
        raise (database_failure(path, exc) or StateError(f"{path} cannot be opened: {exc}")) from None
    try:
        db = Database(conn, execute_plugins=False)
        db.execute("PRAGMA temp.auto_vacuum = FULL")  # before anything makes the TEMP database (`empty_apart`)
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        if created:  # only an empty file takes it: `compact_free_pages` gives free pages back
            db.execute("PRAGMA auto_vacuum = INCREMENTAL")
        db.enable_wal()
        db.execute("PRAGMA synchronous = NORMAL")  # WAL: safe across crashes of syncd
        db.execute("PRAGMA foreign_keys = ON")
        stop_on_request(conn)  # (the check reads the whole file: a stop request ends it)
        try:
            _check_whole(conn, path)
        finally:
            conn.set_progress_handler(None, 0)
        if PACKED in migrate(db, where=str(path)):
            compact_free_pages(db)  # (the objects as text, left free by the rebuild)
        stage_apart(db)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if stopped(exc):
            raise
        failure = database_failure(path, exc)
        if isinstance(failure, StateError) or failure is None:
            failure = StateError(f"{path} is not a usable syncd state file: {exc}")
        raise failure from None
    except BaseException:
        conn.close()
        raise
    return db


FREE_SHARE = 0.25
"""The share of a file's pages left free (by deletions) above which it is given back."""


APART = {"staged": STAGED, "staged_scopes": STAGED_SCOPES, "run_listings": LISTINGS}
"""The TEMP tables a file's writer stages in (`syncd.state.tables.apart`: why), by name: the
listings are `run_listings`, so that the file's own (failed ones, kept) stay in sight."""


def stage_apart(db: Database) -> None:
    """Keep what this connection's runs stage in TEMP tables (`APART`). SQLite keeps them in a
    file of the process's temporary directory (`syncd.temp_dir`: `temp_dir`, else `tmp` in the
    state directory), unlinked, gone with the connection: a crash leaves nothing to drop."""
    for name, table in APART.items():
        db.execute(apart(table).create(SQLITE, named=name, temp=True))


def empty_apart(db: Database) -> None:
    """Empty the TEMP tables whole once no run uses them (outside a transaction), and give the
    temporary file's pages back: a daemon's connection outlives its runs, and would hold a first
    crawl's staging, out of sight in the temporary directory, for as long. The TEMP database is
    `auto_vacuum = FULL` from the connection's first statement, so the commit that empties it
    cuts the file down: when every free page is at its end, FULL drops them whole, where
    `PRAGMA incremental_vacuum` looks each one up in the free list (8.6 s after a million
    staged objects against 0.7 s). Without a journal: emptying a million staged rows journaled
    every page it freed (3.9 s against 0.7 s), and nothing there needs undoing: what they held
    is merged and committed."""
    db.execute("PRAGMA temp.journal_mode = OFF")
    try:
        with db.atomic():
            for name in APART:
                db.execute(f"DELETE FROM temp.{name}")
    finally:
        db.execute("PRAGMA temp.journal_mode = DELETE")


def incremental_vacuum(db: Database, schema: str) -> None:
    """Give back every free page of `schema` (`main`, `temp`): run `PRAGMA incremental_vacuum`
    to its end, outside a transaction. The pragma frees one page per step, each step a row of no
    columns; Python 3.11's sqlite3 cursor takes a statement without columns as done after its
    first step (one page freed, `fetchall()` gives []), 3.12's returns the empty rows.
    `executescript` steps every statement to its end on both. It commits an open transaction
    first: none must be open here (another's, on this shared connection, would be cut in two)."""
    if db.conn.in_transaction:
        raise RuntimeError(f"incremental_vacuum of {schema} inside a transaction: executescript would commit it")
    db.executescript(f"PRAGMA {schema}.incremental_vacuum")


def compact_free_pages(db: Database) -> int:
    """Give the file's free pages back to the disk when they are more than `FREE_SHARE` of it,
    and return how many went. A first crawl once staged every object in the file, leaving it
    twice the mirror; the staging is apart now (`stage_apart`), but a file staged in by an
    earlier syncd, or one that lost much (a retention prune), still has such free pages. Only a
    file made with `auto_vacuum = INCREMENTAL` (every file this syncd creates) can; for others
    this does nothing."""
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    if not pages or free <= pages * FREE_SHARE or db.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
        return 0
    incremental_vacuum(db, "main")
    return free - db.execute("PRAGMA freelist_count").fetchone()[0]


def open_readonly(path: Path, *, busy_timeout: float) -> tuple[Database, tuple[int, int, int, int] | None]:
    """The file opened for reading one snapshot (module docstring), and, when it was opened
    `immutable`, what identifies its state then (see `identity`); None otherwise."""
    header = _sqlite_header(path)
    use_chosen(create=False)  # big sorts spill there; nothing is made for a reader
    wal_mode = header[18] == 2
    wal = path.with_name(path.name + "-wal")
    immutable = wal_mode and not wal.exists()
    opened_as = identity(path)
    try:
        try:
            conn = _connect_readonly(path, immutable, busy_timeout)
        except sqlite3.OperationalError:
            # Read-only media: SQLite cannot make the WAL index beside the file, and
            # nothing can be writing it there. A `-wal` holding frames, though, would be
            # ignored by an immutable read: that is an error, not a fallback.
            if immutable or not wal_mode or (wal.exists() and wal.stat().st_size > 0):
                raise
            conn = _connect_readonly(path, True, busy_timeout)
            immutable = True
    except sqlite3.DatabaseError as exc:
        if stopped(exc):
            raise
        why = str(exc)
        if wal.exists() and not immutable:
            why += f" (it has a write-ahead log, {wal.name}: copy or open it with its -wal and -shm files)"
        raise StateError(f"{path} is not a usable syncd mirror or backup: {why}") from None
    db = Database(conn, execute_plugins=False)
    try:
        conn.execute("BEGIN")  # one snapshot for the StateStore's life (deferred: taken at the first read)
        check_readable(db, where=str(path))
        _check_whole(conn, path)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if stopped(exc):
            raise
        raise StateError(f"{path} is not a usable syncd mirror or backup: {exc}") from None
    except BaseException:
        conn.close()
        raise
    return db, (opened_as if immutable else None)
