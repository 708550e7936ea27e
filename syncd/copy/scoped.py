"""The space-scoped objects of a snapshot, read from the state when asked.

Why: a space's pages, files, comments, change requests and what is under them are nearly all
of an organization's bytes (a page's document is tens of KB once parsed), and the write side
looks at them one space at a time. A `Snapshot` holds every object's place (kind, id,
parent, position: a few hundred bytes), but the `data` of a space-scoped object (a kind
whose catalog `scope` is a space or a change request) stays in the state mirror (or the
backup file) and is read by its key when asked: at most `held` of them are kept decoded at
once (least recently used first out). The organization-level graph (collections, spaces,
sites, teams, ...) is held whole, as before.

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

from syncd.catalog import KINDS
from syncd.state import StateStore
from syncd.state.location import StateLocation

__all__ = ["DEFAULT_HELD", "SCOPED_KINDS", "ScopedRows"]

SCOPED_KINDS: frozenset[str] = frozenset(kind.name for kind in KINDS if kind.scope is not None)
"""Kinds whose objects live in one space (or change request): read when asked."""

DEFAULT_HELD = 512
"""Decoded space-scoped objects a side keeps at once: a few spaces' pages."""


class ScopedRows:
    """The `data` of one side's space-scoped objects, read by key from the state (module
    docstring). `loads` counts reads, `peak` the most objects held decoded at once (tests
    check the bound through them)."""

    def __init__(self, location: StateLocation, tenant: str, *, readonly: bool = False, held: int = DEFAULT_HELD) -> None:
        self.location, self.tenant, self.readonly = location, tenant, readonly
        self.held = max(1, held)
        self.loads = 0
        self.peak = 0
        self._cache: OrderedDict[tuple[str, str], Mapping[str, Any]] = OrderedDict()
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

    def _open(self) -> StateStore:
        if self._store is None:
            self._store = StateStore(self.location, readonly=self.readonly, create=False)
            self._closer = weakref.finalize(self, self._store.close)
        return self._store

    def release(self) -> None:
        """Close the state (the decoded objects are dropped too); a later lookup opens it again."""
        with self._lock:
            self._cache.clear()
            if self._closer is not None:
                self._closer()
            self._store, self._closer = None, None
