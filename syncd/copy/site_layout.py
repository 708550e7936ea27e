"""A docs site's layout, pure: what a settle step changes to make the target site's
navigation, groups, site-spaces, paths and defaults the source's (`syncd.copy.sites`).

The same functions preview the changes at plan time from what was read (`layout_changes`:
`mirror plan` shows them, and a copy already right plans none) and compute them in the settle
step from the target site listed anew. `lane` says which changes may go side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from syncd.copy.model import Snapshot
from syncd.copy.ops import Ref
from syncd.copy.rules import container_site_spaces, group_sections, ref_id, site_top_order, text
from syncd.ordering import Anchor, apply_move, mixed_moves, moves_to_order, other_anchor, path_changes

__all__ = [
    "SITE_CHILDREN", "Change", "Layout", "lane", "layout_changes", "membership_changes", "order_changes", "path_and_default_changes",
    "resolve_layout", "source_layout",
]

SITE_CHILDREN = ("site-section-group", "site-section", "site-space")


@dataclass
class Layout:
    """A site's desired layout in TARGET ids (what is not on the target yet is left out)."""

    top: list[tuple[str, str]] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    containers: list[tuple[str | None, list[str], str | None]] = field(default_factory=list)
    """(section or None for the root, its site-spaces in order, its default site-space)."""
    section_paths: dict[str, str] = field(default_factory=dict)
    site_space_paths: dict[str, str] = field(default_factory=dict)
    default_section: str | None = None


@dataclass(frozen=True)
class Change:
    """One call of a settle step: `what` is move, remove, add, path, default-section or
    default-site-space."""

    what: str
    kind: str
    item: str
    anchor: Anchor | None = None
    value: str | None = None
    container: str | None = None
    fallback: tuple[Anchor | None] | None = None
    """A move's same place named the other way, tried once when the service answers 400
    (the reference is not one it accepts there); None: no other way."""


def membership_changes(layout: Layout, live: Snapshot, site: str) -> list[Change]:
    """Sections to take out of a group (removals first) and to put into one."""
    group_of = {s.id: ref_id(s.data.get("sectionGroup")) for s in live.children("site-section", ("site", site))}
    wanted = {section: group for group, sections in layout.groups.items() for section in sections}
    placed = {section for kind, section in layout.top if kind == "site-section"}
    out: list[Change] = []
    for section, current in group_of.items():
        if current is not None and (section in placed or (section in wanted and wanted[section] != current)):
            out.append(Change("remove", "site-section", section, value=current))
    for section, group in wanted.items():
        if section in group_of and group_of[section] != group:
            out.append(Change("add", "site-section", section, value=group))
    return out


def _moves(desired: list[Any], current: list[Any], narrow: Any = None) -> list[tuple[Any, Anchor | None, tuple[Anchor | None] | None]]:
    """(item, anchor, the same place named the other way) for each move that puts `current`
    in the order `desired`; with `narrow`, an item it picks is placed, and named the other
    way, relative to such items only (`mixed_moves`)."""
    moves = mixed_moves(desired, current, narrow) if narrow is not None else moves_to_order(desired, current)
    order = list(current)
    out = []
    for item, anchor in moves:
        apply_move(order, item, anchor)
        allowed = narrow if narrow is not None and narrow(item) else (lambda other: True)
        out.append((item, anchor, other_anchor(order, item, anchor, allowed)))
    return out


def order_changes(layout: Layout, live: Snapshot, site: str) -> list[Change]:
    """Moves of the navigation (sections and groups), inside groups, and of site-spaces.

    At the top level a section is placed relative to sections only: a section's move that
    names a group is refused by some services (the spec's reference for a section is a
    section), so the sections are ordered among themselves first and the groups are then
    put after their predecessors (a group may name either)."""
    out: list[Change] = []
    present = {(n.kind, n.id) for kind in SITE_CHILDREN for n in live.children(kind, ("site", site))}
    top = [item for item in layout.top if item in present]

    def tid(anchor: Anchor | None) -> Anchor | None:
        return (anchor[0], anchor[1][1]) if anchor else None

    for (kind, item), anchor, other in _moves(top, site_top_order(live, site), lambda entry: entry[0] == "site-section"):
        out.append(Change("move", kind, item, tid(anchor), fallback=(tid(other[0]),) if other else None))
    for group, sections in layout.groups.items():
        current = group_sections(live, site, group)
        for item, anchor, other in _moves([s for s in sections if s in current], current):
            out.append(Change("move", "site-section", item, anchor, fallback=other))
    for section, site_spaces, _ in layout.containers:
        current = [n.id for n in container_site_spaces(live, site, section)]
        for item, anchor, other in _moves([s for s in site_spaces if s in current], current):
            out.append(Change("move", "site-space", item, anchor, container=section, fallback=other))
    return out


def path_and_default_changes(layout: Layout, live: Snapshot, site: str) -> tuple[list[Change], list[str]]:
    """Paths (unique among siblings: a swap goes through a temporary path) and defaults;
    and the items whose path another object holds (not syncd's to change)."""
    out: list[Change] = []
    blocked: list[str] = []
    sections = live.children("site-section", ("site", site))
    current = {n.id: str(n.data.get("path")) for n in sections}
    wanted = {item: path for item, path in layout.section_paths.items() if item in current}
    changes, stuck = path_changes(current, wanted)
    out += [Change("path", "site-section", item, value=path) for item, path in changes]
    blocked += stuck
    for section, _, default in layout.containers:
        nodes = container_site_spaces(live, site, section)
        current = {n.id: str(n.data.get("path")) for n in nodes}
        wanted = {item: path for item, path in layout.site_space_paths.items() if item in current}
        changes, stuck = path_changes(current, wanted)
        out += [Change("path", "site-space", item, value=path, container=section) for item, path in changes]
        blocked += stuck
        live_default = next((n.id for n in nodes if n.data.get("default")), None)
        if default is not None and default in current and live_default != default:
            out.append(Change("default-site-space", "site-space", default, container=section))
    live_section = next((n.id for n in sections if n.data.get("default")), None)
    wanted_section = layout.default_section
    if wanted_section is not None and wanted_section in {n.id for n in sections} and live_section != wanted_section:
        out.append(Change("default-section", "site-section", wanted_section))
    return out, blocked


def lane(change: Change) -> tuple[str, ...]:
    """Which changes of a settle step go one after another: the moves of the navigation
    (top level and groups: a group stands where its first section does), the moves of each
    container's site-spaces, and the patches of one set of objects (the sections' paths with
    every default, which patch sections and the site; each container's site-space paths, kept
    unique one change at a time). Changes of different lanes touch different objects and
    orders, so they may go side by side; no object is patched by two lanes at once."""
    if change.what == "move":
        return ("move", "site-space", change.container or "") if change.kind == "site-space" else ("move", "navigation")
    if change.what == "path" and change.kind == "site-space":
        return ("path", "site-space", change.container or "")
    return ("sections and site",)


def layout_changes(layout: Layout, live: Snapshot, site: str) -> tuple[list[Change], list[str]]:
    """Every change of a settle step as it would be computed from `live` (a preview)."""
    paths, blocked = path_and_default_changes(layout, live, site)
    return membership_changes(layout, live, site) + order_changes(layout, live, site) + paths, blocked


def source_layout(source: Snapshot, site: str) -> dict[str, Any]:
    """The source site's layout as Refs (the settle step's spec)."""
    sections = source.children("site-section", ("site", site))
    containers = []
    for section in [None, *sections]:
        nodes = container_site_spaces(source, site, section.id if section else None)
        default = next((n.id for n in nodes if n.data.get("default")), None)
        containers.append([Ref("site-section", section.id) if section else None, [Ref("site-space", n.id) for n in nodes], Ref("site-space", default) if default else None])
    return {
        "top": [Ref(kind, item) for kind, item in site_top_order(source, site)],
        "groups": [[Ref("site-section-group", g.id), [Ref("site-section", s) for s in group_sections(source, site, g.id)]] for g in source.children("site-section-group", ("site", site))],
        "containers": containers,
        "section_paths": [[Ref("site-section", s.id), s.data["path"]] for s in sections if text(s.data.get("path"))],
        "site_space_paths": [[Ref("site-space", n.id), n.data["path"]] for n in source.children("site-space", ("site", site)) if text(n.data.get("path"))],
        "default_section": next((Ref("site-section", s.id) for s in sections if s.data.get("default")), None),
    }


def resolve_layout(spec: dict[str, Any], target: Any) -> Layout:
    """The layout in target ids; `target(ref)` gives a Ref's target id or None."""

    def many(refs: list[Any]) -> list[str]:
        return [t for ref in refs if (t := target(ref)) is not None]

    layout = Layout(
        top=[(ref.kind, t) for ref in spec["top"] if (t := target(ref)) is not None],
        section_paths={t: path for ref, path in spec["section_paths"] if (t := target(ref)) is not None},
        site_space_paths={t: path for ref, path in spec["site_space_paths"] if (t := target(ref)) is not None},
        default_section=target(spec["default_section"]) if spec.get("default_section") else None,
    )
    for group, sections in spec["groups"]:
        if (t := target(group)) is not None:
            layout.groups[t] = many(sections)
    for section, site_spaces, default in spec["containers"]:
        container = target(section) if section is not None else None
        if section is not None and container is None:
            continue
        layout.containers.append((container, many(site_spaces), target(default) if default is not None else None))
    return layout
