"""What the crawler hands to the mirror: one `Row` per API object, and its content hash.

Two forms of one hash, the sha256 of an object's canonical JSON without its volatile fields:
- `stored_hash`, what the mirror stores (`Row.hash`, `resources.hash`, `changes.old_hash` and
  `new_hash`): its first 128 bits as base64url without padding, 22 characters, not the 64 of
  the hex form (issue 44: the benchmark's packed mirror 791 -> 737 bytes an object). The hash
  only tells one object's versions apart (change detection, not a security property): two
  versions sharing 128 bits by chance is 2^-128 a comparison, about 2^-88 over a trillion.
  Files of before migration 0008 held the hex form; the migration converted them
  (`stored_of_hex`, the SQL function `syncd_stored_hash`);
- `content_hash`, all 64 hex characters, for what leaves the mirror and must read as it always
  did: an export's records (`syncd.read.export.records`) and a plan file's fingerprints
  (`syncd.copy.planfile`).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from syncd import json_codec

__all__ = ["STORED_HASH_LENGTH", "Row", "canonical_json", "content_hash", "stored_hash", "stored_of_hex"]

STORED_HASH_LENGTH = 22
"""Characters of a stored hash: 16 bytes as base64url, without its two `=`."""
_HEX_HASH = re.compile("[0-9a-f]{64}")


@dataclass(slots=True)
class Row:
    """One object as read in a run (not frozen: a crawl makes one per object read, and a frozen
    dataclass's `__init__` costs four times as much; nothing changes a Row once made).

    `listing` is the key of the list the row came from (its absence from a listing read
    cleanly is what deletes it); `scope` names the container whose change token lets a
    later run carry the row forward without reading it (e.g. "space:ID"), or None.
    `parent_kind`/`parent_id` drive moves and cascade deletes, so set both or neither.
    """

    tenant: str
    kind: str
    id: str
    org: str | None
    parent_kind: str | None
    parent_id: str | None
    position: int | None
    listing: str | None
    scope: str | None
    data: Mapping[str, Any]
    hash: str
    """`stored_hash` of `data` (what `syncd.catalog.stored_hash` gives for the row's kind)."""


def canonical_json(value: Any) -> str:
    """Key-sorted, compact JSON: the same object always gives the same text."""
    return json_codec.canonical(value)


def content_hash(data: Mapping[str, Any], volatile: Iterable[str] = frozenset()) -> str:
    """sha256 of the canonical JSON of `data` without its volatile top-level keys, in hex.

    Why: fields such as `updatedAt` or signed download URLs change without the object
    changing; leaving them out keeps a re-read of an unchanged object from being "updated".
    Not what the mirror stores (`stored_hash`): the form of what leaves it (module docstring).
    """
    return _sha256(data, volatile).hexdigest()


def stored_hash(data: Mapping[str, Any], volatile: Iterable[str] = frozenset()) -> str:
    """`content_hash`'s first 128 bits as base64url without padding: what the mirror stores."""
    return _short(_sha256(data, volatile).digest())


def stored_of_hex(value: Any) -> Any:
    """The stored form of a `content_hash` (64 lowercase hex characters), as `stored_hash` gives
    it for the same object; any other value (a stored hash, NULL) as it is. Migration 0008 calls
    it (SQL `syncd_stored_hash`) on the hashes files of before it hold."""
    if isinstance(value, str) and _HEX_HASH.fullmatch(value):
        return _short(bytes.fromhex(value[:32]))
    return value


def _sha256(data: Mapping[str, Any], volatile: Iterable[str]) -> Any:
    skip = volatile if isinstance(volatile, (set, frozenset)) else set(volatile)
    kept = {key: value for key, value in data.items() if key not in skip} if skip else data
    return hashlib.sha256(json_codec.canonical_bytes(kept))


def _short(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest[:16])[:STORED_HASH_LENGTH].decode("ascii")
