"""A scoped copy (`--include` / `--exclude` on `mirror plan/apply/verify` and `restore`): both
sides as read, cut down to the scope before anything is planned or compared.

Pure: the snapshots and the id map in, smaller snapshots and the dependencies out. Planning,
applying, the rounds and verify then only ever see what is in scope, so:

- the source's objects out of scope are not copied (`syncd.selection` says what is in it,
  and which parent collections come along);
- on the target, an object copied from a source object follows that object: in scope with
  it (even where someone moved it on the target: the copy puts it back), out of scope with
  it (left alone: never patched, moved or deleted, even in mirror mode). Any other target
  object is in scope by its own path on the target; mirror mode only ever deletes what syncd
  created, so that means: what syncd created from a source object that is gone;
- with an `--include`, the organization's own settings are out of scope like the other
  organization-wide objects: they are neither copied nor compared;
- verify compares the scope only: what is out of it is neither missing nor extra.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from syncd.copy.model import IdMap, Node, Snapshot
from syncd.scope import Scope
from syncd.selection import LINK_KINDS, SPACE_NAMING, VALUE_KINDS, Dependency, Item, content_dependencies, select

__all__ = ["ScopedSides", "scope_sides"]


@dataclass
class ScopedSides:
    source: Snapshot
    target: Snapshot
    dependencies: list[Dependency] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _item(node: Node) -> Item:
    return Item(node.kind, node.id, node.parent, node.data)


def _named(snapshot: Snapshot) -> Iterable[Node]:
    """What a scope chooses from: the held objects, and the rows that name a space's
    collection, member or site (read from the state: a snapshot does not hold them)."""
    return itertools.chain(snapshot.nodes.values(), snapshot.every(snapshot.read_kinds & set(SPACE_NAMING)))


def _cut(snapshot: Snapshot, kept: set[tuple[str, str]]) -> Snapshot:
    return Snapshot(snapshot.tenant, snapshot.org, (node for key, node in snapshot.nodes.items() if key in kept), snapshot.rows)


def scope_sides(source: Snapshot, target: Snapshot, idmap: IdMap, scope: Scope) -> ScopedSides:
    """Both sides cut down to `scope` (module docstring)."""
    if scope.everything:
        return ScopedSides(source, target)
    chosen = select(scope, map(_item, _named(source)))
    fixed: dict[tuple[str, str], bool] = {}
    for (kind, source_id), entry in idmap.entries.items():
        if source.get(kind, source_id) is not None and target.get(kind, entry.target_id) is not None:
            fixed[(kind, entry.target_id)] = (kind, source_id) in chosen
    on_target = select(scope, map(_item, _named(target)), fixed=fixed)
    source_kept, target_kept = set(chosen.kept), set(on_target.kept)
    if scope.include:  # the organization's settings are organization-wide
        source_kept.discard(("organization", source.org))
        target_kept.discard(("organization", target.org))
    content = [_item(node) for kind in sorted(VALUE_KINDS | LINK_KINDS) for node in source.of_kind(kind)]
    space_of = {item.key: item.parent[1] for item in content if item.parent is not None and item.parent[0] == "space"}
    out = ScopedSides(_cut(source, source_kept), _cut(target, target_kept))
    out.dependencies = chosen.dependencies + content_dependencies(chosen, content, space_of)
    if not any(kind in ("collection", "space", "site") for kind, _ in chosen.kept):
        out.warnings.append(f"the scope ({scope.describe()}) holds no collection, space or site of the source")
    return out
