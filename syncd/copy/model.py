"""One organization as read, and the id map between a source and a target organization.

Pure data, built once from mirror rows (or from a listing read during an apply), then read by
the planner, the settle steps and verify. Nothing here guesses what the service will do.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Origin = Literal["created", "adopted"]

BOOKKEEPING: frozenset[str] = frozenset({"space-duplicate", "space-fresh", "space-import"})
"""Id-map kinds that are syncd's own records, not target objects: a duplicate on its way to
the target, a fresh space being filled, the last import of a space (`copy.content`)."""

_LAST = 1 << 30


@dataclass(frozen=True)
class Node:
    """One object: `id` is its id in its tenant (for kinds whose ids are only unique under a
    parent, the mirror's qualified row id), `data` the object as the API answered it."""

    kind: str
    id: str
    parent: tuple[str, str] | None
    position: int | None
    data: Mapping[str, Any]

    @property
    def api_id(self) -> str:
        """The id the API knows (the last part of a qualified row id)."""
        return self.id.rsplit("/", 1)[-1]


class Rows(Protocol):
    """Where the objects of the kinds a snapshot does not hold are read (`syncd.copy.scoped`)."""

    kinds: frozenset[str]

    def data(self, kind: str, node_id: str) -> Mapping[str, Any]: ...

    def children(self, kind: str, parent: tuple[str, str] | None) -> list[Node]: ...

    def get(self, kind: str, node_id: str) -> Node | None: ...

    def of_kind(self, kind: str) -> list[Node]: ...

    def counts(self) -> dict[str, int]: ...

    def release(self) -> None: ...


class LazyNode(Node):
    """A Node whose `data` is read from `rows` when asked, not held: a space's pages and the
    rest of its content would make a large organization's snapshot gigabytes."""

    def __init__(self, kind: str, id: str, parent: tuple[str, str] | None, position: int | None, rows: Rows) -> None:
        for name, value in (("kind", kind), ("id", id), ("parent", parent), ("position", position), ("rows", rows)):
            object.__setattr__(self, name, value)

    @property  # type: ignore[override]
    def data(self) -> Mapping[str, Any]:
        return self.rows.data(self.kind, self.id)  # type: ignore[attr-defined,no-any-return]


class Snapshot:
    """Objects of one organization, indexed by (kind, id) and by (kind, parent), siblings in
    the order their listing gave (position, then the order rows came in)."""

    def __init__(self, tenant: str, org: str, nodes: Iterable[Node] = (), rows: Rows | None = None) -> None:
        self.tenant, self.org = tenant, org
        self.rows = rows
        """Where the objects of `rows.kinds` are read (None: every object is held)."""
        self._read = rows.kinds if rows is not None else frozenset()
        self.nodes: dict[tuple[str, str], Node] = {}
        for node in nodes:
            self.nodes[(node.kind, node.id)] = node
        self._index()

    def _index(self) -> None:
        arrival = {key: index for index, key in enumerate(self.nodes)}
        grouped: dict[tuple[str, tuple[str, str] | None], list[Node]] = defaultdict(list)
        by_kind: dict[str, list[Node]] = defaultdict(list)
        for node in self.nodes.values():
            grouped[(node.kind, node.parent)].append(node)
            by_kind[node.kind].append(node)

        def order(node: Node) -> tuple[int, int]:
            return (node.position if node.position is not None else _LAST, arrival[(node.kind, node.id)])

        self._children = {key: sorted(nodes, key=order) for key, nodes in grouped.items()}
        self._by_kind = {kind: sorted(nodes, key=lambda n: (n.parent or ("", ""), *order(n))) for kind, nodes in by_kind.items()}

    @classmethod
    def from_rows(cls, tenant: str, org: str, rows: Iterable[Mapping[str, Any]]) -> Snapshot:
        """From mirror rows (`kind, id, parent_kind, parent_id, position, data`)."""
        nodes = []
        for row in rows:
            parent = (row["parent_kind"], row["parent_id"]) if row.get("parent_kind") and row.get("parent_id") else None
            nodes.append(Node(row["kind"], row["id"], parent, row.get("position"), row["data"]))
        return cls(tenant, org, nodes)

    @classmethod
    def from_mirror(cls, store: Any, tenant: str, org: str, rows: Rows | None = None) -> Snapshot:
        """From the state's current rows; with `rows`, the objects of `rows.kinds` are not
        held: they are read from `rows` when asked (`get`, `children`, `of_kind`)."""
        if rows is None:
            return cls.from_rows(tenant, org, store.current(tenant, org=org))
        held = (row for kind in sorted(store.counts(tenant, org=org)) if kind not in rows.kinds for row in store.current(tenant, kind=kind, org=org))
        return cls(tenant, org, cls.from_rows(tenant, org, held).nodes.values(), rows)

    def release(self) -> None:
        """Close what its LazyNodes read from (opened again when one is read)."""
        if self.rows is not None:
            self.rows.release()

    def get(self, kind: str, node_id: str | None) -> Node | None:
        if node_id is None:
            return None
        if kind in self._read:
            return self.rows.get(kind, node_id)  # type: ignore[union-attr]
        return self.nodes.get((kind, node_id))

    def of_kind(self, kind: str) -> list[Node]:
        """Nodes of a kind, siblings together in position order."""
        if kind in self._read:
            return self.rows.of_kind(kind)  # type: ignore[union-attr]
        return list(self._by_kind.get(kind, ()))

    def children(self, kind: str, parent: tuple[str, str] | None) -> list[Node]:
        if kind in self._read:
            return self.rows.children(kind, parent)  # type: ignore[union-attr]
        return list(self._children.get((kind, parent), ()))

    def kinds(self) -> list[str]:
        return list(self._by_kind) + (list(self.rows.counts()) if self.rows is not None else [])

    @property
    def read_kinds(self) -> frozenset[str]:
        """The kinds this snapshot does not hold: read from `rows` when asked."""
        return self._read

    def count(self, kind: str) -> int:
        if kind in self._read:
            return self.rows.counts().get(kind, 0)  # type: ignore[union-attr]
        return len(self._by_kind.get(kind, ()))

    def every(self, kinds: Iterable[str]) -> Iterable[Node]:
        """The nodes of `kinds`, held or not (those read when asked, one kind at a time)."""
        for kind in sorted(set(kinds)):
            yield from self.of_kind(kind)

    def without(self, kind: str, ids: Iterable[str]) -> Snapshot:
        """This snapshot without some objects of a kind (pending duplicates in a source)."""
        gone = set(ids)
        if not gone:
            return self
        return Snapshot(self.tenant, self.org, (n for n in self.nodes.values() if not (n.kind == kind and n.id in gone)), self.rows)


@dataclass(frozen=True)
class Mapped:
    target_id: str
    origin: Origin


@dataclass
class IdMap:
    """Source id -> target id per kind, and whether syncd created the target object (only
    those may ever be deleted) or adopted an equivalent one that was already there."""

    entries: dict[tuple[str, str], Mapped] = field(default_factory=dict)

    def target(self, kind: str, source_id: str | None) -> str | None:
        entry = self.entries.get((kind, source_id)) if source_id is not None else None
        return entry.target_id if entry else None

    def origin(self, kind: str, source_id: str) -> Origin | None:
        entry = self.entries.get((kind, source_id))
        return entry.origin if entry else None

    def put(self, kind: str, source_id: str, target_id: str, origin: Origin) -> None:
        self.entries[(kind, source_id)] = Mapped(target_id, origin)

    def drop(self, kind: str, source_id: str) -> None:
        self.entries.pop((kind, source_id), None)

    def sources_of(self, kind: str) -> dict[str, str]:
        """target id -> source id for one kind."""
        return {m.target_id: source for (k, source), m in self.entries.items() if k == kind}

    def of_kind(self, kind: str) -> dict[str, str]:
        """source id -> target id for one kind."""
        return {source: m.target_id for (k, source), m in self.entries.items() if k == kind}

    def copy(self) -> IdMap:
        return IdMap(dict(self.entries))


__all__ = ["IdMap", "LazyNode", "Mapped", "Node", "Origin", "Rows", "Snapshot"]
