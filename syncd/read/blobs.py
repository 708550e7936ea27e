"""File binaries beside a backup: a content-addressed blob folder (its downloader is
`syncd.read.blob_download`).

Layout: `ROOT/ab/cdef...` holds the bytes whose sha256 is `abcdef...`; `ROOT/manifest.json`
maps each file row id (`SPACE/FILE`, `CHANGE_REQUEST/FILE`) to `{sha256, size, name,
contentType}`. Identical bytes are stored once, whatever the number of files using them.

Why a blob is verified before it is used (published, restored, exported, or counted as
downloaded): a blob folder is a file on disk, and a backup's may come from anywhere. A blob
replaced by a symbolic link to a readable file (the daemon's config and its tokens) with the
manifest's size set to match would otherwise be published to the target organization. So a
blob is used only when it opens without following a link (`O_NOFOLLOW`, its folder too),
`fstat` says a regular file of the manifest's size, and its bytes hash to its name
(`BlobStore.verify`; a hash is remembered per file identity, so a run hashes a blob once).
`open_regular` is the one way a blob is opened for reading: whoever sends or copies its bytes
opens it so, and checks the size again.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from syncd.errors import SyncdError
from syncd.files import create_private, private_dir, write_private
from syncd.safe_read import FileRefused, file_kind, read_regular

__all__ = [
    "FILE_KINDS",
    "BlobError",
    "BlobRefused",
    "BlobStore",
    "hash_stream",
    "open_regular",
]

FILE_KINDS = frozenset({"file", "change-request-file"})
"""The kinds of mirror rows whose binaries a blob folder holds (the manifest's keys)."""
MANIFEST = "manifest.json"
_CHUNK = 1 << 16
MANIFEST_LIMIT = 1 << 30
"""The most of a manifest read (a million files are about 200 MB of it)."""
_SHA256 = re.compile(r"\A[0-9a-f]{64}\Z")  # `\Z`: `$` would let "<hex>\n" through


class BlobError(SyncdError):
    """The blob folder cannot be used (e.g. an unreadable manifest)."""

    exit_code = 2


class BlobRefused(Exception):
    """A blob that is not used. `kind`: `missing`, `symlink`, `not-regular`, `size`, `hash`
    or `unreadable`; the message says why in words, to follow "blob of FILE" (`is a symbolic
    link, not a regular file`)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)
"""O_NOFOLLOW: a symbolic link is refused, not followed; O_NONBLOCK: opening a FIFO does not
wait for a writer (what is not a regular file is refused right after, by `fstat`)."""
_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FD = os.open in os.supports_dir_fd


def _refusal(mode: int) -> BlobRefused:
    if stat.S_ISLNK(mode):
        return BlobRefused("symlink", "is a symbolic link, not a regular file")
    return BlobRefused("not-regular", f"is not a regular file ({file_kind(mode)})")


def _failed_open(exc: OSError, path: Path, dir_fd: int | None) -> BlobRefused:
    """Why opening `path` failed, looked at without following it."""
    try:
        mode = os.lstat(path.name if dir_fd is not None else path, dir_fd=dir_fd).st_mode
    except FileNotFoundError:
        return BlobRefused("missing", "is missing")
    except OSError:
        mode = stat.S_IFREG
    if not stat.S_ISREG(mode):
        return _refusal(mode)
    if exc.errno == errno.ENOENT:
        return BlobRefused("missing", "is missing")
    return BlobRefused("unreadable", f"cannot be read ({exc.strerror or exc})")


def open_regular(path: Path, size: int | None = None) -> BinaryIO:
    """`path` opened for reading only when it is a regular file, reached without following a
    symbolic link, neither for the file nor for the folder holding it; of `size` bytes when
    given. BlobRefused otherwise (nothing is left open). The folder above that one (a
    blob folder's root) is the operator's choice and may be a link."""
    folder = None
    try:
        if _DIR_FD:
            try:
                folder = os.open(path.parent, _DIRECTORY_FLAGS)
            except OSError as exc:
                raise _folder_refusal(exc, path.parent) from None
        try:
            fd = os.open(path.name if folder is not None else path, _OPEN_FLAGS, dir_fd=folder)
        except OSError as exc:
            raise _failed_open(exc, path, folder) from None
    finally:
        if folder is not None:
            os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refusal(info.st_mode)
        if size is not None and info.st_size != size:
            raise BlobRefused("size", f"holds {info.st_size} bytes, not {size}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _folder_refusal(exc: OSError, folder: Path) -> BlobRefused:
    """Why the folder of a blob could not be opened (a link or a file where a folder should be)."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return BlobRefused("missing", "is missing")
    except OSError:
        mode = stat.S_IFDIR
    if stat.S_ISLNK(mode):
        return BlobRefused("symlink", f"is in a folder that is a symbolic link ({folder.name}/), not a folder")
    if not stat.S_ISDIR(mode):
        return BlobRefused("not-regular", f"is in {folder.name}, which is not a folder ({file_kind(mode)})")
    return BlobRefused("unreadable", f"cannot be read ({exc.strerror or exc})")


_Identity = tuple[str, int, int, int, int, int]
"""(path, device, inode, size, mtime_ns, ctime_ns): a file whose bytes changed has another
(ctime moves with every write and cannot be set back; a rewrite in place within one tick of
the file system's clock is the exception, and needs write access to the folder during the
run, which is more than a backup handed over gives)."""
_HASHED: OrderedDict[_Identity, str] = OrderedDict()
_HASHED_MAX = 65536
_HASHED_LOCK = threading.Lock()


def _identity(path: Path, info: os.stat_result) -> _Identity:
    return (str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _remembered(key: _Identity) -> str | None:
    with _HASHED_LOCK:
        return _HASHED.get(key)


def _remember(key: _Identity, sha256: str) -> None:
    with _HASHED_LOCK:
        _HASHED[key] = sha256
        _HASHED.move_to_end(key)
        while len(_HASHED) > _HASHED_MAX:
            _HASHED.popitem(last=False)


def hash_stream(stream: BinaryIO) -> tuple[str, int]:
    """sha256 (hex) and byte count of what `stream` holds from where it is, read in chunks."""
    digest, size = hashlib.sha256(), 0
    while chunk := stream.read(_CHUNK * 16):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def hash_file(path: Path) -> str:
    """The sha256 of the file at `path` (as `hash_stream` reads it; blocking: call it in a thread)."""
    with path.open("rb") as handle:
        return hash_stream(handle)[0]


@dataclass(frozen=True)
class BlobStore:
    """A content-addressed folder of file binaries and its manifest (module docstring)."""

    root: Path

    def path_for(self, sha256: str) -> Path:
        if not _SHA256.match(sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self.root / sha256[:2] / sha256[2:]

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def manifest(self) -> dict[str, dict[str, Any]]:
        """File row id -> {sha256, size, name, contentType}; empty when there is none yet."""
        try:
            data = json.loads(read_regular(self.manifest_path, MANIFEST_LIMIT, "blob manifest", encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except FileRefused as exc:  # a FIFO, a device, a folder, too large: beside a backup from anywhere
            raise BlobError(f"{exc}; move it away to download again") from None
        except (OSError, ValueError, RecursionError) as exc:
            raise BlobError(f"{self.manifest_path} is unreadable ({exc}); move it away to download again") from None
        if not isinstance(data, dict):
            raise BlobError(f"{self.manifest_path} is not a JSON object; move it away to download again")
        return data

    def write_manifest(self, manifest: Mapping[str, Mapping[str, Any]]) -> None:
        """Atomically, with sorted keys: the same blobs always give the same bytes."""
        private_dir(self.root)
        text = json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        temporary = self.root / f".{MANIFEST}.{uuid.uuid4().hex}.tmp"
        write_private(temporary, text)
        os.replace(temporary, self.manifest_path)

    def present(self, sha256: str, size: int) -> bool:
        """A regular file of `size` bytes at the blob's address, no link on the way: what a dry
        run counts (nothing is read; what is used is verified)."""
        try:
            with open_regular(self.path_for(sha256), size):
                return True
        except (BlobRefused, ValueError):
            return False

    def open(self, sha256: str, size: int) -> BinaryIO:
        """The blob opened as `open_regular` opens (BlobRefused, or ValueError for a name that
        is no sha256): for a copy that hashes the bytes as it goes."""
        return open_regular(self.path_for(sha256), size)

    def verify(self, sha256: str, size: int) -> Path:
        """The blob's path once it is a regular file (no link on the way) of `size` bytes whose
        bytes hash to `sha256`; BlobRefused (its message follows "blob of FILE") otherwise. The
        hash is remembered per file identity: a run hashes a blob once, however often it asks."""
        try:
            path = self.path_for(sha256)
        except ValueError:
            raise BlobRefused("missing", f"is named by no sha256 in the manifest ({sha256[:70]!r})") from None
        with open_regular(path, size) as stream:
            key = _identity(path, os.fstat(stream.fileno()))
            actual = _remembered(key)
            if actual is None:
                actual, _ = hash_stream(stream)
                _remember(key, actual)
        if actual != sha256:
            raise BlobRefused("hash", f"holds bytes that hash to {actual[:16]}..., not to its name: they changed after they were stored")
        return path

    def has(self, sha256: str, size: int) -> bool:
        """True when the blob is stored, verified (`verify`)."""
        try:
            self.verify(sha256, size)
        except BlobRefused:
            return False
        return True

    def open_temporary(self) -> Path:
        """A fresh path for a download in progress, on the blobs' file system."""
        folder = self.root / ".tmp"
        private_dir(folder)
        path = folder / uuid.uuid4().hex
        create_private(path)
        return path

    def store(self, temporary: Path, sha256: str) -> Path:
        """Move a verified download to its content address. A verified blob already there
        wins; anything else there (a link, a damaged blob, a folder) is replaced, never
        followed."""
        final = self.path_for(sha256)
        _clear(final.parent, keep_folder=True)
        private_dir(final.parent)
        size = temporary.stat().st_size
        if self.has(sha256, size):
            temporary.unlink(missing_ok=True)
            return final
        _clear(final, keep_folder=False)
        os.replace(temporary, final)
        _remember(_identity(final, os.lstat(final)), sha256)  # hashed as it was downloaded
        return final


def _clear(path: Path, *, keep_folder: bool) -> None:
    """Remove what stands at `path` unless it is a real folder (`keep_folder`) or a regular
    file (which `os.replace` replaces): a link goes itself, what it names stays."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        if not keep_folder:
            shutil.rmtree(path)
    elif keep_folder or not stat.S_ISREG(mode):
        path.unlink()
