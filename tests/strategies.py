"""Hypothesis strategies for organizations built from drawn structure, and what turns them into
the snapshots the planner reads.

An organization is drawn as data (`OrgShape`: nested collections and spaces, each space with a
nested page tree, sites with section groups, sections and site-spaces as drawn lists), never
as one integer seed for `random.Random`: so when a property fails, Hypothesis shrinks the
organization itself, to the fewest collections, spaces, pages, sites and sections that still
fail, and prints it.

`snapshot(shape, ...)` lays a shape out as `Snapshot` nodes shaped like the crawler's rows
(ids, parents, positions, the fields the API answers). Ids follow the shape behind a one-letter
prefix (`Sc0`, `Ss1`, `Sw0` ...), so the same shape laid out twice, with two prefixes, gives two
organizations equal object for object, and `mapping` pairs their ids (an id map as a copy
leaves it). `remove` takes objects out of a snapshot the way the service does: what is inside
an object goes with it.

Sizes stay small by default (`DEFAULT_SIZE`); under the `slow` Hypothesis profile
(tests/conftest.py, `HYPOTHESIS_PROFILE=slow`) they grow to `LARGE_SIZE`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from syncd.copy import IdMap, Node, Snapshot

TITLES = ("Guides", "API", "Billing", "Setup", "FAQ")
"""Few titles, so siblings often share one (adoption and ordering meet look-alikes)."""
COPIED = ("collection", "space", "site", "site-section-group", "site-section", "site-space")
"""The kinds these organizations hold that a copy makes on the target (pages travel with
their space's content)."""


@dataclass(frozen=True)
class Size:
    """Upper bounds of a drawn organization."""

    depth: int = 2
    """Levels of collections below the root ones."""
    children: int = 3
    """Collections and spaces per container, sections per site, site-spaces per section."""
    pages: int = 2
    """Pages per parent."""
    page_depth: int = 1
    """Levels of pages below the top ones."""
    sites: int = 2


DEFAULT_SIZE = Size()
LARGE_SIZE = Size(depth=3, children=5, pages=4, page_depth=2, sites=3)


def current_size() -> Size:
    """The size of the running profile: `HYPOTHESIS_PROFILE=slow` draws larger organizations."""
    return LARGE_SIZE if os.environ.get("HYPOTHESIS_PROFILE") == "slow" else DEFAULT_SIZE


# ----- shapes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageShape:
    title: str
    markdown: str
    children: tuple[PageShape, ...] = ()


@dataclass(frozen=True)
class SpaceShape:
    title: str
    emoji: str | None
    visibility: str
    pages: tuple[PageShape, ...] = ()


@dataclass(frozen=True)
class CollectionShape:
    title: str
    description: str | None
    collections: tuple[CollectionShape, ...] = ()
    spaces: tuple[SpaceShape, ...] = ()


@dataclass(frozen=True)
class SectionShape:
    title: str
    group: int | None
    """Index into the site's groups, or None: not in a group."""
    spaces: tuple[int, ...]
    """Its site-spaces, by index into the organization's spaces (each space at most once)."""


@dataclass(frozen=True)
class SiteShape:
    title: str
    groups: tuple[str, ...]
    sections: tuple[SectionShape, ...]
    root_spaces: tuple[int, ...]
    """Site-spaces at the root: a site with sections has none (the API adds none there)."""


@dataclass(frozen=True)
class OrgShape:
    collections: tuple[CollectionShape, ...]
    spaces: tuple[SpaceShape, ...]
    sites: tuple[SiteShape, ...]

    def all_spaces(self) -> list[SpaceShape]:
        """Spaces in layout order (the order `snapshot` numbers them in)."""

        def walk(collections: Iterable[CollectionShape]) -> Iterator[SpaceShape]:
            for collection in collections:
                yield from walk(collection.collections)
                yield from collection.spaces

        return [*walk(self.collections), *self.spaces]


titles = st.sampled_from(TITLES)


def pages(size: Size, depth: int = 0) -> st.SearchStrategy[tuple[PageShape, ...]]:
    below = pages(size, depth + 1) if depth < size.page_depth else st.just(())
    page = st.builds(PageShape, titles, st.sampled_from(("", "Hello.\n", "# Steps\n\n1. one\n")), below)
    return st.lists(page, max_size=size.pages).map(tuple)


def spaces(size: Size) -> st.SearchStrategy[SpaceShape]:
    return st.builds(
        SpaceShape, titles, st.sampled_from((None, "1f680", "1f4d8")), st.sampled_from(("private", "public", "share-link")), pages(size)
    )


def collections(size: Size, depth: int = 0) -> st.SearchStrategy[CollectionShape]:
    inner = st.lists(collections(size, depth + 1), max_size=size.children).map(tuple) if depth < size.depth else st.just(())
    return st.builds(
        CollectionShape, titles, st.sampled_from((None, "About it")), inner, st.lists(spaces(size), max_size=size.children).map(tuple)
    )


@st.composite
def sites(draw: st.DrawFn, space_count: int, size: Size) -> SiteShape:
    groups = tuple(draw(st.lists(st.sampled_from(("Product", "Platform")), max_size=2)))
    space_lists = st.lists(st.integers(0, space_count - 1), unique=True, max_size=size.children).map(tuple) if space_count else st.just(())
    group = (st.none() | st.integers(0, len(groups) - 1)) if groups else st.none()
    sections = tuple(draw(st.lists(st.builds(SectionShape, titles, group, space_lists), max_size=size.children)))
    root = () if sections else draw(space_lists)
    return SiteShape(draw(titles), groups, sections, root)


@st.composite
def organizations(draw: st.DrawFn, size: Size | None = None) -> OrgShape:
    """An organization: nested collections and spaces with page trees, then sites whose
    sections and site-spaces name the drawn spaces."""
    size = size or current_size()
    tree_collections = tuple(draw(st.lists(collections(size), max_size=size.children)))
    root_spaces = tuple(draw(st.lists(spaces(size), max_size=size.children)))
    shape = OrgShape(tree_collections, root_spaces, ())
    count = len(shape.all_spaces())
    return OrgShape(tree_collections, root_spaces, tuple(draw(st.lists(sites(count, size), max_size=size.sites))))


# ----- snapshots -------------------------------------------------------------------------------


def slug(title: str, index: int) -> str:
    return f"{title.lower()}-{index}"


def snapshot(shape: OrgShape, *, tenant: str = "src", org: str = "SORG", prefix: str = "S") -> Snapshot:
    """The organization as the crawler records it; ids are `prefix` (one letter) + the
    shape's numbering, so two layouts of one shape differ only by that letter."""
    assert len(prefix) == 1, prefix
    nodes: list[Node] = [Node("organization", org, None, None, {"object": "organization", "id": org, "title": f"Org {prefix}"})]
    counters: dict[str, int] = {}
    space_ids: list[str] = []

    def new_id(letter: str) -> str:
        counters[letter] = counters.get(letter, 0) + 1
        return f"{prefix}{letter}{counters[letter] - 1}"

    def add_pages(space: str, parent: tuple[str, str], items: tuple[PageShape, ...]) -> None:
        for position, page in enumerate(items):
            page_id = new_id("p")
            row_id = f"{space}/{page_id}"
            data = {"object": "page", "id": page_id, "title": page.title, "slug": slug(page.title, position), "type": "document", "markdown": page.markdown}
            nodes.append(Node("page", row_id, parent, position, data))
            add_pages(space, ("page", row_id), page.children)

    def add_tree(parent: str | None, items: tuple[CollectionShape, ...], spaces_here: tuple[SpaceShape, ...]) -> None:
        container = ("collection", parent) if parent else ("organization", org)
        for position, collection in enumerate(items):
            collection_id = new_id("c")
            data = {"object": "collection", "id": collection_id, "title": collection.title, "description": collection.description,
                    "organization": org, "parent": parent, "defaultLevel": "edit"}  # fmt: skip
            nodes.append(Node("collection", collection_id, container, position, data))
            add_tree(collection_id, collection.collections, collection.spaces)
        for position, space in enumerate(spaces_here, start=len(items)):
            space_id = new_id("s")
            space_ids.append(space_id)
            data = {"object": "space", "id": space_id, "title": space.title, "emoji": space.emoji, "visibility": space.visibility,
                    "editMode": "live", "parent": parent, "organization": org,
                    "urls": {"app": f"https://app.example.com/{prefix}/{space_id}/"}}  # fmt: skip
            nodes.append(Node("space", space_id, container, position, data))
            add_pages(space_id, ("space", space_id), space.pages)

    add_tree(None, shape.collections, shape.spaces)
    for site_index, site in enumerate(shape.sites):
        site_id = new_id("w")
        nodes.append(Node("site", site_id, ("organization", org), None, {
            "object": "site", "id": site_id, "type": "basic", "title": site.title, "visibility": "public", "basename": slug(site.title, site_index),
            "adaptiveContent": {"enabled": False},
        }))  # fmt: skip
        under = ("site", site_id)
        group_ids = []
        for position, title in enumerate(site.groups):
            group_ids.append(new_id("g"))
            nodes.append(Node("site-section-group", group_ids[-1], under, position, {"object": "site-section-group", "id": group_ids[-1], "title": title, "icon": None}))
        site_spaces = 0

        def add_site_spaces(section: str | None, indexes: tuple[int, ...]) -> None:
            nonlocal site_spaces
            for position, index in enumerate(indexes):
                item = new_id("x")
                data = {"object": "site-space", "id": item, "path": slug("space", index), "section": section, "default": position == 0,
                        "condition": None, "space": {"object": "space", "id": space_ids[index]}}  # fmt: skip
                nodes.append(Node("site-space", item, under, site_spaces, data))
                site_spaces += 1

        add_site_spaces(None, site.root_spaces)
        for position, section in enumerate(site.sections):
            section_id = new_id("y")
            group = group_ids[section.group] if section.group is not None else None
            data = {"object": "site-section", "id": section_id, "title": section.title, "path": slug(section.title, position),
                    "default": position == 0, "sectionGroup": group, "icon": None, "description": None, "condition": None}  # fmt: skip
            nodes.append(Node("site-section", section_id, under, position, data))
            add_site_spaces(section_id, section.spaces)
    return Snapshot(tenant, org, nodes)


def copied(view: Snapshot) -> set[tuple[str, str]]:
    """(kind, id) of every object of the kinds a copy makes."""
    return {key for key in view.nodes if key[0] in COPIED}


def twin(node_id: str, prefix: str) -> str:
    """The id of the same object laid out behind another (one-letter) prefix."""
    return prefix + node_id[1:]


def mapping(source: Snapshot, target: Snapshot, prefix: str) -> IdMap:
    """The id map a copy from `source` into `target` (the same shape laid out behind `prefix`)
    leaves: each source object that has its twin on the target, as created by syncd."""
    idmap = IdMap()
    for kind, source_id in sorted(copied(source)):
        if target.get(kind, twin(source_id, prefix)) is not None:
            idmap.put(kind, source_id, twin(source_id, prefix), "created")
    return idmap


def inside(view: Snapshot, kind: str, node_id: str) -> set[tuple[str, str]]:
    """What goes with an object when the service deletes it: a collection's collections and
    spaces, a space's pages and the site-spaces that show it, a site's children, a section's
    site-spaces, all the way down."""
    found: set[tuple[str, str]] = set()
    todo = [(kind, node_id)]
    while todo:
        here = todo.pop()
        for node in view.nodes.values():
            key = (node.kind, node.id)
            if key in found or key == here:
                continue
            data: dict[str, Any] = dict(node.data)
            held = node.parent == here or (
                node.kind == "site-space" and ((here[0] == "space" and (data.get("space") or {}).get("id") == here[1]) or (here[0] == "site-section" and data.get("section") == here[1]))
            )
            if held:
                found.add(key)
                todo.append(key)
    return found


def remove(view: Snapshot, keys: Iterable[tuple[str, str]]) -> tuple[Snapshot, set[tuple[str, str]]]:
    """`view` without `keys` and what goes with them (a removed group only leaves its sections
    ungrouped); returns the snapshot and every (kind, id) removed."""
    gone: set[tuple[str, str]] = set()
    for kind, node_id in keys:
        gone |= {(kind, node_id), *inside(view, kind, node_id)}
    groups = {node_id for kind, node_id in gone if kind == "site-section-group"}
    kept = []
    for key, node in view.nodes.items():
        if key in gone:
            continue
        if node.kind == "site-section" and node.data.get("sectionGroup") in groups:
            node = Node(node.kind, node.id, node.parent, node.position, {**node.data, "sectionGroup": None})
        kept.append(node)
    return Snapshot(view.tenant, view.org, kept), gone


__all__ = [
    "COPIED",
    "CollectionShape",
    "OrgShape",
    "PageShape",
    "SectionShape",
    "DEFAULT_SIZE",
    "LARGE_SIZE",
    "SiteShape",
    "Size",
    "SpaceShape",
    "copied",
    "current_size",
    "inside",
    "mapping",
    "organizations",
    "remove",
    "snapshot",
    "twin",
]
