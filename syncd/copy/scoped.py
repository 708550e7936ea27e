"""The space-scoped objects of a snapshot, read from the state when asked.

Why: a space's pages, links, files, comments, change requests and what is under them are
nearly all of an organization's objects and bytes (a page's document is tens of KB once
parsed; 75 rows a space in the benchmark's organization), and the write side looks at them one
space, one parent, at a time. So a `Snapshot` holds the organization-level graph (collections,
spaces, sites, teams, ... : a few objects a space) and asks `ScopedRows` for the objects of
the space-scoped kinds (a kind whose catalog `scope` is a space or a change request): the
children of one parent (an indexed read by parent), one object by key, or every object of a
kind (counts and fingerprints), read from the state mirror or the backup file. Their `data`
is read by key when asked: at most `held` objects are kept decoded at once, and the children
lists of at most `held_lists` parents (least recently used first out).

The rows are those of the state as the snapshot was read: a snapshot is dropped when its side
is read again (the next round reads a new one), so what a lookup finds is what was read. The
state is opened on the first lookup and closed by `release` (opened again if asked again).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from syncd.catalog import DERIVED, KINDS
from syncd.copy.model import LazyNode, Node
from syncd.state import StateStore
from syncd.state.location import StateLocation

__all__ = ["DEFAULT_HELD", "READ_WHEN_ASKED", "SCOPED_KINDS", "ScopedRows"]

SCOPED_KINDS: frozenset[str] = frozenset(kind.name for kind in KINDS if kind.scope is not None)
"""Kinds whose objects live in one space (or change request)."""
READ_WHEN_ASKED: frozenset[str] = SCOPED_KINDS | DERIVED
"""What a snapshot does not hold: the space-scoped kinds, and the derived ones no part of the
write side compares (a member's spaces, a collection's spaces: one row per space and member)."""

DEFAULT_HELD = 512
"""Decoded space-scoped objects a side keeps at once: a few spaces' pages."""
HELD_LISTS = 256
"""Children lists a side keeps at once."""
_LAST = 1 << 30
_PLACE = ("kind", "id", "parent_kind", "parent_id", "position")


class ScopedRows:
    """The `data` of one side's space-scoped objects, read by key from the state (module
    docstring). `loads` counts reads, `peak` the most objects held decoded at once (tests
    check the bound through them)."""

    def __init__(
        self, location: StateLocation, tenant: str, org: str, *, readonly: bool = False, held: int | None = None, kinds: frozenset[str] = READ_WHEN_ASKED
    ) -> None:
        self.location, self.tenant, self.org, self.readonly = location, tenant, org, readonly
        self.kinds = kinds
        """The kinds read here (a snapshot holds the others)."""
        self.held = max(1, held if held is not None else DEFAULT_HELD)
        self.held_lists = max(1, HELD_LISTS)
        self.loads = 0
        self.peak = 0
        self._cache: OrderedDict[tuple[str, str], Mapping[str, Any]] = OrderedDict()
        self._lists: OrderedDict[tuple[str, tuple[str, str] | None], list[Node]] = OrderedDict()
        self._lock = threading.Lock()
        self._store: StateStore | None = None
        self._closer: weakref.finalize | None = None  # type: ignore[type-arg]

    def data(self, kind: str, node_id: str) -> Mapping[str, Any]:
        """The object as read ({} when the state no longer has it)."""
        key = (kind, node_id)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
            value = self._open().current_value(self.tenant, kind, node_id)
            found = value if isinstance(value, dict) else {}
            self.loads += 1
            self._cache[key] = found
            while len(self._cache) > self.held:
                self._cache.popitem(last=False)
            self.peak = max(self.peak, len(self._cache))
            return found

    def children(self, kind: str, parent: tuple[str, str] | None) -> list[Node]:
        """The objects of `kind` under `parent`, in position order (then as the state orders them)."""
        key = (kind, parent)
        with self._lock:
            found = self._lists.get(key)
            if found is not None:
                self._lists.move_to_end(key)
                return list(found)
            found = [self._node(row) for row in self._select("kind = ? AND parent_kind = ? AND parent_id = ?", [kind, *(parent or ("", ""))])]
            found.sort(key=lambda n: n.position if n.position is not None else _LAST)  # stable: ties keep the state's order
            self._lists[key] = found
            while len(self._lists) > self.held_lists:
                self._lists.popitem(last=False)
            return list(found)

    def get(self, kind: str, node_id: str) -> Node | None:
        with self._lock:
            rows = self._select("kind = ? AND id = ?", [kind, node_id])
        return self._node(rows[0]) if rows else None

    def of_kind(self, kind: str) -> list[Node]:
        """Every object of a kind (its places; data read when asked), siblings together."""
        with self._lock:
            nodes = [self._node(row) for row in self._open().current_keys(self.tenant, kind=kind, org=self.org)]
        nodes.sort(key=lambda n: (n.parent or ("", ""), n.position if n.position is not None else _LAST))
        return nodes

    def counts(self) -> dict[str, int]:
        """kind -> objects of the kinds read here."""
        with self._lock:
            return {kind: n for kind, n in self._open().counts(self.tenant, org=self.org).items() if kind in self.kinds}

    def _select(self, where: str, params: list[Any]) -> list[dict[str, Any]]:
        """Places of current objects (no data), by the index on (tenant, kind, parent_kind,
        parent_id, position) or the primary key, in the state's order of siblings."""
        sql = f"SELECT kind, id, parent_kind, parent_id, position FROM resources WHERE tenant = ? AND {where} AND org = ? AND deleted_run IS NULL ORDER BY position, id"
        cursor = self._open().db.execute(sql, [self.tenant, *params, self.org])
        return [dict(zip(_PLACE, values, strict=True)) for values in cursor.fetchall()]

    def _node(self, row: Mapping[str, Any]) -> Node:
        parent = (row["parent_kind"], row["parent_id"]) if row.get("parent_kind") and row.get("parent_id") else None
        return LazyNode(row["kind"], row["id"], parent, row.get("position"), self)

    def _open(self) -> StateStore:
        if self._store is None:
            self._store = StateStore(self.location, readonly=self.readonly, create=False)
            self._closer = weakref.finalize(self, self._store.close)
        return self._store

    def release(self) -> None:
        """Close the state (the decoded objects are dropped too); a later lookup opens it again."""
        with self._lock:
            self._cache.clear()
            self._lists.clear()
            if self._closer is not None:
                self._closer()
            self._store, self._closer = None, None
