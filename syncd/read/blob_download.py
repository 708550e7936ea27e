"""The downloader of file binaries into a blob folder (`syncd.read.blobs.BlobStore`).

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
- a file already in the manifest whose blob is there and verified (`BlobStore.verify`) is skipped, so a
  re-run downloads only what is new or damaged; the manifest is written even when the run is
  cancelled, so finished downloads are not lost.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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

from syncd.logging import get_logger
from syncd.read.blobs import _CHUNK, FILE_KINDS, BlobStore
from syncd.safe_text import one_line

__all__ = [
    "DEADLINE_FLOOR",
    "MAX_DOWNLOADS",
    "MIN_RATE",
    "DownloadProgress",
    "DownloadReport",
    "download_files",
    "file_deadline",
]

log = get_logger("syncd.blobs")  # the name its lines have always carried

DEADLINE_FLOOR = 120.0
"""Seconds any one download attempt may take, whatever the file's size."""
MAX_DOWNLOADS = 8
"""Files downloaded at once at most, whatever the tenant's `concurrency` (a ceiling of API
requests in flight, 64 by default, sized for round trips): each download is a stream with a
file open, paced by nothing, and a few streams fill a link."""
MIN_RATE = 64 * 1024
"""Bytes per second a download may be as slow as, on top of the floor: 1 GiB gets 4.6 hours."""


DownloadProgress = Callable[[int, int, int], None]
"""`(downloads done, downloads in all, bytes downloaded)`: see `download_files`."""


def file_deadline(size: int, *, floor: float = DEADLINE_FLOOR, min_rate: float = MIN_RATE) -> float:
    """The deadline of one attempt at a file of `size` bytes: generous, and finite."""
    return floor + max(0, size) / min_rate


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
