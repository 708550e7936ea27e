"""The writer lock of a state file: one process at a time writes runs into it.

Why: a run left `running` must be told apart from a run another live process is still
writing. Whoever holds this lock knows every `running` run it does not own is dead, so
recovering it (dropping its staged rows) is safe. An advisory `flock` on `<file>.lock` is
released by the kernel when its holder dies, however it dies. Readers need no lock (WAL).
The lock is held only while runs are open, so a daemon and a one-off command take turns.
The lock file is created 0600 (`syncd.files`); a place where it cannot be created (read-only,
full, not ours) is a one-line StorageError.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

from syncd.errors import SyncdError
from syncd.files import open_private, storage_error
from syncd.state.errors import StateBusyError

try:  # pragma: no cover - the import only fails on Windows
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["WriterLock", "lock_holder"]


class WriterLock:
    """A non-blocking exclusive lock on `<state file>.lock`, removed when released."""

    def __init__(self, db_path: Path, *, lock_path: Path | None = None, busy: Callable[[str], SyncdError] | None = None) -> None:
        """`lock_path` and `busy` (holder -> error) let other owners use the same lock:
        the daemon locks its state directory with it."""
        self.db_path = db_path
        self.path = lock_path if lock_path is not None else db_path.with_name(db_path.name + ".lock")
        self._busy = busy
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise `StateBusyError` naming the holder; never waits."""
        if self._fd is not None or fcntl is None:
            return
        while True:
            try:
                fd = open_private(self.path, os.O_RDWR)
            except OSError as exc:
                raise (storage_error(exc, doing="create the lock file") or exc) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 200).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                if self._busy is not None:
                    raise self._busy(holder) from None
                raise StateBusyError(
                    f"state file {self.db_path} is being written by another syncd process "
                    f"({holder}); wait for its run to end or stop it"
                ) from None
            # The previous holder may have removed the file between our open and our lock:
            # then we locked an orphan inode, so start again on the new file.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode())
        self._fd = fd

    def release(self) -> None:
        """Remove the lock file while still holding it, then let go."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def lock_holder(lock: Path) -> str | None:
    """Who holds the `flock` lock at `lock` (a WriterLock's, or the daemon's), or None; takes
    nothing and creates nothing."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put there is not waited on
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
