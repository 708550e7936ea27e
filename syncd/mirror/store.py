"""The mirror: one SQLite file holding snapshots of tenants, their runs and their changes.

Why snapshots: a crawl reads for minutes and can die at any point. Rows it reads go to
`staged` under its run id; only `finish_run` merges them into `resources` (the current view),
in ONE transaction that also decides deletions and writes `changes`. A run that never
finishes is abandoned (staged rows dropped), so the current view is always the result of
whole runs.

Why deletions are driven by listings: a row is deleted only when the list it came from was
read cleanly in the run (`record_listing(ok=True)`) and did not contain it, or when its
parent is deleted in the same run. A list that failed, or was not read, is unknown: its rows
stay current. A run over one organization therefore never deletes another's rows.

Contract for the caller (the crawler):
- `record_listing(ok=True)` only after EVERY row of that list was staged in this run;
- a (tenant, kind, id) comes from one listing; staging it twice keeps the last version;
- `complete_scope` only when every list and object of the scope was read at that token.

Threads: public methods hold an internal lock and the connection allows other threads, so
a Mirror can be used from `anyio.to_thread`; `current()` streams from one cursor, so finish
iterating before writing from another thread.

Read-only (`Mirror(path, readonly=True)`): for backups being exported, restored or looked
at, and for a look at a mirror another process writes. Nothing is written into the file or
beside it: no migration (an older schema is read as it is, see `schema.check_readable`), no
switch to WAL, no writer lock, and every write method raises MirrorError. Why two ways to open:
- a WAL file with no `-wal` beside it is closed (SQLite removes the `-wal` when the last
  connection closes; every backup is such a file). It is opened `immutable`: `mode=ro` alone
  would create `-wal` and `-shm` beside it (and leave them there), and fails on read-only media.
  Should a writer start meanwhile and write the file (a checkpoint), its size or time changes:
  `check_unchanged` (run on leaving a `with` block) says so, instead of trusting mixed reads;
- any other file is opened `mode=ro`: a WAL file with a `-wal` beside it (a writer may be
  using it) shares the writers' WAL index, so reads see committed runs only; a
  rollback-journal file (an old one) gets nothing beside it. On read-only media a WAL file
  whose `-wal` is empty is opened `immutable` instead; one whose `-wal` holds frames is
  refused in one line (an immutable read would miss them).
Either way the Mirror reads ONE snapshot: a read transaction is held from the first read
until `close()`, so a run that finishes meanwhile is not half seen.

Every open checks the whole file first (`PRAGMA quick_check`, about a second per GB): a
damaged page is an error (MirrorError, one line), not a silently shorter status or export,
and a damaged file is not written into.

Failures are one line (module `syncd.errors`): an SQLite error met while a Mirror is used in
a `with` block leaves it as a MirrorError naming the file when the file is damaged (exit 2),
or a `syncd.files.StorageError` when the disk is full (exit 1) or the place is read-only or not
writable (exit 2). Files it creates (the state file, its folder, `-wal`, `-shm`, `.lock`) are
private (0600, 0700), whatever the umask (`syncd.files`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import socket
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from sqlite_utils import Database

from syncd.errors import SyncdError
from syncd.files import create_private, private_dir, storage_error
from syncd.ordering import moved_items
from syncd.mirror.diff import ChangeSummary, changed_fields, compose, summarise
from syncd.mirror.errors import MirrorError
from syncd.mirror.lock import WriterLock
from syncd.mirror.rows import Row
from syncd.mirror.schema import check_readable, migrate, utc_now

__all__ = ["FINISHED", "Mirror"]

#: Statuses of runs whose rows were merged into the current view.
FINISHED = ("complete", "partial")
_ENDED = ("failed", "cancelled")

_TITLE = (
    "coalesce(json_extract({d}, '$.title'), json_extract({d}, '$.name'), json_extract({d}, '$.label'), "
    "json_extract({d}, '$.displayName'), json_extract({d}, '$.user.displayName'), "
    "json_extract({d}, '$.email'), json_extract({d}, '$.user.email'), json_extract({d}, '$.path'))"
)
_COLUMNS = "tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash"

_STAGE = f"""
INSERT INTO staged (run, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run, tenant, kind, id) DO UPDATE SET
    org = excluded.org, parent_kind = excluded.parent_kind, parent_id = excluded.parent_id,
    position = excluded.position, listing = excluded.listing, scope = excluded.scope,
    data = excluded.data, hash = excluded.hash
"""

_CHANGES_INSERT = (
    "INSERT INTO changes (run, tenant, kind, id, op, old_hash, new_hash, old_parent_id, parent_id, "
    "old_position, position, title) "
)

_FIELDS_FUNCTION = "syncd_changed_fields"
"""SQL function (kind, old data, new data) -> the `fields` JSON of an update (see `_fields_json`)."""


def _fields_json(volatile: Mapping[str, Iterable[str]]) -> Callable[[str, str, str], str | None]:
    """The SQL function that records what an update changed, `volatile` fields of each kind
    left out (they are left out of its hash too). Never raises: a failure inside an SQL
    function would abort the merge, and a change without details is better than no run."""

    def fields(kind: str, old: str, new: str) -> str | None:
        try:
            changed, omitted = changed_fields(json.loads(old), json.loads(new), volatile.get(kind, ()))
            return json.dumps({"changed": changed, "omitted": omitted}, ensure_ascii=False, default=str)
        except (ValueError, TypeError, RecursionError, AttributeError):
            return None

    return fields


def _decode_fields(row: dict[str, Any]) -> dict[str, Any]:
    """`fields` of a change row as `fields` (a list, or None when not recorded) and
    `fields_omitted`; rows of a file older than the column get None."""
    raw = row.pop("fields", None)
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict) and isinstance(value.get("changed"), list):
        row["fields"], row["fields_omitted"] = value["changed"], int(value.get("omitted") or 0)
    else:
        row["fields"], row["fields_omitted"] = None, 0
    return row


# The merge of a finished run, in order; all take :run and :tenant.
_MERGE_BEFORE_DELETIONS = (
    # New rows, and rows that come back after having been deleted.
    _CHANGES_INSERT
    + f"""SELECT :run, s.tenant, s.kind, s.id, 'created', NULL, s.hash, NULL, s.parent_id, NULL, s.position,
              {_TITLE.format(d="s.data")}
       FROM staged s LEFT JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
       WHERE s.run = :run AND (r.id IS NULL OR r.deleted_run IS NOT NULL)
       ORDER BY s.kind, s.id""",
    # The previous version is at hand here: what changed is recorded with the change.
    "INSERT INTO changes (run, tenant, kind, id, op, old_hash, new_hash, old_parent_id, parent_id, "
    "old_position, position, title, fields) "
    + f"""SELECT :run, s.tenant, s.kind, s.id, 'updated', r.hash, s.hash, r.parent_id, s.parent_id,
              r.position, s.position, {_TITLE.format(d="s.data")}, {_FIELDS_FUNCTION}(s.kind, r.data, s.data)
       FROM staged s JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
       WHERE s.run = :run AND r.deleted_run IS NULL AND r.hash IS NOT s.hash
       ORDER BY s.kind, s.id""",
    # Moves to another parent; moves among the same siblings are found by `_reorders`.
    _CHANGES_INSERT
    + f"""SELECT :run, s.tenant, s.kind, s.id, 'moved', r.hash, s.hash, r.parent_id, s.parent_id,
              r.position, s.position, {_TITLE.format(d="s.data")}
       FROM staged s JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
       WHERE s.run = :run AND r.deleted_run IS NULL
         AND (r.parent_id IS NOT s.parent_id OR r.parent_kind IS NOT s.parent_kind)
       ORDER BY s.kind, s.id""",
    # Everything seen becomes current (first_seen_run is kept for rows seen before).
    f"""INSERT INTO resources ({_COLUMNS}, first_seen_run, last_seen_run, deleted_run)
        SELECT {_COLUMNS}, run, run, NULL FROM staged WHERE run = :run AND true
        ON CONFLICT (tenant, kind, id) DO UPDATE SET
            org = excluded.org, parent_kind = excluded.parent_kind, parent_id = excluded.parent_id,
            position = excluded.position, listing = excluded.listing, scope = excluded.scope,
            data = excluded.data, hash = excluded.hash, last_seen_run = excluded.last_seen_run,
            deleted_run = NULL""",
    # A row missing from a list read cleanly in this run is gone.
    """UPDATE resources SET deleted_run = :run WHERE rowid IN (
           SELECT r.rowid FROM listings l
           CROSS JOIN resources r ON r.tenant = l.tenant AND r.listing = l.listing AND r.deleted_run IS NULL
           WHERE l.run = :run AND l.tenant = :tenant AND l.status = 'ok' AND r.last_seen_run != :run)""",
)

# Sibling groups whose order changed: (kind, parent_kind, parent_id).
_REORDERED_GROUPS = """
SELECT DISTINCT s.kind, s.parent_kind, s.parent_id
FROM staged s JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
WHERE s.run = :run AND r.deleted_run IS NULL AND r.parent_id IS s.parent_id
  AND r.parent_kind IS s.parent_kind AND r.position IS NOT s.position
"""

# The siblings of one group that kept their parent, in their new order, with both positions.
_GROUP_SIBLINGS = f"""
SELECT s.id, r.position AS old_position, s.position, r.hash, s.hash AS new_hash, s.parent_id,
       {_TITLE.format(d="s.data")} AS title
FROM staged s JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
WHERE s.run = :run AND s.kind = :kind AND s.parent_kind IS :parent_kind AND s.parent_id IS :parent_id
  AND r.deleted_run IS NULL AND r.parent_id IS s.parent_id AND r.parent_kind IS s.parent_kind
  AND s.position IS NOT NULL AND r.position IS NOT NULL
ORDER BY s.position, s.id
"""

# Children of a row deleted in this run are gone too, whatever happened to their lists.
_CASCADE = """
UPDATE resources SET deleted_run = :run WHERE rowid IN (
    SELECT c.rowid FROM resources p
    CROSS JOIN resources c ON c.tenant = p.tenant AND c.parent_id = p.id AND c.parent_kind = p.kind
    WHERE p.tenant = :tenant AND p.deleted_run = :run
      AND c.deleted_run IS NULL AND c.last_seen_run != :run)
"""

_MERGE_AFTER_DELETIONS = (
    _CHANGES_INSERT
    + f"""SELECT :run, tenant, kind, id, 'deleted', hash, NULL, parent_id, parent_id, position, position,
              {_TITLE.format(d="data")}
       FROM resources WHERE tenant = :tenant AND deleted_run = :run ORDER BY kind, id""",
    # A scope that lost rows must be read again, unless this run read it completely.
    """DELETE FROM scopes WHERE tenant = :tenant AND scope IN (
           SELECT DISTINCT scope FROM resources
           WHERE tenant = :tenant AND deleted_run = :run AND scope IS NOT NULL)""",
    """INSERT INTO scopes (tenant, scope, token, run)
       SELECT tenant, scope, token, run FROM staged_scopes WHERE run = :run AND true
       ON CONFLICT (tenant, scope) DO UPDATE SET token = excluded.token, run = excluded.run""",
)


_SQLITE_MAGIC = b"SQLite format 3\x00"
_WRITES = TypeVar("_WRITES", bound=Callable[..., Any])


def _writes(method: _WRITES) -> _WRITES:
    """Mark a method that writes the file: it raises MirrorError on a read-only Mirror."""

    @functools.wraps(method)
    def guarded(self: Mirror, *args: Any, **kwargs: Any) -> Any:
        if self.readonly:
            raise MirrorError(f"{self.path} is open read-only: {method.__name__} would write it")
        return method(self, *args, **kwargs)

    return guarded  # type: ignore[return-value]


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    """What changes when a file is written (inode, size, modification time), or None."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _sqlite_header(path: Path) -> bytes:
    """The first 100 bytes of `path`, after checking it is an SQLite file (MirrorError)."""
    try:
        with open(path, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise MirrorError(f"{path} is not a syncd mirror or backup (not a regular file)")
            header = handle.read(100)
    except FileNotFoundError:
        raise MirrorError(f"no state file at {path}") from None
    except IsADirectoryError:
        raise MirrorError(f"{path} is not a syncd mirror or backup (a directory)") from None
    except OSError as exc:
        raise MirrorError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if not header:
        raise MirrorError(f"{path} is not a syncd mirror or backup (an empty file)")
    if not header.startswith(_SQLITE_MAGIC):
        raise MirrorError(f"{path} is not a syncd mirror or backup (not an SQLite database)")
    if len(header) < 100:
        raise MirrorError(f"{path} is not a usable syncd mirror or backup (a truncated SQLite file)")
    return header


def _connect_readonly(path: Path, immutable: bool, busy_timeout: float) -> sqlite3.Connection:
    """A read-only connection whose schema was read (so a file SQLite cannot open fails here)."""
    query = "immutable=1" if immutable else "mode=ro"
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, timeout=busy_timeout, check_same_thread=False)
    try:
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
    description when the file is not known): damaged (MirrorError, exit 2), disk full
    (StorageError, exit 1), read-only or not writable (StorageError, exit 2); None when `exc`
    is none of these (it stays what it is)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if name.startswith("SQLITE_FULL") or "disk is full" in text:
        return storage_error(OSError(errno.ENOSPC, "no space left on the device (the database or disk is full)"), path)
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in text or "not a database" in text:
        return MirrorError(
            f"{path} cannot be read, it is damaged: {text}; restore it from a backup, or sync into a new file (--db)"
        )
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")) or "readonly database" in text:
        why = _unwritable_errno(path) if isinstance(path, Path) else None
        if why is not None:
            error = storage_error(OSError(why, os.strerror(why)), path, doing="write it")
            if error is not None:
                error.args = (f"{error}; `syncd status` and `syncd export` only read a mirror or backup",)
            return error
        return MirrorError(f"{path} cannot be opened: {text}")
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
        return storage_error(OSError(errno.EIO, text), path) or MirrorError(f"{path}: {text}: check the disk and run again")
    return None


def _check_whole(conn: sqlite3.Connection, path: Path) -> None:
    """MirrorError (one line) unless SQLite finds every page of the file sound."""
    try:
        problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as exc:
        failure = database_failure(path, exc)
        if failure is None:
            raise
        raise failure from None
    if problems != ["ok"]:
        raise MirrorError(
            f"{path} cannot be read, it is damaged: database disk image is malformed "
            f"({'; '.join(problems)[:200]}); restore it from a backup, or sync into a new file (--db)"
        )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _json_path(field: str) -> str:
    """`a.b` -> `$."a"."b"`: a JSON path that survives odd characters in key names."""
    return "$" + "".join('."' + part.replace('"', '\\"') + '"' for part in field.split("."))


class Mirror:
    """A state file opened for reading and for writing runs (see the module docstring).

    `readonly=True` opens an existing file for reading only (module docstring, "Read-only"):
    MirrorError, one line, for a missing file, a file that is not SQLite or not syncd's, a
    damaged one, or one whose schema this syncd cannot read without migrating it."""

    def __init__(
        self,
        path: Path | str,
        *,
        create: bool = True,
        readonly: bool = False,
        busy_timeout: float = 30.0,
        batch_size: int = 1000,
    ) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.immutable = False
        """True when opened read-only as an immutable file (see `check_unchanged`)."""
        self.batch_size = batch_size
        self._lock = threading.RLock()
        self._writer = WriterLock(self.path)
        self._active: dict[int, str] = {}  # open runs of this Mirror -> their tenant
        self._closed = False
        self._opened_as: tuple[int, int, int, int] | None = None
        if readonly:
            self._open_readonly(busy_timeout)
            return
        if not create and not self.path.exists():
            raise MirrorError(f"no state file at {self.path}")
        try:
            # Private from the start: SQLite gives -wal and -shm the mode of the file.
            private_dir(self.path.parent)
            create_private(self.path)
        except OSError as exc:
            failure = storage_error(exc, doing="create the state file")
            raise (failure or MirrorError(f"{self.path}: cannot create the state file: {exc.strerror or exc}")) from None
        try:
            conn = sqlite3.connect(str(self.path), timeout=busy_timeout, check_same_thread=False)
        except sqlite3.DatabaseError as exc:
            raise (database_failure(self.path, exc) or MirrorError(f"{self.path} cannot be opened: {exc}")) from None
        try:
            self.db = Database(conn, execute_plugins=False)
            self.db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            self.db.enable_wal()
            self.db.execute("PRAGMA synchronous = NORMAL")  # WAL: safe across crashes of syncd
            self.db.execute("PRAGMA foreign_keys = ON")
            _check_whole(conn, self.path)
            migrate(self.db, where=str(self.path))
        except sqlite3.DatabaseError as exc:
            conn.close()
            failure = database_failure(self.path, exc)
            if isinstance(failure, MirrorError) or failure is None:
                failure = MirrorError(f"{self.path} is not a usable syncd state file: {exc}")
            raise failure from None
        except BaseException:
            conn.close()
            raise

    def _open_readonly(self, busy_timeout: float) -> None:
        header = _sqlite_header(self.path)
        wal_mode = header[18] == 2
        wal = self.path.with_name(self.path.name + "-wal")
        immutable = wal_mode and not wal.exists()
        opened_as = _identity(self.path)
        try:
            try:
                conn = _connect_readonly(self.path, immutable, busy_timeout)
            except sqlite3.OperationalError:
                # Read-only media: SQLite cannot make the WAL index beside the file, and
                # nothing can be writing it there. A `-wal` holding frames, though, would be
                # ignored by an immutable read: that is an error, not a fallback.
                if immutable or not wal_mode or (wal.exists() and wal.stat().st_size > 0):
                    raise
                conn = _connect_readonly(self.path, True, busy_timeout)
                immutable = True
        except sqlite3.DatabaseError as exc:
            why = str(exc)
            if wal.exists() and not immutable:
                why += f" (it has a write-ahead log, {wal.name}: copy or open it with its -wal and -shm files)"
            raise MirrorError(f"{self.path} is not a usable syncd mirror or backup: {why}") from None
        self.db = Database(conn, execute_plugins=False)
        try:
            check_readable(self.db, where=str(self.path))
            conn.execute("BEGIN")  # one snapshot for the Mirror's life (deferred: taken at the first read)
            _check_whole(conn, self.path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise MirrorError(f"{self.path} is not a usable syncd mirror or backup: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self.immutable = immutable
        self._opened_as = opened_as if immutable else None

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
        """MirrorError when a file opened `immutable` was written since it was opened: what
        was read may mix two states of it, so the command should run again. (Files opened
        otherwise are read through SQLite's locks and need no check.)"""
        if self._opened_as is not None and _identity(self.path) != self._opened_as:
            raise MirrorError(
                f"{self.path} was written while it was being read (a syncd process uses it): run the command again"
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
    def start_run(self, job: str, tenant: str, scope_ref: str) -> int:
        """Open a run; the first open run of this Mirror takes the writer lock and recovers
        the runs a dead process left `running`."""
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
                cursor = self.db.execute(
                    "INSERT INTO runs (job, tenant, scope_ref, started_at, status, pid, host) "
                    "VALUES (?, ?, ?, ?, 'running', ?, ?)",
                    [job, tenant, scope_ref, utc_now(), os.getpid(), socket.gethostname()],
                )
            except BaseException:
                if first:
                    self._writer.release()
                raise
            run = int(cursor.lastrowid or 0)
            self._active[run] = tenant
            return run

    def require_open(self, run: int) -> str:
        """The tenant of `run`; MirrorError unless the run is open in this Mirror."""
        with self._lock:
            return self._tenant_of(run)

    def open_runs(self) -> frozenset[int]:
        """Runs open in this Mirror (their rows and intents are still being written)."""
        with self._lock:
            return frozenset(self._active)

    @_writes
    @contextlib.contextmanager
    def transaction(self) -> Iterator[Database]:
        """One write transaction under this Mirror's lock.

        Why public: other parts of syncd keep tables of their own in the state file (the write
        side's journal and id map) and must write them atomically, between the crawler's
        transactions, without reaching into the Mirror's internals."""
        with self._lock, self.db.atomic():
            yield self.db

    @contextlib.contextmanager
    def reading(self) -> Iterator[Database]:
        """The database under this Mirror's lock, for consistent reads from any thread."""
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
        this Mirror's last open run."""
        if status not in FINISHED + _ENDED:
            raise MirrorError(f"a run ends as one of {FINISHED + _ENDED}, not {status!r}")
        with self._lock:
            self._tenant_of(run)
            previous = self.run(run) or {}
            merged = {**(previous.get("stats") or {}), **(stats or {})}
            self.db.execute(
                "UPDATE runs SET status = ?, finished_at = ?, stats = ?, reason = ? WHERE id = ?",
                [status, utc_now(), json.dumps(merged, default=str), reason or None, run],
            )
            self._end(run)

    def _tenant_of(self, run: int, tenant: str | None = None) -> str:
        owner = self._active.get(run)
        if owner is None:
            raise MirrorError(f"run {run} is not open in this process")
        if tenant is not None and tenant != owner:
            raise MirrorError(f"run {run} is a run of tenant {owner!r}, not {tenant!r}")
        return owner

    @_writes
    def stage(self, run: int, rows: Iterable[Row]) -> int:
        """Write rows read by `run`, one transaction per batch; returns how many.

        Streams: holds one batch in memory whatever the size of `rows`.
        """
        tenant = self._tenant_of(run)
        total = 0
        iterator = iter(rows)
        while batch := list(islice(iterator, self.batch_size)):
            params = []
            for row in batch:
                if row.tenant != tenant:
                    raise MirrorError(f"run {run} is a run of tenant {tenant!r}, got a row of {row.tenant!r}")
                params.append((
                    run, row.tenant, row.kind, row.id, row.org, row.parent_kind, row.parent_id,
                    row.position, row.listing, row.scope,
                    json.dumps(row.data, ensure_ascii=False, separators=(",", ":")), row.hash,
                ))
            with self._lock, self.db.atomic():
                self.db.conn.executemany(_STAGE, params)
            total += len(params)
        return total

    @_writes
    def record_listing(self, run: int, tenant: str, listing: str, ok: bool, error: str | None = None) -> None:
        """Say how reading one list went. `ok` means: every row of it was staged in this run.

        A failure is sticky within the run: once a list failed, its rows are unknown.
        """
        self._tenant_of(run, tenant)
        with self._lock:
            self.db.execute(
                "INSERT INTO listings (run, tenant, listing, status, error) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (run, tenant, listing) DO UPDATE SET "
                "status = CASE WHEN listings.status = 'failed' THEN 'failed' ELSE excluded.status END, "
                "error = coalesce(listings.error, excluded.error)",
                [run, tenant, listing, "ok" if ok else "failed", None if ok else (error or "failed")],
            )

    @_writes
    def complete_scope(self, run: int, tenant: str, scope: str, token: str) -> None:
        """Say that `scope` was read completely at change token `token` in this run.

        The token becomes current with the run, and lets a later run skip the scope
        (`scope_tokens` + `carry_scope`) while the token does not change.
        """
        self._tenant_of(run, tenant)
        with self._lock:
            self.db.execute(
                "INSERT OR REPLACE INTO staged_scopes (run, tenant, scope, token) VALUES (?, ?, ?, ?)",
                [run, tenant, scope, str(token)],
            )

    @_writes
    def carry_scope(self, run: int, tenant: str, scope: str) -> int:
        """Count the current rows of `scope` as read, unchanged, by `run`; returns how many.

        For a scope whose change token did not change: its lists are not read again.
        Rows staged for the scope in this run (before or after) win over carried ones.
        """
        self._tenant_of(run, tenant)
        with self._lock, self.db.atomic():
            cursor = self.db.execute(
                f"INSERT OR IGNORE INTO staged (run, {_COLUMNS}) SELECT ?, {_COLUMNS} FROM resources "
                "WHERE tenant = ? AND scope = ? AND deleted_run IS NULL",
                [run, tenant, scope],
            )
            self.db.execute(
                "INSERT OR IGNORE INTO staged_scopes (run, tenant, scope, token) "
                "SELECT ?, tenant, scope, token FROM scopes WHERE tenant = ? AND scope = ?",
                [run, tenant, scope],
            )
            return cursor.rowcount

    def staged_rows(self, run: int, org: str, kinds: Iterable[str]) -> Iterator[dict[str, Any]]:
        """Rows `run` staged for one organization, of these kinds (`data` decoded), for a
        scoped crawl to decide what it keeps (`syncd.crawl_scope`)."""
        kinds = sorted(set(kinds))
        marks = ", ".join("?" * len(kinds))
        with self._lock:
            found = self.db.execute(
                f"SELECT kind, id, parent_kind, parent_id, scope, data FROM staged WHERE run = ? AND org = ? AND kind IN ({marks})",
                [run, org, *kinds],
            ).fetchall()
        for kind, row_id, parent_kind, parent_id, scope, data in found:
            yield {"kind": kind, "id": row_id, "parent_kind": parent_kind, "parent_id": parent_id, "scope": scope,
                   "data": self._json(data, f"{kind} {row_id}")}  # fmt: skip

    @_writes
    def unstage(self, run: int, keys: Iterable[tuple[str, str]]) -> int:
        """Forget rows `run` read but does not record (out of a scoped run's scope)."""
        self._tenant_of(run)
        with self._lock, self.db.atomic():
            return sum(self.db.execute("DELETE FROM staged WHERE run = ? AND kind = ? AND id = ?", [run, kind, row_id]).rowcount for kind, row_id in keys)

    @_writes
    def carry_rows(self, run: int, tenant: str, keys: Iterable[tuple[str, str]]) -> int:
        """Count these current rows as read, unchanged, by `run` (rows it staged win): what a
        scoped run leaves out keeps the state the mirror had, and is not deleted."""
        self._tenant_of(run, tenant)
        with self._lock, self.db.atomic():
            return sum(
                self.db.execute(
                    f"INSERT OR IGNORE INTO staged (run, {_COLUMNS}) SELECT ?, {_COLUMNS} FROM resources "
                    "WHERE tenant = ? AND kind = ? AND id = ? AND deleted_run IS NULL",
                    [run, tenant, kind, row_id],
                ).rowcount
                for kind, row_id in keys
            )

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
            raise MirrorError(f"a run finishes as one of {FINISHED}, not {status!r}")
        with self._lock:
            tenant = self._tenant_of(run)
            params = {"run": run, "tenant": tenant}
            with self.db.atomic():
                staged = self._scalar("SELECT count(*) FROM staged WHERE run = ?", [run])
                listing_counts = dict(
                    self.db.execute(
                        "SELECT status, count(*) FROM listings WHERE run = ? GROUP BY status", [run]
                    ).fetchall()
                )
                if listing_counts.get("failed"):
                    status = "partial"
                self._reorders(params)
                self.db.conn.create_function(_FIELDS_FUNCTION, 3, _fields_json(volatile or {}), deterministic=True)
                for sql in _MERGE_BEFORE_DELETIONS:
                    self.db.execute(sql, params)
                while self.db.execute(_CASCADE, params).rowcount:
                    pass
                for sql in _MERGE_AFTER_DELETIONS:
                    self.db.execute(sql, params)
                if quiet_kinds:
                    marks = ", ".join("?" * len(quiet_kinds))
                    self.db.execute(f"DELETE FROM changes WHERE run = ? AND kind IN ({marks})", [run, *sorted(quiet_kinds)])
                summary = self.summary(run)
                self.db.execute("DELETE FROM staged WHERE run = ?", [run])
                self.db.execute("DELETE FROM staged_scopes WHERE run = ?", [run])
                self.db.execute("DELETE FROM listings WHERE run = ? AND status = 'ok'", [run])
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
            self._end(run)
            return summary

    def _reorders(self, params: Mapping[str, Any]) -> None:
        """Log as moved only the fewest siblings whose moves explain a new order."""
        for kind, parent_kind, parent_id in self.db.execute(_REORDERED_GROUPS, params).fetchall():
            group = dict(params, kind=kind, parent_kind=parent_kind, parent_id=parent_id)
            siblings = list(self.db.query(_GROUP_SIBLINGS, group))
            moved = set(moved_items([r["id"] for r in siblings], {r["id"]: r["old_position"] for r in siblings}))
            for r in siblings:
                if r["id"] in moved:
                    self.db.execute(
                        _CHANGES_INSERT + "VALUES (?, ?, ?, ?, 'moved', ?, ?, ?, ?, ?, ?, ?)",
                        [params["run"], params["tenant"], kind, r["id"], r["hash"], r["new_hash"],
                         r["parent_id"], r["parent_id"], r["old_position"], r["position"], r["title"]],
                    )

    @_writes
    def abandon_run(self, run: int, status: str = "cancelled", reason: str = "") -> None:
        """End `run` without merging: the previous snapshot stays current.

        Safe to call on a run that already ended (does nothing), e.g. from a cleanup path.
        """
        if status not in _ENDED:
            raise MirrorError(f"a run is abandoned as one of {_ENDED}, not {status!r}")
        with self._lock:
            if run not in self._active:
                row = self.run(run)
                if row is None or row["status"] != "running":
                    return
                raise MirrorError(f"run {run} is not open in this process")
            self._drop_runs([run], status, reason)
            self._end(run)

    @_writes
    def recover(self) -> list[int]:
        """Fail the runs left `running` by a process that died; returns their ids.

        Raises `MirrorBusyError` when another live process is writing the file.
        """
        with self._lock:
            if self._active:
                return self._recover_locked()
            self._writer.acquire()
            try:
                return self._recover_locked()
            finally:
                self._writer.release()

    def _recover_locked(self) -> list[int]:
        dead = [
            row[0]
            for row in self.db.execute("SELECT id FROM runs WHERE status = 'running' ORDER BY id").fetchall()
            if row[0] not in self._active
        ]
        if dead:
            self._drop_runs(dead, "failed", "the process writing this run ended before it finished")
        return dead

    def _drop_runs(self, runs: list[int], status: str, reason: str) -> None:
        with self.db.atomic():
            for run in runs:
                for table in ("staged", "staged_scopes", "listings"):
                    self.db.execute(f"DELETE FROM {table} WHERE run = ?", [run])
                self.db.execute(
                    "UPDATE runs SET status = ?, finished_at = ?, reason = ? WHERE id = ?",
                    [status, utc_now(), reason or None, run],
                )

    def _end(self, run: int) -> None:
        del self._active[run]
        if not self._active:
            self._writer.release()

    # -- reading the current view ----------------------------------------------------------

    def _scalar(self, sql: str, params: Iterable[Any]) -> Any:
        row = self.db.execute(sql, list(params)).fetchone()
        return None if row is None else row[0]

    def current(
        self,
        tenant: str,
        kind: str | None = None,
        org: str | None = None,
        parent_id: str | None = None,
        scope: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Current rows (columns, `data` decoded), by kind, parent and position; streamed."""
        where, params = ["tenant = ?", "deleted_run IS NULL"], [tenant]
        for column, value in (("kind", kind), ("org", org), ("parent_id", parent_id), ("scope", scope)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        cursor = self.db.conn.execute(
            f"SELECT {_COLUMNS}, first_seen_run, last_seen_run FROM resources WHERE {' AND '.join(where)} "
            # `+kind`: let SQLite pick the index that filters (org, parent, scope), not the
            # one that happens to match the ORDER BY, which would scan the whole tenant.
            "ORDER BY +kind, parent_kind, parent_id, position, id",
            params,
        )
        names = [column[0] for column in cursor.description]
        for values in cursor:
            row = dict(zip(names, values, strict=True))
            row["data"] = self._json(row["data"], f"{row['kind']} {row['id']}")
            yield row

    def current_value(self, tenant: str, kind: str, id: str) -> dict[str, Any] | None:
        """The current object (its JSON) or None when absent or deleted."""
        data = self._scalar(
            "SELECT data FROM resources WHERE tenant = ? AND kind = ? AND id = ? AND deleted_run IS NULL",
            [tenant, kind, id],
        )
        return None if data is None else self._json(data, f"{kind} {id}")

    def current_tokens(self, tenant: str, kind: str, field: str) -> dict[str, Any]:
        """id -> value of `field` (dotted path) of every current object of a kind.

        This is the latest value READ; whether the scope it governs was read completely at
        that value is what `scope_tokens` says — use that one to decide skipping.
        """
        rows = self.db.execute(
            "SELECT id, json_extract(data, ?) FROM resources WHERE tenant = ? AND kind = ? AND deleted_run IS NULL",
            [_json_path(field), tenant, kind],
        )
        return dict(rows.fetchall())

    def scope_tokens(self, tenant: str, prefix: str = "") -> dict[str, str]:
        """scope -> token at which the scope was last read completely (see `complete_scope`)."""
        rows = self.db.execute(
            "SELECT scope, token FROM scopes WHERE tenant = ? AND substr(scope, 1, ?) = ?",
            [tenant, len(prefix), prefix],
        )
        return dict(rows.fetchall())

    def counts(self, tenant: str, org: str | None = None) -> dict[str, int]:
        """kind -> number of current rows."""
        sql = "SELECT kind, count(*) FROM resources WHERE tenant = ? AND deleted_run IS NULL"
        params: list[Any] = [tenant]
        if org is not None:
            sql += " AND org = ?"
            params.append(org)
        return dict(self.db.execute(sql + " GROUP BY kind ORDER BY kind", params).fetchall())

    # -- runs and changes ------------------------------------------------------------------

    def _json(self, text: str, what: str) -> Any:
        """`text` decoded; MirrorError (one line) when the file holds something that is not
        JSON, or JSON nested too deeply to decode (a damaged or hand-made file)."""
        try:
            return json.loads(text)
        except RecursionError:
            why = "JSON nested too deeply to read"
        except (TypeError, ValueError) as exc:
            why = f"not JSON ({exc})"
        raise MirrorError(f"{self.path}: the data of {what} is {why}: the file is damaged or was not written by syncd")

    def _run_row(self, row: dict[str, Any]) -> dict[str, Any]:
        row["stats"] = self._json(row["stats"], f"run {row['id']}") if row["stats"] else {}
        return row

    def run(self, run: int) -> dict[str, Any] | None:
        rows = list(self.db.query("SELECT * FROM runs WHERE id = ?", [run]))
        return self._run_row(rows[0]) if rows else None

    def runs(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """Every run (optionally of one tenant), oldest first, `stats` decoded."""
        if tenant is None:
            rows = self.db.query("SELECT * FROM runs ORDER BY id")
        else:
            rows = self.db.query("SELECT * FROM runs WHERE tenant = ? ORDER BY id", [tenant])
        return [self._run_row(row) for row in rows]

    def last_complete_run(
        self, tenant: str, scope_ref: str | None = None, include_partial: bool = True
    ) -> dict[str, Any] | None:
        """The newest run whose rows were merged (complete, or partial unless excluded)."""
        statuses = FINISHED if include_partial else ("complete",)
        sql = f"SELECT * FROM runs WHERE tenant = ? AND status IN ({', '.join('?' * len(statuses))})"
        params: list[Any] = [tenant, *statuses]
        if scope_ref is not None:
            sql += " AND scope_ref = ?"
            params.append(scope_ref)
        rows = list(self.db.query(sql + " ORDER BY id DESC LIMIT 1", params))
        return self._run_row(rows[0]) if rows else None

    def changes(self, run_b: int, run_a: int | None = None) -> list[dict[str, Any]]:
        """Changes recorded by run b alone, or by the runs of b's tenant in (a, b], in commit order;
        an update's `fields` lists what changed (None when not recorded), see `diff.changed_fields`."""
        if run_a is None:
            rows = self.db.query("SELECT * FROM changes WHERE run = ? ORDER BY seq", [run_b])
        else:
            tenant = self._scalar("SELECT tenant FROM runs WHERE id = ?", [run_b])
            rows = self.db.query(
                "SELECT * FROM changes WHERE tenant = ? AND run > ? AND run <= ? ORDER BY seq",
                [tenant, run_a, run_b],
            )
        return [_decode_fields(row) for row in rows]

    def summary(self, run: int) -> ChangeSummary:
        """Totals per kind and op of the changes recorded by one run."""
        return summarise(
            self.db.query("SELECT kind, op FROM changes WHERE run = ?", [run])
        )

    def diff(self, run_a: int, run_b: int) -> list[dict[str, Any]]:
        """Net changes from the snapshot of run a to that of run b (a older than b, same tenant)."""
        a, b = self.run(run_a), self.run(run_b)
        for number, row in ((run_a, a), (run_b, b)):
            if row is None:
                raise MirrorError(f"no run {number} in {self.path}")
            if row["status"] not in FINISHED:
                raise MirrorError(f"run {number} is {row['status']}: it has no snapshot to compare")
        assert a is not None and b is not None
        if a["tenant"] != b["tenant"]:
            raise MirrorError(f"runs {run_a} and {run_b} are of different tenants")
        if run_a >= run_b:
            raise MirrorError(f"run {run_a} must be older than run {run_b}")
        return compose(self.changes(run_b, run_a))

    def location(self, tenant: str, id: str | None, depth: int = 12) -> str:
        """`Org / Collection / Space`: the titles from the organization down to the object
        `id` (current or deleted; "?" for one the file does not hold), for a person reading
        where something moved from and to. Empty for None (no parent)."""
        parts: list[str] = []
        seen: set[str] = set()
        while id is not None and id not in seen and len(parts) < depth:
            seen.add(id)
            row = self.db.execute(
                f"SELECT parent_id, {_TITLE.format(d='data')}, kind FROM resources WHERE tenant = ? AND id = ? "
                "ORDER BY deleted_run IS NOT NULL LIMIT 1",
                [tenant, id],
            ).fetchone()
            if row is None:
                parts.append("?")
                break
            parts.append(str(row[1]) if row[1] is not None else f"{row[2]} {id}")
            id = row[0]
        return " / ".join(reversed(parts))
