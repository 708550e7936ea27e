"""A finished local backup (`NAME.db` and its `NAME.blobs/` folder) sent to object storage, in
the order that makes it complete or absent (`syncd.storage.layout`):

1. its manifest, named by its hash: it claims the blobs it names before they are sent, so a
   pruning of the prefix that runs meanwhile keeps them;
2. the blobs the prefix does not hold yet (one listing of `blobs/` says which it holds): a blob
   shared with an earlier backup is not sent again;
3. the backup object itself, last, its metadata naming the manifest.

Every request is retried whole on a 5xx, throttling or a dropped connection (`syncd.storage.bucket`),
and writes a key named by what it holds (a hash, or the backup's own name): a retry after a lost
answer writes the same bytes to the same key, never a second object.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from syncd.config.storage import ObjectUrl
from syncd.read.backup import blobs_dir
from syncd.read.blobs import BlobRefused, BlobStore, hash_file
from syncd.storage.bucket import Bucket, for_each_object
from syncd.storage.layout import BLOBS, META_MANIFEST, META_SHA256, blob_key, blob_of, manifest_key

__all__ = ["Uploaded", "upload_backup"]


@dataclass
class Uploaded:
    """What an upload stored: the backup object, and its blobs sent or already there."""

    url: ObjectUrl
    size: int
    blobs_sent: int = 0
    blobs_present: int = 0
    blob_bytes: int = 0
    """Bytes of the blobs sent."""
    manifest: str | None = None
    """The sha256 naming the backup's manifest (None: a backup without files)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "url": str(self.url), "bucket": self.url.bucket, "key": self.url.key, "bytes": self.size,
            "blobs_sent": self.blobs_sent, "blobs_present": self.blobs_present, "blob_bytes": self.blob_bytes,
        }  # fmt: skip


def _stored_entries(store: BlobStore) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[Path, int]]]:
    """The manifest's entries whose blob is stored and whole, and those blobs (sha256 -> path,
    size). An entry whose blob is missing or damaged is left out: the uploaded backup then
    lacks that binary, as `check` says, instead of naming bytes it does not hold."""
    entries: dict[str, dict[str, Any]] = {}
    blobs: dict[str, tuple[Path, int]] = {}
    for row_id, entry in store.manifest().items():
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str) or not isinstance(entry.get("size"), int):
            continue
        sha256, size = entry["sha256"], entry["size"]
        if sha256 not in blobs:
            try:
                blobs[sha256] = (store.verify(sha256, size), size)
            except BlobRefused:
                continue
        entries[row_id] = entry
    return entries, blobs


async def upload_backup(bucket: Bucket, db: Path, url: ObjectUrl, metadata: Mapping[str, str] | None = None) -> Uploaded:
    """Send the backup at `db` (and the blobs of `NAME.blobs/` beside it, when there is one) to
    `url` (module docstring); ObjectStoreError when a request fails after its retries, and then
    no backup object was written (what was sent before it is claimed by no backup)."""
    if url.bucket != bucket.name:
        raise ValueError(f"{url} is not in bucket {bucket.name}")
    prefix = url.folder
    meta = dict(metadata or {})
    meta[META_SHA256] = await anyio.to_thread.run_sync(hash_file, db)
    report = Uploaded(url, db.stat().st_size)
    store = BlobStore(blobs_dir(db))
    if store.root.is_dir():
        entries, blobs = await anyio.to_thread.run_sync(_stored_entries, store)
        manifest = (json.dumps(entries, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
        report.manifest = hashlib.sha256(manifest).hexdigest()
        await bucket.put_bytes(manifest_key(prefix, report.manifest), manifest, content_type="application/json")
        meta[META_MANIFEST] = report.manifest
        present = {blob_of(prefix, info.key) for info in await bucket.list(prefix + BLOBS)}
        missing = {sha256: found for sha256, found in blobs.items() if sha256 not in present}
        report.blobs_present = len(blobs) - len(missing)
        await _send_blobs(bucket, prefix, missing, report)
    await bucket.put_file(url.key, db, meta, content_type="application/vnd.sqlite3")
    return report


async def _send_blobs(bucket: Bucket, prefix: str, blobs: dict[str, tuple[Path, int]], report: Uploaded) -> None:
    limiter = anyio.CapacityLimiter(bucket.concurrency)

    async def send(sha256: str, path: Path) -> None:
        async with limiter:
            report.blob_bytes += await bucket.put_file(blob_key(prefix, sha256), path, {META_SHA256: sha256})
            report.blobs_sent += 1

    async def send_one(sha256: str) -> None:
        await send(sha256, blobs[sha256][0])

    await for_each_object(sorted(blobs), send_one)
