"""Where this process's temporary files go: the configured `temp_dir`, else `tmp` in the
state directory, never the system's temporary directory (issue 41, item 8).

Why: a writer stages each run in SQLite TEMP tables and SQLite spills big sorts and statement
journals to temporary files; by default it puts them in the first writable of `SQLITE_TMPDIR`,
`TMPDIR`, /var/tmp, /usr/tmp, /tmp. On a read-only root file system (Kubernetes'
`readOnlyRootFilesystem`) none is writable and every sync but the first failed with "disk I/O
error". The state directory is writable wherever syncd works at all.

How: `choose` records the place when the settings are loaded (no I/O: `syncd pause` on a laptop
creates nothing); the first SQLite state opened for writing makes it (private, on demand) and
points SQLite there with `PRAGMA temp_store_directory`, for every connection of the process.
Not the `SQLITE_TMPDIR` environment variable: SQLite reads it once, when the `sqlite3` module
is imported (Python initializes the library then), long before the settings are known. The
pragma is deprecated but sets the one process-wide variable SQLite documents for this,
`sqlite3_temp_directory`; it is set from no value once, before the first temporary file, and
changed only if another place is chosen (a test process): SQLite releases that do not guard
it with a mutex are unsafe when it changes while another thread opens a temporary file.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from pathlib import Path

from syncd.files import StorageError, private_dir

__all__ = ["TempDirError", "choose", "chosen", "sqlite_temp_dir", "use_chosen"]

_lock = threading.Lock()
_chosen: Path | None = None


class TempDirError(StorageError):
    """The temporary directory cannot be made or written (exit 2) or is full (exit 1)."""

    exit_code = 2


def choose(directory: Path) -> None:
    """Record where this process's temporary files go (made when first needed: `use_chosen`)."""
    global _chosen
    _chosen = directory.absolute()


def chosen() -> Path | None:
    """The place `choose` recorded, if any."""
    return _chosen


def unwritable(directory: Path | str, why: int) -> TempDirError:
    """The one line for a temporary directory that cannot be written (`why`: an errno)."""
    reason = "read-only file system" if why == errno.EROFS else os.strerror(why).lower()
    return TempDirError(
        f"the temporary directory {directory} is not writable ({reason}): set temp_dir to a writable place or make it writable"
    )


def full(directory: Path | str) -> TempDirError:
    """The one line for a temporary directory whose file system is full."""
    error = TempDirError(f"the temporary directory {directory} is full: free space there, or set temp_dir to another place")
    error.exit_code = 1
    return error


def _why_unwritable(directory: Path) -> int | None:
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return errno.EROFS
    except OSError as exc:
        return exc.errno or errno.EACCES
    return None if os.access(directory, os.W_OK | os.X_OK) else errno.EACCES


def _point_sqlite_at(directory: Path) -> None:
    """SQLite's process-wide temporary directory (module docstring: why the pragma)."""
    conn = sqlite3.connect(":memory:")
    try:
        current = conn.execute("PRAGMA temp_store_directory").fetchone()
        if current is None or current[0] != str(directory):
            conn.execute(f"PRAGMA temp_store_directory = '{str(directory).replace(chr(39), chr(39) * 2)}'")
    except sqlite3.OperationalError as exc:  # "not a writable directory": it changed since the check
        raise unwritable(directory, errno.EACCES) from exc
    finally:
        conn.close()


def use_chosen(*, create: bool) -> Path | None:
    """Point this process's temporary files at the chosen place: made (private) when missing and
    `create` (a writer: TempDirError when it cannot be made or written); a reader (`create`
    False) uses it only when it is there and writable, and never fails. None when nothing was
    chosen (syncd used as a library: SQLite's own choice stands)."""
    directory = _chosen
    if directory is None:
        return None
    with _lock:
        if not create and not directory.is_dir():
            return None
        try:
            private_dir(directory)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise full(directory) from None
            raise unwritable(directory, exc.errno or errno.EACCES) from None
        why = _why_unwritable(directory)
        if why is not None:
            if create:
                raise unwritable(directory, why)
            return None
        try:
            _point_sqlite_at(directory)
        except TempDirError:
            if create:
                raise
            return None
    return directory


def sqlite_temp_dir() -> str:
    """Where SQLite puts this process's temporary files now: the place set (`use_chosen`), else
    the first writable of its unix candidates, in its order (`SQLITE_TMPDIR`, `TMPDIR`,
    /var/tmp, /usr/tmp, /tmp, the current directory)."""
    conn = sqlite3.connect(":memory:")
    try:
        row = conn.execute("PRAGMA temp_store_directory").fetchone()
    finally:
        conn.close()
    candidates = (row[0] if row else None, os.environ.get("SQLITE_TMPDIR"), os.environ.get("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp")
    for candidate in candidates:
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return "."
