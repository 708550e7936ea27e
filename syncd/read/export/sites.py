"""An organization's sites in an export: `sites/<site>/site.json`, the raw rows of its
section groups, sections, site-spaces, adaptive schema and publication, and `structure.json`,
its tree in order with each site-space naming its space's folder in the export."""

from __future__ import annotations

from typing import Any

from syncd.read.export.layout import _WINDOWS_RESERVED, _assign, _children, _title, _Tree, slugify


def write_sites(tree: _Tree, rows: dict[str, list[dict[str, Any]]], base: tuple[str, ...], space_paths: dict[str, str]) -> None:
    """Each site of the organization under `sites/<slug>/`: its rows as JSON, and
    `structure.json` (`_structure`); `space_paths`: space id -> its folder from the organization's."""
    children = {kind: _children(rows[kind]) for kind in ("site-section-group", "site-section", "site-space", "site-adaptive-schema", "site-published")}
    named = ((r, slugify(_title(r), "site")) for r in rows["site"])
    for site, slug in _assign(named, _WINDOWS_RESERVED):
        path = base + ("sites", slug)
        own = {kind: grouped.get(("site", site["id"]), []) for kind, grouped in children.items()}
        tree.json(path + ("site.json",), site["data"])
        for kind, name in (("site-section-group", "section-groups.json"), ("site-section", "sections.json"), ("site-space", "site-spaces.json")):
            if own[kind]:
                tree.json(path + (name,), [r["data"] for r in own[kind]])
        for kind, name in (("site-adaptive-schema", "adaptive-schema.json"), ("site-published", "published.json")):
            for r in own[kind][:1]:
                tree.json(path + (name,), r["data"])
        tree.json(path + ("structure.json",), _structure(site, own, space_paths))


def _structure(site: dict[str, Any], own: dict[str, list[dict[str, Any]]], space_paths: dict[str, str]) -> dict[str, Any]:
    """The site's tree in order: section groups (their sections' ids), sections (their
    site-spaces) and the site-spaces outside any section; each site-space names its space
    and the space's export path, relative to the organization's directory."""

    def ident(row: dict[str, Any]) -> Any:
        return row["data"].get("id", row["id"])

    def site_space(row: dict[str, Any]) -> dict[str, Any]:
        data = row["data"]
        space = data.get("space") if isinstance(data.get("space"), dict) else {}
        space_id = space.get("id", data.get("spaceId"))
        return {
            "id": ident(row),
            "title": data.get("title"),
            "path": data.get("path"),
            "default": data.get("default"),
            "condition": data.get("condition"),
            "space": space_id,
            "exportPath": space_paths.get(space_id) if isinstance(space_id, str) else None,
        }

    entries = [(row["data"].get("section"), site_space(row)) for row in own["site-space"]]
    sections = [
        {
            "id": ident(row),
            "title": row["data"].get("title"),
            "path": row["data"].get("path"),
            "default": row["data"].get("default"),
            "sectionGroup": row["data"].get("sectionGroup"),
            "siteSpaces": [entry for section, entry in entries if section == ident(row)],
        }
        for row in own["site-section"]
    ]
    groups = [
        {
            "id": ident(row),
            "title": row["data"].get("title"),
            "sections": [s["id"] for s in sections if s["sectionGroup"] == ident(row)],
        }
        for row in own["site-section-group"]
    ]
    section_ids = {s["id"] for s in sections}
    loose = [entry for section, entry in entries if section not in section_ids]
    return {
        "site": {"id": site["id"], "title": site["data"].get("title")},
        "sectionGroups": groups,
        "sections": sections,
        "siteSpaces": loose,
    }
