"""Reading a file a user named (in the configuration or on the command line): a regular file,
opened without waiting, read to a bound.

Why: a path is whatever the user (or whoever wrote the configuration) put there. `open()` on a
FIFO waits for a writer, for ever (`config check` hung on a FIFO token file, a SIGHUP froze
the daemon); `/dev/zero` reads without end until memory runs out; SQLite itself waits on a
FIFO. So a file is opened with `O_NONBLOCK` (opening a FIFO returns at once), `fstat` on the
descriptor opened says what it is (what is checked is what is read: no swap between a look and
an open), anything but a regular file (a FIFO, a device, a socket, a directory) is refused,
and at most `limit` bytes are read: past it, refused too. Each refusal is one line, exit 2
(`FileRefused`); a missing or unreadable file is the OSError it was, for the caller to word.

`check_regular` is the same look for a file another library opens by its path (SQLite).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO, overload

from syncd.errors import SyncdError

__all__ = ["FileRefused", "check_regular", "file_kind", "open_regular_file", "read_regular"]

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


class FileRefused(SyncdError):
    """A file a user named that syncd does not read: not a regular file, or larger than the
    bound of what it is (one line, exit 2: give another file). `reason` is the message without
    the path, for a caller that says where the path came from; `kind` what the file is when it
    is no regular file (`a FIFO`: `file_kind`), else None."""

    exit_code = 2

    def __init__(self, path: Path | str, reason: str, kind: str | None = None) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason
        self.kind = kind


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (`a FIFO`, `a device`)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refused(path: Path | str, mode: int, what: str) -> FileRefused:
    kind = file_kind(mode)
    return FileRefused(path, f"the {what} is {kind}, not a regular file", kind)


def check_regular(path: Path | str, what: str) -> None:
    """FileRefused unless what is at `path` (a link followed) is a regular file; an OSError
    (FileNotFoundError...) as `os.stat` raises it. Waits for nothing: for a file another
    library opens by its path, such as SQLite (which would wait on a FIFO)."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _refused(path, mode, what)


def open_regular_file(path: Path | str, what: str, *, follow_links: bool = True) -> BinaryIO:
    """`path` opened for reading when it is a regular file (module docstring), else
    FileRefused; `follow_links=False` refuses a symbolic link too (`O_NOFOLLOW`). An OSError
    (FileNotFoundError, PermissionError...) as `os.open` raises it."""
    flags = _FLAGS if follow_links else _FLAGS | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if not follow_links and os.path.islink(path):
            raise FileRefused(path, f"the {what} is a symbolic link, not a regular file", "a symbolic link") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refused(path, mode, what)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@overload
def read_regular(path: Path | str, limit: int, what: str, *, encoding: None = None, follow_links: bool = True) -> bytes: ...
@overload
def read_regular(path: Path | str, limit: int, what: str, *, encoding: str, follow_links: bool = True) -> str: ...


def read_regular(path: Path | str, limit: int, what: str, *, encoding: str | None = None, follow_links: bool = True) -> bytes | str:
    """The bytes of the regular file at `path` (text when `encoding` is given: a
    UnicodeDecodeError as decoding raises it), at most `limit` of them: a larger file is
    FileRefused, as is anything but a regular file (`open_regular_file`)."""
    with open_regular_file(path, what, follow_links=follow_links) as handle:
        expected = min(os.fstat(handle.fileno()).st_size, limit) + 1  # read(n) allocates n bytes first
        raw = handle.read(expected)
        if len(raw) == expected <= limit:  # it grew since: read on, to the bound
            raw += handle.read(limit + 1 - expected)
    if len(raw) > limit:
        raise FileRefused(path, f"the {what} is larger than {_size(limit)}, the most syncd reads of one")
    return raw if encoding is None else raw.decode(encoding)


def _size(limit: int) -> str:
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if limit >= unit and limit % unit == 0:
            return f"{limit // unit} {name}"
    return f"{limit:,} bytes"

