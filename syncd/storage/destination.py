"""A backup's place, a path or `s3://BUCKET/KEY`, for the commands and the daemon: a backup
written there (`backup_to_bucket`) and one read from there (`fetched_backup`).

A backup bound for object storage is made in a private staging folder under the temporary
directory (`temp_dir`: never the system's), exactly as a local one, then uploaded
(`syncd.storage.upload`); one read from there is fetched into such a folder
(`syncd.storage.fetch`). The folder goes when the work ends, however it ends.
"""

from __future__ import annotations

import re

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from syncd.config import Settings, TargetRef
from syncd.config.storage import ObjectUrl, is_object_url, parse_object_url
from syncd.errors import UsageError
from syncd.files import private_dir
from syncd.read.backup import BackupResult, Held, backup
from syncd.read.blob_download import DownloadProgress
from syncd.read.sync import Progress
from syncd.scope import EVERYTHING, Scope
from syncd.storage.bucket import ObjectInfo, open_bucket
from syncd.storage.fetch import Fetched, fetch_backup
from syncd.storage.layout import META_OBJECTS, META_SCOPE
from syncd.storage.upload import Uploaded, upload_backup

__all__ = ["Stored", "backup_metadata", "backup_to_bucket", "fetched_backup", "held_in", "location", "staging"]


def location(text: str, *, backup: bool = True) -> Path | ObjectUrl:
    """A backup's place as given on the command line: `s3://BUCKET/KEY` (a UsageError saying
    what is wrong with it), else a path."""
    if is_object_url(text):
        try:
            return parse_object_url(text, backup=backup)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return Path(text)


@contextmanager
def staging(settings: Settings, what: str) -> Iterator[Path]:
    """A private folder for one backup on its way to or from object storage, removed after."""
    root = settings.temp_path
    private_dir(root)
    folder = root / f"{what}-{uuid.uuid4().hex[:12]}"
    private_dir(folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def held_in(info: ObjectInfo | None, url: ObjectUrl) -> Held | None:
    """What the backup object `info` holds, from its metadata (None: not said, nothing to
    compare with)."""
    if info is None:
        return None
    scope, objects = info.metadata.get(META_SCOPE), info.metadata.get(META_OBJECTS)
    if scope is None or objects is None or not re.fullmatch(r"[0-9]{1,18}", objects):  # not isdigit(): '²' is a digit to it
        return None
    return Held(str(url), unquote(scope), int(objects))


def backup_metadata(result: BackupResult) -> dict[str, str]:
    """The metadata a backup object carries so that the next backup is compared with it (the
    scope percent-encoded: metadata is ASCII, a scope's patterns may not be)."""
    return {META_SCOPE: quote(result.scope_ref, safe=""), META_OBJECTS: str(result.objects)}


@dataclass
class Stored:
    """A backup made and uploaded: the crawl's result, and where it went."""

    result: BackupResult
    uploaded: Uploaded


async def backup_to_bucket(
    settings: Settings,
    ref: TargetRef,
    url: ObjectUrl,
    *,
    with_files: bool = False,
    overwrite: bool = False,
    force: bool = False,
    on_progress: Progress | None = None,
    scope: Scope = EVERYTHING,
    on_files: DownloadProgress | None = None,
) -> Stored:
    """`syncd backup --out s3://...`: as `syncd.read.backup.backup` into a file, the same
    refusals included (an existing object without `overwrite`, an emptier backup in place of
    one without `force`), then uploaded; the object is in place only once all of it is."""
    async with open_bucket(settings, url.bucket) as bucket:
        existing = await bucket.head(url.key)
        if existing is not None and not overwrite:
            raise UsageError(f"{url} exists: choose another --out, or --overwrite to replace it")
        with staging(settings, "upload") as folder:
            result = await backup(
                settings, ref, folder / url.name, with_files=with_files, force=force, baseline=held_in(existing, url),
                replacing=str(url) if existing is not None else None, on_progress=on_progress, scope=scope, on_files=on_files,
            )  # fmt: skip
            uploaded = await upload_backup(bucket, result.path, url, backup_metadata(result))
    return Stored(result, uploaded)


@contextmanager
def fetched_backup(settings: Settings, url: ObjectUrl, *, with_blobs: bool = True, what: str = "the backup was only read") -> Iterator[Fetched]:
    """The backup at `url` fetched into a staging folder for the block (SIGINT/SIGTERM stop the
    fetch: exit 130/143, the folder removed)."""
    from syncd import interrupt

    with staging(settings, "fetch") as folder:

        async def fetch() -> Fetched:
            async with open_bucket(settings, url.bucket) as bucket:
                return await fetch_backup(bucket, url, folder, with_blobs=with_blobs)

        yield interrupt.run(fetch, what=what)
