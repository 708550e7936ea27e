"""The backups under a prefix, and what pruning them removes (which ones go is the retention
policy's choice, `syncd.daemon.retention`, made by the job).

A backup is its one object (`PREFIX/NAME.db`): deleting it is deleting the backup, in one
request. What it shared is collected after (`collect_garbage`): a manifest no backup names and
the blobs no kept manifest names, once they are older than `ABANDONED_AFTER` by the service's
clock. The delay is the claim of an upload in progress: its manifest is written before its blobs
and its backup object last (`syncd.storage.upload`), so a manifest nobody names yet may be one
still being uploaded beside this pruning (a `syncd backup --out` into the same prefix).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import anyio

from syncd.read.blobs import MANIFEST_LIMIT
from syncd.storage.bucket import Bucket, ObjectInfo, for_each_object
from syncd.storage.layout import BLOBS, MANIFESTS, META_MANIFEST, blob_of, manifest_key, manifest_of

__all__ = ["ABANDONED_AFTER", "Garbage", "backups_in", "collect_garbage", "delete_objects"]

ABANDONED_AFTER = 24 * 3600.0
"""Seconds after which a manifest or blob that no backup names is taken for what an upload that
never finished left (module docstring)."""


@dataclass
class Garbage:
    """What `collect_garbage` deleted (keys) and kept."""

    manifests: list[str] = field(default_factory=list)
    blobs: list[str] = field(default_factory=list)
    blobs_kept: int = 0


async def backups_in(bucket: Bucket, prefix: str) -> dict[str, ObjectInfo]:
    """The objects named `*.db` directly under `prefix`, by name (`nightly-...Z.db`)."""
    found = await bucket.list(prefix, recursive=False)
    return {info.key[len(prefix) :]: info for info in found if info.key.endswith(".db") and "/" not in info.key[len(prefix) :]}


async def delete_objects(bucket: Bucket, keys: list[str]) -> None:
    """Delete `keys`, `bucket.concurrency` at a time; the first failure is raised."""
    limiter = anyio.CapacityLimiter(bucket.concurrency)

    async def one(key: str) -> None:
        async with limiter:
            await bucket.delete(key)

    await for_each_object(keys, one)


async def collect_garbage(bucket: Bucket, prefix: str, now: float, abandoned_after: float = ABANDONED_AFTER) -> Garbage:
    """Delete the manifests no backup under `prefix` names and the blobs no remaining manifest
    names, of those last written before `now - abandoned_after` (`now`: the service's clock,
    e.g. the LastModified of the backup just uploaded). A manifest that cannot be read keeps
    every blob (nothing is deleted on a guess)."""
    cutoff = now - abandoned_after
    named: set[str] = set()
    for info in (await backups_in(bucket, prefix)).values():
        head = await bucket.head(info.key)
        if head is not None and head.metadata.get(META_MANIFEST):
            named.add(head.metadata[META_MANIFEST])
    garbage = Garbage()
    kept: set[str] = set()
    for info in await bucket.list(prefix + MANIFESTS):
        sha256 = manifest_of(prefix, info.key)
        if sha256 is None:
            continue
        if sha256 in named or info.modified >= cutoff:
            kept.add(sha256)
        else:
            garbage.manifests.append(info.key)
    used: set[str] = set()
    for sha256 in sorted(kept):
        data = await bucket.get_bytes(manifest_key(prefix, sha256), MANIFEST_LIMIT)
        try:
            entries = json.loads(data) if data is not None else None
        except (ValueError, RecursionError):
            entries = None
        if not isinstance(entries, dict):
            await delete_objects(bucket, garbage.manifests)
            # Unreadable, or gone between the listing and the read (another run pruned it, or
            # made it anew): which blobs it needs is unknown, so every blob stays.
            return garbage
        used.update(e["sha256"] for e in entries.values() if isinstance(e, dict) and isinstance(e.get("sha256"), str))
    for info in await bucket.list(prefix + BLOBS):
        sha256 = blob_of(prefix, info.key)
        if sha256 is None or sha256 in used or info.modified >= cutoff:
            garbage.blobs_kept += sha256 is not None
        else:
            garbage.blobs.append(info.key)
    await delete_objects(bucket, garbage.manifests + garbage.blobs)
    return garbage
