"""File binaries beside a backup: a content-addressed blob folder and its downloader.

Layout: `ROOT/ab/cdef...` holds the bytes whose sha256 is `abcdef...`; `ROOT/manifest.json`
maps each file row id (`SPACE/FILE`, `CHANGE_REQUEST/FILE`) to `{sha256, size, name,
contentType}`. Identical bytes are stored once, whatever the number of files using them.

Why the downloader is careful:
- a download streams to a temporary file while hashing, and becomes a blob only when its
  byte count equals the file's declared `size`; a short or long body is retried, then
  reported failed, never stored; a body longer than `size` is cut as soon as it passes it,
  and one whose Content-Length says so is refused before a byte is read;
- each attempt has a deadline for the whole transfer (`file_deadline`: a floor, plus the
  time the file takes at a slow but honest rate), besides the pause timeout between bytes: a
  server trickling a byte now and then never trips the latter, and would hold the run (and
  in the daemon, the job and its state) forever;
- `downloadURL` is a signed URL, possibly on another host: no Authorization header is ever
  sent (a session carrying credentials is refused) and URLs are never logged whole;
- 5xx, 429, dropped connections, timeouts and wrong sizes are retried with tenacity
  (jittered exponential backoff, at least the server's `Retry-After`); other 4xx fail at once;
- a file already in the manifest whose blob is there and verified (below) is skipped, so a
  re-run downloads only what is new or damaged; the manifest is written even when the run is
  cancelled, so finished downloads are not lost.

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import aiohttp
import anyio
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)
from yarl import URL

from syncd.errors import SyncdError
from syncd.files import create_private, private_dir, write_private
from syncd.logging import get_logger
from syncd.safe_text import one_line

__all__ = [
    "DEADLINE_FLOOR",
    "FILE_KINDS",
    "MIN_RATE",
    "BlobError",
    "BlobRefused",
    "BlobStore",
    "DownloadProgress",
    "DownloadReport",
    "download_files",
    "file_deadline",
    "open_regular",
]

log = get_logger("syncd.blobs")

FILE_KINDS = frozenset({"file", "change-request-file"})
MANIFEST = "manifest.json"
_CHUNK = 1 << 16
_SHA256 = re.compile(r"\A[0-9a-f]{64}\Z")  # `\Z`: `$` would let "<hex>\n" through
DEADLINE_FLOOR = 120.0
"""Seconds any one download attempt may take, whatever the file's size."""
MIN_RATE = 64 * 1024
"""Bytes per second a download may be as slow as, on top of the floor: 1 GiB gets 4.6 hours."""


DownloadProgress = Callable[[int, int, int], None]
"""`(downloads done, downloads in all, bytes downloaded)`: see `download_files`."""


def file_deadline(size: int, *, floor: float = DEADLINE_FLOOR, min_rate: float = MIN_RATE) -> float:
    """The deadline of one attempt at a file of `size` bytes: generous, and finite."""
    return floor + max(0, size) / min_rate


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


def _what(mode: int) -> str:
    """What a non-regular file is, in words."""
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


def _refusal(mode: int) -> BlobRefused:
    if stat.S_ISLNK(mode):
        return BlobRefused("symlink", "is a symbolic link, not a regular file")
    return BlobRefused("not-regular", f"is not a regular file ({_what(mode)})")


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
        return BlobRefused("not-regular", f"is in {folder.name}, which is not a folder ({_what(mode)})")
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
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
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


@dataclass
class DownloadReport:
    """What a download run did, per file row."""

    downloaded: int = 0
    """File rows whose bytes this run fetched and stored."""
    skipped: int = 0
    """File rows already in the manifest with their blob present."""
    failed: dict[str, str] = field(default_factory=dict)
    """File row id -> why it is not stored."""
    bytes: int = 0
    """Bytes fetched (verified downloads only)."""

    @property
    def ok(self) -> bool:
        return not self.failed


class _Retryable(Exception):
    """A failure worth another attempt; `wait` is the server's hint, in seconds."""

    def __init__(self, message: str, wait: float = 0.0) -> None:
        super().__init__(message)
        self.wait = wait


class _Fatal(Exception):
    """A failure another attempt cannot fix (403 expired URL, 404, ...)."""


@dataclass
class _Job:
    url: str
    size: int
    rows: list[Mapping[str, Any]]


def _where(url: str) -> str:
    """A URL without its query (signatures) for logs and reports."""
    try:
        parsed = URL(url)
        return str(parsed.with_query(None).with_fragment(None))
    except (ValueError, TypeError):
        return "<invalid URL>"


_QUERY = re.compile(r"(https?://[^\s'\"?#]+)[?#][^\s'\"]*")


def _redact_urls(text: str) -> str:
    """Messages (aiohttp's include URLs) without query strings: signatures stay private."""
    return _QUERY.sub(r"\1?…", text)


def _retry_after(headers: Mapping[str, str]) -> float:
    value = headers.get("Retry-After", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return 0.0


def _entry(row: Mapping[str, Any], sha256: str, size: int) -> dict[str, Any]:
    data = row["data"]
    return {"sha256": sha256, "size": size, "name": data.get("name"), "contentType": data.get("contentType")}


def _size_of(data: Mapping[str, Any]) -> int | None:
    size = data.get("size")
    if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
        return size
    return None


def _credentials(session: aiohttp.ClientSession) -> bool:
    headers = {name.lower() for name in session.headers}
    return "authorization" in headers or getattr(session, "auth", None) is not None


async def _fetch(
    session: aiohttp.ClientSession, store: BlobStore, job: _Job, timeout: aiohttp.ClientTimeout, deadline: float
) -> tuple[str, int]:
    """One attempt: stream, count and hash within `deadline` seconds; returns (sha256, size)
    of a verified blob."""
    temporary = store.open_temporary()
    try:
        digest = hashlib.sha256()
        count = 0
        with anyio.fail_after(deadline):
            async with session.get(job.url, timeout=timeout, allow_redirects=True) as response:
                if response.status == 429 or response.status >= 500 or response.status == 408:
                    raise _Retryable(f"HTTP {response.status}", _retry_after(response.headers))
                if response.status >= 400:
                    raise _Fatal(f"HTTP {response.status}")
                declared = response.content_length
                if declared is not None and declared > job.size:
                    response.close()
                    raise _Retryable(f"more bytes than the declared size {job.size} (Content-Length {declared}: refused unread)")
                async with await anyio.open_file(temporary, "wb") as out:
                    async for chunk in response.content.iter_chunked(_CHUNK):
                        count += len(chunk)
                        if count > job.size:
                            response.close()
                            raise _Retryable(f"more bytes than the declared size {job.size}")
                        digest.update(chunk)
                        await out.write(chunk)
        if count != job.size:
            raise _Retryable(f"got {count} bytes, the file's size is {job.size}")
        sha256 = digest.hexdigest()
        await anyio.to_thread.run_sync(store.store, temporary, sha256)
        return sha256, count
    except TimeoutError as exc:
        if isinstance(exc, aiohttp.ClientError):  # aiohttp's connect or pause timeout
            raise _Retryable(_redact_urls(f"{type(exc).__name__}: {exc}".rstrip(": "))) from None
        within = f"{round(deadline)}s" if deadline >= 1 else f"{deadline:g}s"
        raise _Retryable(f"not downloaded within {within} ({count} of {job.size} bytes)") from None
    except aiohttp.ClientError as exc:
        raise _Retryable(_redact_urls(f"{type(exc).__name__}: {exc}".rstrip(": "))) from None
    finally:
        temporary.unlink(missing_ok=True)


async def download_files(
    rows: Iterable[Mapping[str, Any]],
    store: BlobStore,
    *,
    session: aiohttp.ClientSession | None = None,
    concurrency: int = 8,
    retries: int = 5,
    initial_wait: float = 0.5,
    max_wait: float = 30.0,
    timeout: float = 300.0,
    deadline: float = DEADLINE_FLOOR,
    min_rate: float = MIN_RATE,
    on_progress: DownloadProgress | None = None,
) -> DownloadReport:
    """Download the binaries of the file rows (`file`, `change-request-file`) into `store`.

    `rows` are mirror rows (`kind`, `id`, `data` with `downloadURL`, `size`, `name`,
    `contentType`); other kinds are ignored. Rows sharing a URL and size are fetched once.
    `retries` is the number of attempts per download; `timeout` bounds the pauses between
    bytes (connect and read); each attempt must end within `file_deadline(size, floor=deadline,
    min_rate=min_rate)` seconds, so a download lasts at most `retries` such deadlines plus the
    waits. Without `session` one is made; a given session must carry no credentials (ValueError).
    `on_progress(done, total, bytes)` is called when the downloads are known and after each
    one ends (done or failed): `total` counts downloads (rows sharing a URL are one).
    Each retry is said on stderr (a warning, `retry 1/4 in 0.5 s: GET host/path: ...`).
    """
    if session is not None and _credentials(session):
        raise ValueError("download_files: the session sends credentials; file URLs must get none")
    report = DownloadReport()
    manifest = await anyio.to_thread.run_sync(store.manifest)
    jobs: dict[tuple[str, int], _Job] = {}
    for row in sorted((r for r in rows if r.get("kind") in FILE_KINDS), key=lambda r: str(r["id"])):
        row_id, data = str(row["id"]), row.get("data") or {}
        size, url = _size_of(data), data.get("downloadURL")
        if size is None or not isinstance(url, str) or not url.startswith(("http://", "https://")):
            report.failed[row_id] = "no usable downloadURL" if size is not None else "no valid size"
            manifest.pop(row_id, None)
            continue
        known = manifest.get(row_id)
        if isinstance(known, dict) and known.get("size") == size and store.has(str(known.get("sha256")), size):
            manifest[row_id] = _entry(row, str(known["sha256"]), size)
            report.skipped += 1
            continue
        jobs.setdefault((url, size), _Job(url, size, [])).rows.append(row)

    finished = 0

    def progressed() -> None:
        if on_progress is not None:
            on_progress(finished, len(jobs), report.bytes)

    progressed()
    limiter = anyio.CapacityLimiter(max(1, concurrency))
    client_timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)

    backoff_of = wait_exponential_jitter(multiplier=initial_wait, jitter=initial_wait, max=max_wait)

    def wait(state: RetryCallState) -> float:
        """max(jittered exponential backoff, the server's Retry-After), clamped to max_wait."""
        backoff = backoff_of(state)
        error = state.outcome.exception() if state.outcome else None
        hint = error.wait if isinstance(error, _Retryable) else 0.0
        return min(max(backoff, hint), max_wait)

    def notice(job: _Job) -> Callable[[RetryCallState], None]:
        def say(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            wait = state.upcoming_sleep
            log.warning(
                f"retry {state.attempt_number}/{max(1, retries) - 1} in {wait:.1f} s: "
                f"GET {one_line(_where(job.url))}: {one_line(_redact_urls(str(error)))[:300]}"
            )

        return say

    async def one(job: _Job, http: aiohttp.ClientSession) -> None:
        """One download with its retries; a task that backs off holds no limiter slot."""
        nonlocal finished
        try:
            await attempts(job, http)
        finally:
            finished += 1
            progressed()

    async def attempts(job: _Job, http: aiohttp.ClientSession) -> None:
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(max(1, retries)),
                wait=wait,
                retry=retry_if_exception_type(_Retryable),
                sleep=anyio.sleep,
                before_sleep=notice(job),
                reraise=True,
            ):
                with attempt:
                    async with limiter:
                        sha256, size = await _fetch(
                            http, store, job, client_timeout, file_deadline(job.size, floor=deadline, min_rate=min_rate)
                        )
        except (_Retryable, _Fatal) as exc:
            for row in job.rows:
                report.failed[str(row["id"])] = str(exc)
                manifest.pop(str(row["id"]), None)
            log.warning("file download failed", files=[str(r["id"]) for r in job.rows], url=_where(job.url), error=str(exc))
            return
        report.bytes += size
        for row in job.rows:
            manifest[str(row["id"])] = _entry(row, sha256, size)
            report.downloaded += 1

    try:
        if jobs:
            own = session is None
            http = session or aiohttp.ClientSession()
            try:
                async with anyio.create_task_group() as tg:
                    for job in jobs.values():
                        tg.start_soon(one, job, http)
            finally:
                if own:
                    await http.close()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(store.write_manifest, manifest)
    return report
