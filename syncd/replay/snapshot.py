"""One organization of one tenant as the mirror holds it, and the id map between two.

Pure data: built from mirror rows once, then read by plan, simulate and verify.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Origin = Literal["created", "adopted"]


@dataclass(frozen=True)
class Node:
    """One object: `id` is its id in its tenant (the API's id; for kinds whose ids are only
    unique under a parent, the mirror's qualified row id), `data` the API object."""

    kind: str
    id: str
    parent: tuple[str, str] | None
    position: int | None
    data: Mapping[str, Any]

    @property
    def api_id(self) -> str:
        """The id the API knows (the last part of a qualified row id)."""
        return self.id.rsplit("/", 1)[-1]


@dataclass
class Snapshot:
    """Objects of one organization, by kind, in the order of their listings."""

    tenant: str
    org: str
    nodes: dict[tuple[str, str], Node] = field(default_factory=dict)
    _by_kind: dict[str, list[Node]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def from_rows(cls, tenant: str, org: str, rows: Iterable[Mapping[str, Any]]) -> Snapshot:
        snapshot = cls(tenant, org)
        for row in rows:
            parent = (row["parent_kind"], row["parent_id"]) if row.get("parent_kind") and row.get("parent_id") else None
            snapshot.add(Node(row["kind"], row["id"], parent, row.get("position"), row["data"]))
        return snapshot

    @classmethod
    def from_mirror(cls, mirror: Any, tenant: str, org: str) -> Snapshot:
        return cls.from_rows(tenant, org, mirror.current(tenant, org=org))

    def add(self, node: Node) -> None:
        key = (node.kind, node.id)
        if key in self.nodes:
            self._by_kind[node.kind] = [n for n in self._by_kind[node.kind] if n.id != node.id]
        self.nodes[key] = node
        self._by_kind[node.kind].append(node)

    def remove(self, kind: str, node_id: str) -> None:
        if self.nodes.pop((kind, node_id), None) is not None:
            self._by_kind[kind] = [n for n in self._by_kind[kind] if n.id != node_id]

    def get(self, kind: str, node_id: str | None) -> Node | None:
        return self.nodes.get((kind, node_id)) if node_id is not None else None

    def of_kind(self, kind: str) -> list[Node]:
        """Nodes of a kind, siblings together in position order."""
        return sorted(self._by_kind.get(kind, []), key=_order_key)

    def children(self, kind: str, parent: tuple[str, str] | None) -> list[Node]:
        return [n for n in self.of_kind(kind) if n.parent == parent]


def _order_key(node: Node) -> tuple[str, str, int, str]:
    parent = node.parent or ("", "")
    return (parent[0], parent[1], node.position if node.position is not None else 1 << 30, node.id)


@dataclass(frozen=True)
class Mapping_:
    target_id: str
    origin: Origin


@dataclass
class IdMap:
    """Source id -> target id per kind, and whether syncd created the target object (only
    those may ever be deleted) or adopted an equivalent one that was already there."""

    entries: dict[tuple[str, str], Mapping_] = field(default_factory=dict)

    def target(self, kind: str, source_id: str) -> str | None:
        entry = self.entries.get((kind, source_id))
        return entry.target_id if entry else None

    def origin(self, kind: str, source_id: str) -> Origin | None:
        entry = self.entries.get((kind, source_id))
        return entry.origin if entry else None

    def put(self, kind: str, source_id: str, target_id: str, origin: Origin) -> None:
        self.entries[(kind, source_id)] = Mapping_(target_id, origin)

    def drop(self, kind: str, source_id: str) -> None:
        self.entries.pop((kind, source_id), None)

    def sources_of(self, kind: str) -> dict[str, str]:
        """target id -> source id for one kind."""
        return {m.target_id: source for (k, source), m in self.entries.items() if k == kind}

    def copy(self) -> IdMap:
        return IdMap(dict(self.entries))
