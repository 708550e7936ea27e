"""Files and folders syncd creates are private: 0600 and 0700, whatever the umask.

Why: the state file, backups, exports, blobs and the daemon's files hold what an API token
can see (members' e-mail addresses, SAML certificates, settings, page content). With the
usual umask 022 they would be readable by every account on the machine.

Rules:
- what syncd creates is made private at creation (`private_dir`, `create_private`,
  `open_private`, `write_private`, `replace_private`), never loosened afterwards;
- what already exists keeps its mode: an operator who chose a mode keeps it;
- SQLite gives a database's `-wal` and `-shm` the mode of the database file, so creating
  the database file private first (`create_private`) makes its companions private too;
- the command line also runs under umask 077 (`private_umask`, in `syncd.cli.main`), so a
  file made by a library (a temporary file, a download) is private as well.

`StorageError` is the one-line error for a file system that refuses: full, read-only,
permission denied (`storage_error` turns an OSError into one).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from syncd.errors import SyncdError

__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "StorageError",
    "create_private",
    "open_private",
    "private_dir",
    "private_umask",
    "replace_private",
    "storage_error",
    "write_private",
]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
PRIVATE_UMASK = 0o077

_FULL = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG})
_REFUSED = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


class StorageError(SyncdError):
    """A file or folder cannot be written: the disk is full (exit 1: free space and run
    again), or the place is read-only or not ours (exit 2: choose another place)."""

    exit_code = 1


def storage_error(exc: OSError, path: Path | str | None = None, *, doing: str = "") -> StorageError | None:
    """The one-line StorageError for `exc` when it says full, read-only or permission
    denied (naming `path`, else the path the OSError names); None for any other OSError."""
    if exc.errno not in _FULL and exc.errno not in _REFUSED:
        return None
    where = path if path is not None else exc.filename
    subject = f"{where}: " if where else ""
    what = f"cannot {doing}: " if doing else ""
    reason = exc.strerror or os.strerror(exc.errno or 0)
    if exc.errno in _FULL:
        error = StorageError(f"{subject}{what}{reason}: free space on that file system (or choose another place) and run again")
        error.exit_code = 1
        return error
    if exc.errno == errno.EROFS:
        hint = "choose a writable place"
    else:
        hint = "check the owner and mode of that place, or choose another one"
    error = StorageError(f"{subject}{what}{reason}: {hint}")
    error.exit_code = 2
    return error


def private_dir(path: Path | str) -> Path:
    """`mkdir -p path`, every folder it creates 0700; folders that exist keep their mode."""
    path = Path(path)
    missing: list[Path] = []
    current = path
    while not current.exists() and not current.is_symlink() and current != current.parent:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            continue  # made by someone else meanwhile: theirs, so its mode is theirs too
        os.chmod(folder, PRIVATE_DIR)  # mkdir's mode went through the umask
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)  # raises the usual error (a file stands there)
    return path


def open_private(path: Path | str, flags: int = os.O_RDWR) -> int:
    """`os.open(path, flags | O_CREAT)`, the file 0600 when this call creates it."""
    try:
        return os.open(path, flags & ~os.O_CREAT)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:  # created meanwhile by someone else: theirs
        return os.open(path, flags & ~os.O_CREAT)
    try:
        os.fchmod(fd, PRIVATE_FILE)  # the umask may have taken bits off
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_private(path: Path | str) -> bool:
    """Create `path` empty and 0600 unless something is there; True when it was created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)
    return True


def write_private(path: Path | str, data: str | bytes, *, encoding: str = "utf-8") -> None:
    """Write `data` to `path`, creating it 0600 (a file that exists keeps its mode)."""
    raw = data.encode(encoding) if isinstance(data, str) else data
    fd = open_private(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "wb") as handle:
        handle.write(raw)


@contextlib.contextmanager
def replace_private(path: Path | str, *, encoding: str = "utf-8", keep_mode: bool = True) -> Iterator[IO[str]]:
    """A text file to write in the block that then replaces `path` whole: written under a
    temporary name in the same folder, 0600 from its first byte (once whole, the mode of the
    regular file it replaces, if any and `keep_mode`), synced to disk and renamed over `path`
    (a link there goes itself). If the block raises, the temporary file is removed: `path` is
    as it was and a reader never sees half a file."""
    path = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # 0600 whatever the umask
    try:
        with os.fdopen(fd, "w", encoding=encoding) as handle:
            yield handle
            handle.flush()
            with contextlib.suppress(FileNotFoundError):
                kept = os.stat(path)
                if keep_mode and stat.S_ISREG(kept.st_mode):
                    os.fchmod(handle.fileno(), stat.S_IMODE(kept.st_mode))
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Run the block under umask 077 (the previous umask back afterwards)."""
    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)
