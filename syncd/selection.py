"""Which objects of one organization a `Scope` selects, and what the selection depends on
outside itself. Pure: rows in, a `Selection` out; the crawler, the export and the copy all
decide with this one function, so a scoped sync, backup, export and mirror agree.

What is in scope (`syncd.scope` says how a pattern matches a path):

- a collection or space whose path the scope selects, and everything under it (a space's
  pages, files, comments, change requests, custom-field values, links);
- the collections above an object in scope, even when no pattern selects them: an object
  needs its place in the tree (rclone makes the directories of the files it copies too).
  They are reported as a `Dependency`;
- a docs site whose title the scope selects, with its section groups, sections, adaptive
  schema and published view; but not a site-space (nor a derived row: a member's or a
  collection's list of spaces) that names a space out of scope: it is left out and the
  site-space is reported;
- the organization itself always: it is where everything else lives;
- organization-wide objects (members, teams, custom fields, translations, SAML providers,
  OpenAPI specs, integrations) have no path: an exclude never removes them, and any include
  leaves them out (an include lists what is wanted).

Dependencies are reported, never silently dropped: the parent collections above, site-spaces
publishing a space out of scope, values of custom fields out of scope, links from a space in
scope to a space out of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from syncd.scope import Scope, path_text

__all__ = ["ORG_WIDE", "Dependency", "Item", "Selection", "content_dependencies", "item_of_row", "select", "tree_paths"]

Key = tuple[str, str]

ORG_WIDE = frozenset({
    "member", "team", "saml-provider", "sso-provider", "openapi-spec", "translation", "custom-field", "integration",
})  # fmt: skip
"""Kinds directly under the organization that no path names."""
TREE = ("collection", "space")
SPACE_NAMING = {"collection-space": "collection", "member-space": "member", "site-space": "site"}
"""Rows that name a space and belong to another object: kept only when that space is."""
VALUE_KINDS = frozenset({"space-custom-field-value"})
LINK_KINDS = frozenset({"space-link"})
"""A space's links (every link of its pages: page-link rows say the same per page)."""
_IN_APP_SPACE = re.compile(r"/s/([A-Za-z0-9_-]+)(?:/|$)")


@dataclass(frozen=True)
class Item:
    """What the selection needs of one object: its kind, id, parent and data."""

    kind: str
    id: str
    parent: Key | None
    data: Mapping[str, Any]

    @property
    def key(self) -> Key:
        return (self.kind, self.id)


def item_of_row(row: Mapping[str, Any]) -> Item:
    """An Item of a mirror row (`kind, id, parent_kind, parent_id, data`)."""
    parent = (row["parent_kind"], row["parent_id"]) if row.get("parent_kind") and row.get("parent_id") else None
    data = row.get("data")
    return Item(row["kind"], row["id"], parent, data if isinstance(data, Mapping) else {})


@dataclass(frozen=True)
class Dependency:
    """Something in scope that needs, or points at, something out of it."""

    kind: str
    path: str
    """The object in scope, by its path (a site: its title)."""
    needs_kind: str
    needs: str
    """What it needs or points at, out of scope, by its path."""
    reason: str
    """How it depends on it, and what syncd does about it."""

    def line(self) -> str:
        return f"{self.kind} {self.path!r} needs {self.needs_kind} {self.needs!r}, outside the scope: {self.reason}"

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "path": self.path, "needs_kind": self.needs_kind, "needs": self.needs, "reason": self.reason}


@dataclass
class Selection:
    """The keys in scope, each collection's and space's path, and the dependencies."""

    scope: Scope
    kept: set[Key] = field(default_factory=set)
    paths: dict[Key, tuple[str, ...]] = field(default_factory=dict)
    dependencies: list[Dependency] = field(default_factory=list)

    def __contains__(self, key: object) -> bool:
        return key in self.kept

    def path(self, kind: str, object_id: str) -> str:
        """The object's path as people read it (its id when it has none)."""
        found = self.paths.get((kind, object_id))
        return path_text(found) if found else object_id


def _title(data: Mapping[str, Any]) -> str:
    title = data.get("title")
    return str(title) if title is not None else ""


def _space_of(item: Item) -> str | None:
    """The space a space-naming row names."""
    if item.kind == "site-space":
        space = item.data.get("space")
        found = space.get("id") if isinstance(space, Mapping) else item.data.get("spaceId")
        return str(found) if isinstance(found, str) else None
    return item.id.rsplit("/", 1)[-1]


class _Tree:
    """Paths of collections and spaces, from their titles and parents (cycles cut)."""

    def __init__(self, items: Mapping[Key, Item]) -> None:
        self.items = items
        self.paths: dict[Key, tuple[str, ...]] = {}

    def parent(self, item: Item) -> Item | None:
        if item.parent is None or item.parent[0] != "collection":
            return None
        return self.items.get(item.parent)

    def path(self, item: Item) -> tuple[str, ...]:
        if item.key in self.paths:
            return self.paths[item.key]
        chain, seen, node = [], set(), item
        while node is not None and node.key not in seen and node.key not in self.paths:
            seen.add(node.key)
            chain.append(node)
            node = self.parent(node)
        base = self.paths.get(node.key, ()) if node is not None and node.key in self.paths else ()
        for link in reversed(chain):
            base = base + (_title(link.data),)
            self.paths[link.key] = base
        return self.paths[item.key]

    def ancestors(self, item: Item) -> list[Item]:
        out, seen, node = [], {item.key}, self.parent(item)
        while node is not None and node.key not in seen:
            seen.add(node.key)
            out.append(node)
            node = self.parent(node)
        return out


def tree_paths(items: Iterable[Item]) -> dict[Key, tuple[str, ...]]:
    """The path of each collection and space among `items`."""
    by_key = {item.key: item for item in items}
    tree = _Tree(by_key)
    return {key: tree.path(item) for key, item in by_key.items() if item.kind in TREE}


def select(scope: Scope, items: Iterable[Item], *, undecided: bool = False, fixed: Mapping[Key, bool] | None = None) -> Selection:
    """The selection of `scope` over one organization's objects (module docstring).

    `undecided`: the collections could not be read, so no path is known: no collection or
    space is in scope (and nothing that names one). `fixed`: objects whose fate is decided
    elsewhere (a copy's target objects follow the source objects they were copied from);
    what belongs to them follows them, and a fixed "out" is never kept as a parent."""
    fixed = fixed or {}
    by_key = {item.key: item for item in items}
    selection = Selection(scope)
    if scope.everything:
        selection.kept = set(by_key)
        return selection
    tree = _Tree(by_key)
    matched: set[Key] = set()
    for item in by_key.values():
        if item.kind in TREE:
            selection.paths[item.key] = tree.path(item)
            if fixed.get(item.key, not undecided and scope.selects(selection.paths[item.key], collection=item.kind == "collection")):
                matched.add(item.key)
        elif item.kind == "site":
            selection.paths[item.key] = (_title(item.data),)
            if fixed.get(item.key, scope.selects(selection.paths[item.key])):
                matched.add(item.key)
    kept = set(matched)
    for key in sorted(matched):
        for parent in tree.ancestors(by_key[key]):
            if parent.key not in kept and fixed.get(parent.key) is not False:
                kept.add(parent.key)
                selection.dependencies.append(Dependency(
                    key[0], selection.path(*key), "collection", selection.path(*parent.key),
                    "its parent, kept as the place of what is in scope",
                ))  # fmt: skip
    anchors: dict[Key, bool] = {}

    def in_scope(item: Item) -> bool:
        """Objects without a path follow the object they belong to."""
        if item.key in anchors:
            return anchors[item.key]
        anchors[item.key] = False  # a parent cycle keeps nothing
        if item.key in fixed and item.kind not in TREE and item.kind != "site":
            result = fixed[item.key]
        elif item.kind in TREE or item.kind == "site":
            result = item.key in kept
        elif item.kind == "organization":
            result = True
        elif item.kind in ORG_WIDE:
            result = not scope.include
        else:
            parent = by_key.get(item.parent) if item.parent is not None else None
            result = in_scope(parent) if parent is not None else not scope.include
            space = _space_of(item) if item.kind in SPACE_NAMING else None
            if result and space is not None and ("space", space) in by_key and ("space", space) not in kept:
                result = False
                if item.kind == "site-space" and item.parent is not None and not undecided:
                    selection.dependencies.append(Dependency(
                        "site", selection.path(*item.parent), "space", selection.path("space", space),
                        "the site publishes it; that site-space is left out",
                    ))  # fmt: skip
        anchors[item.key] = result
        return result

    selection.kept = {key for key, item in by_key.items() if in_scope(item)}
    return selection


def content_dependencies(selection: Selection, rows: Iterable[Item], space_of: Mapping[Key, str]) -> list[Dependency]:
    """Dependencies of the content of spaces in scope: values of custom fields out of scope
    (an include leaves organization-wide objects out) and links to spaces out of scope.
    `space_of`: the space each row belongs to (its `space:ID` scope)."""
    fields: dict[str, set[str]] = {}
    links: set[tuple[str, str]] = set()
    known_spaces = {object_id for kind, object_id in selection.paths if kind == "space"}
    for item in rows:
        space = space_of.get(item.key)
        if space is None or ("space", space) not in selection.kept:
            continue
        if item.kind in VALUE_KINDS and selection.scope.include:
            custom = item.data.get("customField")
            name = custom.get("name") if isinstance(custom, Mapping) else item.id.rsplit("/", 1)[-1]
            fields.setdefault(str(name), set()).add(space)
        elif item.kind in LINK_KINDS:
            for target in _linked_spaces(item.data):
                if target != space and target in known_spaces and ("space", target) not in selection.kept:
                    links.add((space, target))
    out = []
    for name, spaces in sorted(fields.items()):
        paths = sorted(selection.path("space", space) for space in spaces)
        more = f" (and {len(paths) - 1} more space(s))" if len(paths) > 1 else ""
        out.append(Dependency(
            "space", paths[0], "custom-field", name,
            f"it has a value of it{more} (custom fields are organization-wide: an --include leaves them out)",
        ))  # fmt: skip
    named = sorted((selection.path("space", source), selection.path("space", target)) for source, target in links)
    out += [Dependency("space", source, "space", target, "it links to it; the link is kept as it is") for source, target in named]
    return out


def _linked_spaces(data: Mapping[str, Any]) -> set[str]:
    """Spaces a link row points at: a `space` in its target reference, or an app URL's `/s/ID`."""
    target = data.get("targetReference")
    if not isinstance(target, Mapping):
        return set()
    found = set()
    if isinstance(target.get("space"), str):
        found.add(str(target["space"]))
    url = target.get("url")
    if isinstance(url, str):
        found.update(_IN_APP_SPACE.findall(url))
    return found
