"""What the crawler hands to the mirror: one `Row` per API object, and its content hash."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from syncd import json_codec

__all__ = ["Row", "canonical_json", "content_hash"]


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


def canonical_json(value: Any) -> str:
    """Key-sorted, compact JSON: the same object always gives the same text."""
    return json_codec.canonical(value)


def content_hash(data: Mapping[str, Any], volatile: Iterable[str] = frozenset()) -> str:
    """sha256 of the canonical JSON of `data` without its volatile top-level keys.

    Why: fields such as `updatedAt` or signed download URLs change without the object
    changing; leaving them out keeps a re-read of an unchanged object from being "updated".
    """
    skip = volatile if isinstance(volatile, (set, frozenset)) else set(volatile)
    kept = {key: value for key, value in data.items() if key not in skip} if skip else data
    return hashlib.sha256(json_codec.canonical_bytes(kept)).hexdigest()
