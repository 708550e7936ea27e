"""Where a backup's parts are kept in a bucket; pure.

Under a prefix (`s3://BUCKET/PREFIX/`, a backup job's `output`, or the folder of a
`--out s3://BUCKET/PREFIX/NAME.db`):

    PREFIX/NAME.db                   the backup, the SQLite file as `syncd backup` writes it
    PREFIX/manifests/<sha256>.json   a blob manifest (file row id -> sha256, size, name,
                                     contentType), named by the hash of its bytes
    PREFIX/blobs/ab/cdef...          the bytes whose sha256 is abcdef..., stored once, shared
                                     by every backup of the prefix

The backup object names its manifest in its metadata (`syncd-manifest`) and is written last:
an upload that stops before it leaves no object named like a backup, so `check` finds none
(a manifest and blobs nobody names are removed by the job's next pruning). Manifests are never
changed once written, so replacing `NAME.db` (`--overwrite`) switches to its new manifest in
the one write that replaces it.
"""

from __future__ import annotations

import re

__all__ = [
    "BLOBS",
    "MANIFESTS",
    "META_MANIFEST",
    "META_OBJECTS",
    "META_SCOPE",
    "META_SHA256",
    "blob_key",
    "blob_of",
    "manifest_key",
    "manifest_of",
]

BLOBS = "blobs/"
MANIFESTS = "manifests/"
META_MANIFEST = "syncd-manifest"
"""The backup object's metadata naming its manifest (the manifest's sha256), absent without files."""
META_SHA256 = "syncd-sha256"
"""The sha256 of the object's bytes (a backup, a blob)."""
META_OBJECTS = "syncd-objects"
"""The objects a backup holds, so that the next one is compared with it without a download."""
META_SCOPE = "syncd-scope"
"""The crawl's scope of a backup (`TENANT:ORG` and its patterns), what it is compared by."""
_SHA256 = re.compile(r"\A[0-9a-f]{64}\Z")


def blob_key(prefix: str, sha256: str) -> str:
    if not _SHA256.match(sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256[:70]!r}")
    return f"{prefix}{BLOBS}{sha256[:2]}/{sha256[2:]}"


def blob_of(prefix: str, key: str) -> str | None:
    """The sha256 a blob key holds, or None when `key` is no blob of `prefix`."""
    rest = key.removeprefix(prefix + BLOBS) if key.startswith(prefix + BLOBS) else None
    if rest is None or rest[2:3] != "/":
        return None
    name = rest[:2] + rest[3:]
    return name if _SHA256.match(name) else None


def manifest_key(prefix: str, sha256: str) -> str:
    if not _SHA256.match(sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256[:70]!r}")
    return f"{prefix}{MANIFESTS}{sha256}.json"


def manifest_of(prefix: str, key: str) -> str | None:
    """The sha256 a manifest key is named by, or None when `key` is no manifest of `prefix`."""
    if not key.startswith(prefix + MANIFESTS) or not key.endswith(".json"):
        return None
    name = key[len(prefix + MANIFESTS) : -len(".json")]
    return name if _SHA256.match(name) else None

