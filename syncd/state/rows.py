"""What the crawler hands to the mirror: one `Row` per API object, and its content hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Row", "canonical_json", "content_hash"]


@dataclass(frozen=True, slots=True)
class Row:
    """One object as read in a run.

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
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(data: Mapping[str, Any], volatile: Iterable[str] = frozenset()) -> str:
    """sha256 of the canonical JSON of `data` without its volatile top-level keys.

    Why: fields such as `updatedAt` or signed download URLs change without the object
    changing; leaving them out keeps a re-read of an unchanged object from being "updated".
    """
    skip = set(volatile)
    kept = {key: value for key, value in data.items() if key not in skip}
    return hashlib.sha256(canonical_json(kept).encode()).hexdigest()
