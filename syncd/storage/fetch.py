"""A backup in object storage brought into a local folder as `syncd backup` writes one there
(`NAME.db`, and `NAME.blobs/` with its manifest and the blobs it names), so that `check`,
`export` and `restore` read it with the code that reads a local backup and judge it the same
way: a blob the bucket lacks is missing in the folder (`check`: blob-missing), a blob whose
bytes changed keeps them (`check`: blob-hash).

Only what the backup names is fetched: its object, its manifest (the one its metadata names)
and that manifest's blobs, out of all those the prefix shares.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from syncd.config.storage import ObjectUrl
from syncd.errors import SyncdError
from syncd.files import private_dir, write_private
from syncd.read.backup import blobs_dir
from syncd.read.blobs import MANIFEST, MANIFEST_LIMIT, hash_file
from syncd.storage.bucket import Bucket, for_each_object
from syncd.storage.layout import META_MANIFEST, META_SHA256, blob_key, manifest_key

__all__ = ["Fetched", "NoSuchBackup", "fetch_backup"]


class NoSuchBackup(SyncdError):
    """No backup object at the URL (exit 2, as a path that names no backup file)."""

    exit_code = 2


@dataclass
class Fetched:
    """A backup fetched into a local folder: its file, and what did not match as written."""

    url: ObjectUrl
    path: Path
    blobs: int = 0
    manifest: str | None = None
    """The URL of the manifest the backup names (None: a backup without files)."""
    problems: list[tuple[str, str, str]] = field(default_factory=list)
    """(kind, subject, message) of what the bucket holds differently from what was uploaded."""


async def fetch_backup(bucket: Bucket, url: ObjectUrl, folder: Path, *, with_blobs: bool = True) -> Fetched:
    """Fetch the backup at `url` into `folder` (module docstring); NoSuchBackup when there is
    no object there, ObjectStoreError when a request fails after its retries."""
    info = await bucket.head(url.key)
    if info is None:
        raise NoSuchBackup(f"{url}: no such backup (no object at that key; `syncd backup --out {url}` writes one)")
    private_dir(folder)
    local = Fetched(url, folder / url.name)
    if not await bucket.get_file(url.key, local.path):
        raise NoSuchBackup(f"{url}: no such backup (the object was removed while it was read)")
    sent = info.metadata.get(META_SHA256)
    if sent and await anyio.to_thread.run_sync(hash_file, local.path) != sent:
        local.problems.append(("object-hash", str(url), "its bytes differ from those uploaded (their sha256 is in its metadata): it changed in the bucket"))
    manifest = info.metadata.get(META_MANIFEST)
    if manifest and with_blobs:
        await _fetch_blobs(bucket, url.folder, manifest, blobs_dir(local.path), local)
    return local


async def _fetch_blobs(bucket: Bucket, prefix: str, manifest: str, root: Path, local: Fetched) -> None:
    private_dir(root)
    try:
        local.manifest = str(bucket.url(manifest_key(prefix, manifest)))
        data = await bucket.get_bytes(manifest_key(prefix, manifest), MANIFEST_LIMIT)
    except ValueError:
        local.problems.append(("manifest", str(local.url), f"its metadata names no manifest ({manifest[:70]!r})"))
        return
    if data is None:
        return  # the folder without a manifest: `check` says it is missing
    if hashlib.sha256(data).hexdigest() != manifest:
        local.problems.append(("manifest", str(bucket.url(manifest_key(prefix, manifest))), "its bytes do not hash to its name: it changed in the bucket"))
    write_private(root / MANIFEST, data.decode("utf-8", errors="replace"))
    try:
        entries = json.loads(data)
    except ValueError:
        return  # `check` reads it and says it is unreadable
    wanted = sorted({e["sha256"] for e in entries.values() if isinstance(e, dict) and isinstance(e.get("sha256"), str)} if isinstance(entries, dict) else set())
    limiter = anyio.CapacityLimiter(bucket.concurrency)

    async def fetch(sha256: str) -> None:
        try:
            key = blob_key(prefix, sha256)
        except ValueError:
            return  # `check` names the entry that names no sha256
        async with limiter:
            target = root / sha256[:2] / sha256[2:]
            private_dir(target.parent)
            if await bucket.get_file(key, target):
                local.blobs += 1

    await for_each_object(wanted, fetch)
