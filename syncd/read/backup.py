"""One-shot backup: a crawl into a new, self-contained mirror file (and, optionally, the
file binaries into a content-addressed folder beside it).

The crawl writes to a temporary file next to the target and is renamed into place only
when it finished: an interrupted or failed backup never leaves a half-written FILE.db, and
never touches an existing one unless asked to replace it.

A backup that finds nothing, or fewer than `MIN_KEPT_RATIO` of the objects of the backup it
is compared with (the file it would replace, or a daemon job's newest complete backup), is
*emptier*: a token that suddenly sees no organization reads cleanly, so the crawl alone
calls it complete, but it is far likelier revoked than the tenant emptied. An emptier backup
never replaces an existing file unless forced (`BackupRefused`, the new crawl is discarded);
otherwise `BackupResult.emptier` says why, and callers do not count it as a good backup.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncd.config import Settings, TargetRef
from syncd.errors import SyncdError, UsageError
from syncd.files import private_dir
from syncd.read.blob_download import MAX_DOWNLOADS, DownloadProgress, DownloadReport, download_files
from syncd.read.blobs import BlobStore
from syncd.read.crawl_scope import CrawlScope
from syncd.read.crawl_stats import CrawlResult
from syncd.read.sync import Progress, sync_into
from syncd.scope import EVERYTHING, Scope
from syncd.state import FINISHED, StateStore

FILE_KINDS = ("file", "change-request-file")
MIN_KEPT_RATIO = 0.5
"""A backup holding fewer than this fraction of the objects of the backup of the same source
it is compared with is emptier (see the module docstring): never a replacement for it."""


class BackupRefused(SyncdError):
    """An existing backup was not replaced by an emptier one (exit 3, as a partial backup)."""

    exit_code = 3


@dataclass
class BackupResult:
    path: Path
    crawl: CrawlResult
    requests: int
    files: DownloadReport | None = None
    objects: int = 0
    """Current objects (rows of its organizations' snapshot) the backup holds."""
    baseline: int | None = None
    """Objects of the backup it was compared with (None: none to compare with)."""
    emptier: str | None = None
    """Why the backup holds nothing or far less than `baseline` (None: it does not)."""
    retries: int = 0
    rate_limited: int = 0
    """429 answers the crawl got (each waited for and retried)."""
    scope_ref: str = ""
    """The crawl's scope (`scope_of`): what a later backup is compared by."""


@dataclass(frozen=True)
class Held:
    """A backup kept where it cannot be opened without a download (object storage), as a
    baseline: what it holds, from its metadata (`syncd.storage.layout`)."""

    name: str
    """How it is named in messages (`s3://BUCKET/KEY`)."""
    scope: str
    """Its crawl's scope (`scope_of`): it is compared only with a backup of the same scope."""
    objects: int


def blobs_dir(db_path: Path) -> Path:
    """Where a backup's file binaries live: `FILE.blobs/` beside `FILE.db`."""
    return db_path.with_name(db_path.stem + ".blobs")


def _sidecars(path: Path) -> Iterator[Path]:
    for suffix in ("", "-wal", "-shm", ".lock"):
        yield path.with_name(path.name + suffix)


def file_rows(db_path: Path) -> list[dict[str, Any]]:
    with StateStore(db_path) as store:
        tenants = {run["tenant"] for run in store.runs()}
        return [row for tenant in sorted(tenants) for kind in FILE_KINDS for row in store.current(tenant, kind=kind)]


def scope_of(tenant: str, org: str | None, scope: Scope = EVERYTHING) -> str:
    """The crawl's `scope_ref` of a backup of `tenant` (one organization, or all; and the
    patterns of a scoped one: a backup is only compared with one of the same scope)."""
    return CrawlScope(scope).ref(f"{tenant}:{org}" if org else tenant)


def held_objects(path: Path, tenant: str, scope: str | None = None) -> int | None:
    """Current objects of `tenant` in the backup at `path` (opened read-only), or None when
    it is not a readable syncd file holding a finished run of that tenant (and `scope`)."""
    try:
        with StateStore(path, readonly=True) as store:
            runs = [run for run in store.runs(tenant) if run["status"] in FINISHED]
            if not runs or (scope is not None and not any(run["scope_ref"] == scope for run in runs)):
                return None
            return sum(store.counts(tenant).values())
    except (SyncdError, OSError, sqlite3.DatabaseError):  # StateError and the like: not one to compare with
        return None


def emptier(objects: int, baseline: int | None, against: str) -> str | None:
    """Why a backup of `objects` is no replacement for `against` holding `baseline` objects
    (None: nothing to compare with), as "holds ..."; None when it is not emptier."""
    if objects == 0:
        held = f", {against} holds {baseline}" if baseline else ""
        return f"holds no object (the token sees no organization: was its access revoked?){held}"
    if baseline and objects < baseline * MIN_KEPT_RATIO:
        return f"holds {objects} objects, fewer than half of the {baseline} in {against}"
    return None


async def backup(
    settings: Settings,
    ref: TargetRef,
    out: Path,
    *,
    with_files: bool = False,
    overwrite: bool = False,
    force: bool = False,
    baseline: Path | Held | None = None,
    replacing: str | None = None,
    on_progress: Progress | None = None,
    scope: Scope = EVERYTHING,
    on_files: DownloadProgress | None = None,
) -> BackupResult:
    """Crawl `ref` into `out` (a new file), then fetch file binaries when asked.

    The new backup is compared with `baseline` (default: the file it would replace) when that
    is a backup of the same source: an emptier one (module docstring) never replaces an
    existing `out` unless `force` (`BackupRefused`; the new crawl is deleted), and is reported
    in `BackupResult.emptier` otherwise. `scope`: only these collections, spaces and sites
    (`syncd.read.crawl_scope`); it is compared only with a backup of the same scope. `on_progress`
    follows the crawl, `on_files` the file downloads (`syncd.read.blob_download.download_files`).
    `replacing`: the name of a backup kept elsewhere that this one replaces (object storage,
    `baseline` then being what it holds): an emptier backup is refused as for an existing `out`."""
    if out.exists() and not overwrite:
        raise UsageError(f"{out} exists: choose another --out, or --overwrite to replace it")
    if out.parent and not out.parent.exists():
        private_dir(out.parent)
    tenant = settings.tenant(ref.tenant).name
    if baseline is None and out.exists():
        baseline = out
    replaced = replacing if replacing is not None else (str(out) if out.exists() else None)
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    for stale in _sidecars(partial):
        stale.unlink(missing_ok=True)
    try:
        result, client = await sync_into(settings, ref, partial, job="backup", full=True, on_progress=on_progress, scope=scope)
        objects = held_objects(partial, tenant) or 0
        scope_ref = scope_of(tenant, result.org, scope)
        if isinstance(baseline, Held):
            before = baseline.objects if baseline.scope == scope_ref else None
        else:
            before = held_objects(baseline, tenant, scope_ref) if baseline is not None else None
        why = emptier(objects, before, baseline.name if baseline is not None else "")
        if why and replaced is not None and not force:
            raise BackupRefused(
                f"{replaced} not replaced: the new backup of {scope_of(tenant, result.org, scope)} {why}; "
                "the old file is kept as it was and the new one discarded (--force replaces it anyway)"
            )
        for stale in _sidecars(out):
            stale.unlink(missing_ok=True)
        os.replace(partial, out)
    finally:
        for leftover in _sidecars(partial):
            leftover.unlink(missing_ok=True)
    report = BackupResult(
        out, result, client.stats.requests, objects=objects, baseline=before, emptier=why,
        retries=client.stats.retries, rate_limited=client.stats.rate_limited, scope_ref=scope_ref,
    )  # fmt: skip
    if with_files:
        downloads = min(settings.tenant(ref.tenant).concurrency, MAX_DOWNLOADS)
        report.files = await download_files(file_rows(out), BlobStore(blobs_dir(out)), concurrency=downloads, on_progress=on_files)
    return report
