"""One-shot backup: a crawl into a new, self-contained mirror file (and, optionally, the
file binaries into a content-addressed folder beside it).

The crawl writes to a temporary file next to the target and is renamed into place only
when it finished: an interrupted or failed backup never leaves a half-written FILE.db, and
never touches an existing one unless asked to replace it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncd.blobs import BlobStore, DownloadReport, download_files
from syncd.config import Settings, TargetRef
from syncd.crawl import CrawlResult
from syncd.errors import UsageError
from syncd.mirror import Mirror
from syncd.sync import Progress, sync_into

FILE_KINDS = ("file", "change-request-file")


@dataclass
class BackupResult:
    path: Path
    crawl: CrawlResult
    requests: int
    files: DownloadReport | None = None


def blobs_dir(db_path: Path) -> Path:
    """Where a backup's file binaries live: `FILE.blobs/` beside `FILE.db`."""
    return db_path.with_name(db_path.stem + ".blobs")


def _sidecars(path: Path) -> Iterator[Path]:
    for suffix in ("", "-wal", "-shm", ".lock"):
        yield path.with_name(path.name + suffix)


def file_rows(db_path: Path) -> list[dict[str, Any]]:
    with Mirror(db_path) as mirror:
        tenants = {run["tenant"] for run in mirror.runs()}
        return [row for tenant in sorted(tenants) for kind in FILE_KINDS for row in mirror.current(tenant, kind=kind)]


async def backup(
    settings: Settings,
    ref: TargetRef,
    out: Path,
    *,
    with_files: bool = False,
    overwrite: bool = False,
    on_progress: Progress | None = None,
) -> BackupResult:
    """Crawl `ref` into `out` (a new file), then fetch file binaries when asked."""
    if out.exists() and not overwrite:
        raise UsageError(f"{out} exists: choose another --out, or --overwrite to replace it")
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    for stale in _sidecars(partial):
        stale.unlink(missing_ok=True)
    try:
        result, client = await sync_into(settings, ref, partial, job="backup", full=True, on_progress=on_progress)
        for stale in _sidecars(out):
            stale.unlink(missing_ok=True)
        os.replace(partial, out)
    finally:
        for leftover in _sidecars(partial):
            leftover.unlink(missing_ok=True)
    report = BackupResult(out, result, client.stats.requests)
    if with_files:
        report.files = await download_files(file_rows(out), BlobStore(blobs_dir(out)), concurrency=settings.tenant(ref.tenant).concurrency)
    return report
