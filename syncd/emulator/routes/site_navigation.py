"""The navigation of a docs site, the routes: its sections, section groups and site-spaces.
Their model and rendering are in `site_model`, the helpers they share with the site routes
in `site_requests`."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.profile import land, profile_of
from syncd.emulator.routes.site_model import (
    CONDITION_MAX,
    GROUP,
    ICON_MAX,
    PATH_MAX,
    SECTION,
    SITE_SPACE,
    add_site_space,
    delete_group,
    delete_section,
    delete_site_space,
    group_key,
    is_default_site_space,
    new_group,
    new_section,
    put_in_group,
    refresh_defaults,
    render_group,
    render_section,
    render_site_space,
    section_key,
    section_paths,
    site_groups,
    site_sections,
    site_site_spaces,
    site_space_paths,
    site_spaces_key,
    space_of,
    take_out_of_group,
    top_key,
)
from syncd.emulator.routes.site_requests import SITE_ROUTE, created, new_root_space, org_space, site_in_path
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()


# ----- request helpers --------------------------------------------------------------------


def _child(store: Store, kind: str, site: Record, child_id: str, label: str) -> Record:
    record = store.get(kind, child_id)
    if record is None or record["site"] != site["id"]:
        raise not_found(f"{label} {child_id!r} not found in site {site['id']!r}")
    return record


def _visible_site_space(store: Store, site: Record, site_space_id: str) -> Record:
    record = _child(store, SITE_SPACE, site, site_space_id, "site-space")
    if space_of(store, record) is None:
        raise not_found(f"site-space {site_space_id!r} not found (its space is deleted)")
    return record


def _space_for_site(request: web.Request, store: Store, site: Record, body: dict[str, Any], title: str | None) -> Record:
    """`spaceId` of a body: an existing space of the org, or null to create a new one."""
    if "spaceId" not in body:
        raise bad_request("spaceId: is required")
    if body["spaceId"] is None:
        return new_root_space(request, store, site["org"], (title or site["title"])[:50])
    return org_space(store, site["org"], body["spaceId"], "spaceId")


def _nullable_field(record: Record, body: dict[str, Any], name: str, **limits: Any) -> None:
    """Set an optional string field from the body; null removes it, absence keeps it."""
    if name in body:
        value = h.text(body, name, nullable=True, **limits)
        if value is None:
            record.pop(name, None)
        else:
            record[name] = value


def _check_nullable(body: dict[str, Any], name: str, **limits: Any) -> None:
    if name in body:
        h.text(body, name, nullable=True, **limits)


def _unique_or_400(path: str, taken: set[str], name: str = "path") -> str:
    if path in taken:
        raise bad_request(f"{name}: {path!r} is already used by a sibling")
    return path


# ----- sections ---------------------------------------------------------------------------


@routes.get(f"{SITE_ROUTE}/sections")
async def list_sections(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    base = h.base_url(request)
    return h.list_answer(request, site_sections(store, site["id"]), lambda r: render_section(store, r, base))


@routes.post(f"{SITE_ROUTE}/sections")
async def create_section(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    body = await h.json_body(request)
    title = h.text(body, "title", min_len=2, max_len=64, nullable=True)
    space = _space_for_site(request, store, site, body, title)
    if title is None:
        title = space["title"] if len(space["title"]) >= 2 else "Untitled section"
    profile = profile_of(request)
    record = new_section(store, site, space, title, profile=profile)
    land(store, profile, top_key(site["id"]), record["id"])
    base = h.base_url(request)
    location = f"{base}/v1/orgs/{site['org']}/sites/{site['id']}/sections/{record['id']}"
    return created(render_section(store, record, base), location)


@routes.delete(f"{SITE_ROUTE}/sections/{{siteSectionId}}")
async def remove_section(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    section = _child(store, SECTION, site, request.match_info["siteSectionId"], "section")
    delete_section(store, section)
    refresh_defaults(store, site)
    return h.no_content()


@routes.patch(f"{SITE_ROUTE}/sections/{{siteSectionId}}")
async def patch_section(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    section = _child(store, SECTION, site, request.match_info["siteSectionId"], "section")
    body = await h.json_body(request)
    changes: dict[str, Any] = {}
    if "title" in body:
        changes["title"] = h.text(body, "title", min_len=2, max_len=128)
    if "path" in body:
        path = h.text(body, "path", min_len=1, max_len=PATH_MAX)
        changes["path"] = _unique_or_400(path, section_paths(store, site["id"], skip=section["id"]))
    if "defaultSiteSpace" in body:
        site_space_id = h.text(body, "defaultSiteSpace", required=True)
        site_space = store.get(SITE_SPACE, site_space_id)
        if site_space is None or site_space.get("section") != section["id"] or space_of(store, site_space) is None:
            raise bad_request(f"defaultSiteSpace: site-space {site_space_id!r} not found in this section")
        changes["defaultSiteSpace"] = site_space_id
    _check_nullable(body, "condition", min_len=1, max_len=CONDITION_MAX)
    _check_nullable(body, "icon", max_len=ICON_MAX)
    _check_nullable(body, "description", max_len=256)
    section.update(changes)
    _nullable_field(section, body, "condition", min_len=1, max_len=CONDITION_MAX)
    _nullable_field(section, body, "icon", max_len=ICON_MAX)
    _nullable_field(section, body, "description", max_len=256)
    return h.json_answer(render_section(store, section, h.base_url(request)))


@routes.post(f"{SITE_ROUTE}/sections/{{siteSectionId}}/move")
async def move_section(request: web.Request) -> web.Response:
    """Reorder a section among its siblings: the site's top-level items (sections and
    groups), or the sections of its group. Whether a top-level section may be placed
    relative to a group is the profile's (`strict_section_refs`: only a section is named)."""
    store, site = h.store_of(request), site_in_path(request)
    section = _child(store, SECTION, site, request.match_info["siteSectionId"], "section")
    body = await h.json_body(request, required=False)
    before, after = h.position(body, "site-section", "siteSection")
    if profile_of(request).strict_section_refs:
        for side, sibling in (("before", before), ("after", after)):
            named = store.get(GROUP, sibling) if sibling is not None else None
            if named is not None and named.get("site") == site["id"]:
                raise bad_request(f"'position.{side}' does not reference a sibling in the site")
    store.place(section_key(section), section["id"], before=before, after=after)
    return h.json_answer(render_section(store, section, h.base_url(request)))


# ----- section groups ---------------------------------------------------------------------


def _site_sections_from(store: Store, site: Record, ids: list[str], name: str) -> list[Record]:
    out = []
    for section_id in ids:
        section = store.get(SECTION, section_id)
        if section is None or section["site"] != site["id"]:
            raise bad_request(f"{name}: section {section_id!r} not found in this site")
        out.append(section)
    return out


@routes.get(f"{SITE_ROUTE}/section-groups")
async def list_groups(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    base = h.base_url(request)
    return h.list_answer(request, site_groups(store, site["id"]), lambda r: render_group(store, r, base))


@routes.post(f"{SITE_ROUTE}/section-groups")
async def create_group(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    body = await h.json_body(request)
    title = h.text(body, "title", required=True, min_len=1, max_len=100)
    icon = h.text(body, "icon", max_len=ICON_MAX, nullable=True)
    sections = _site_sections_from(store, site, h.string_list(body, "sections") or [], "sections")
    record = new_group(store, site, title, sections, **({"icon": icon} if icon else {}))
    land(store, profile_of(request), top_key(site["id"]), record["id"])
    base = h.base_url(request)
    location = f"{base}/v1/orgs/{site['org']}/sites/{site['id']}/section-groups/{record['id']}"
    return created(render_group(store, record, base), location)


def _group(request: web.Request, site: Record) -> Record:
    return _child(h.store_of(request), GROUP, site, request.match_info["siteSectionGroupId"], "section group")


@routes.delete(f"{SITE_ROUTE}/section-groups/{{siteSectionGroupId}}")
async def remove_group(request: web.Request) -> web.Response:
    site = site_in_path(request)
    delete_group(h.store_of(request), _group(request, site))
    return h.no_content()


@routes.patch(f"{SITE_ROUTE}/section-groups/{{siteSectionGroupId}}")
async def patch_group(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    group = _group(request, site)
    body = await h.json_body(request)
    title = h.text(body, "title", min_len=1, max_len=100) if "title" in body else None
    _check_nullable(body, "icon", max_len=ICON_MAX)
    if title is not None:
        group["title"] = title
    _nullable_field(group, body, "icon", max_len=ICON_MAX)
    return h.json_answer(render_group(store, group, h.base_url(request)))


@routes.post(f"{SITE_ROUTE}/section-groups/{{siteSectionGroupId}}/sections")
async def add_section_to_group(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    group = _group(request, site)
    body = await h.json_body(request)
    section_id = h.text(body, "sectionId", required=True)
    (section,) = _site_sections_from(store, site, [section_id], "sectionId")
    if section.get("group") != group["id"]:
        put_in_group(store, section, group)
        land(store, profile_of(request), group_key(group["id"]), section["id"])
    return h.json_answer(render_group(store, group, h.base_url(request)))


@routes.delete(f"{SITE_ROUTE}/section-groups/{{siteSectionGroupId}}/sections/{{siteSectionId}}")
async def remove_section_from_group(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    group = _group(request, site)
    section = _child(store, SECTION, site, request.match_info["siteSectionId"], "section")
    if section.get("group") != group["id"]:
        raise not_found(f"section {section['id']!r} is not in section group {group['id']!r}")
    take_out_of_group(store, section)
    return h.no_content()


@routes.post(f"{SITE_ROUTE}/section-groups/{{siteSectionGroupId}}/move")
async def move_group(request: web.Request) -> web.Response:
    """Reorder a group among the site's top-level items (sections and groups)."""
    store, site = h.store_of(request), site_in_path(request)
    group = _group(request, site)
    body = await h.json_body(request, required=False)
    # The spec names groups `site-section` with key `id`; the OpenAPI document `site-section-group`.
    before, after = h.position(body, ("site-section", "site-section-group"), "id")
    store.place(top_key(site["id"]), group["id"], before=before, after=after)
    return h.json_answer(render_group(store, group, h.base_url(request)))


# ----- site spaces ------------------------------------------------------------------------


@routes.get(f"{SITE_ROUTE}/site-spaces")
async def list_site_spaces(request: web.Request) -> web.Response:
    """`default=true` keeps the default site-space of each container (one per section, or
    the root one), `default=false` the others."""
    store, site = h.store_of(request), site_in_path(request)
    only_default = h.query_bool(request, "default")
    records = site_site_spaces(store, site["id"])
    if only_default is not None:
        records = [r for r in records if is_default_site_space(store, r) == only_default]
    base = h.base_url(request)
    return h.list_answer(request, records, lambda r: render_site_space(store, r, base))


@routes.post(f"{SITE_ROUTE}/site-spaces")
async def create_site_space(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    body = await h.json_body(request)
    section: Record | None = None
    if "sectionId" in body:
        section_id = h.text(body, "sectionId", required=True)
        section = store.get(SECTION, section_id)
        if section is None or section["site"] != site["id"]:
            raise bad_request(f"sectionId: section {section_id!r} not found in this site")
    elif site.get("defaultSection"):
        section = store.tables[SECTION][site["defaultSection"]]
    title = h.text(body, "title", min_len=2, max_len=128, nullable=True)
    space = _space_for_site(request, store, site, body, title)
    profile = profile_of(request)
    record = add_site_space(store, site, space, section, profile=profile)
    land(store, profile, site_spaces_key(site["id"], record.get("section")), record["id"])
    base = h.base_url(request)
    location = f"{base}/v1/orgs/{site['org']}/sites/{site['id']}/site-spaces/{record['id']}"
    return created(render_site_space(store, record, base), location)


@routes.delete(f"{SITE_ROUTE}/site-spaces/{{siteSpaceId}}")
async def remove_site_space(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    record = _visible_site_space(store, site, request.match_info["siteSpaceId"])
    delete_site_space(store, record)
    refresh_defaults(store, site)
    return h.no_content()


@routes.patch(f"{SITE_ROUTE}/site-spaces/{{siteSpaceId}}")
async def patch_site_space(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    record = _visible_site_space(store, site, request.match_info["siteSpaceId"])
    body = await h.json_body(request)
    path = None
    if "path" in body:
        path = h.text(body, "path", min_len=1, max_len=PATH_MAX)
        _unique_or_400(path, site_space_paths(store, site["id"], record.get("section"), skip=record["id"]))
    _check_nullable(body, "condition", min_len=1, max_len=CONDITION_MAX)
    if path is not None:
        record["path"] = path
    _nullable_field(record, body, "condition", min_len=1, max_len=CONDITION_MAX)
    return h.json_answer(render_site_space(store, record, h.base_url(request)))


@routes.post(f"{SITE_ROUTE}/site-spaces/{{siteSpaceId}}/move")
async def move_site_space(request: web.Request) -> web.Response:
    """Reorder a site-space within its section (or the site root)."""
    store, site = h.store_of(request), site_in_path(request)
    record = _visible_site_space(store, site, request.match_info["siteSpaceId"])
    body = await h.json_body(request, required=False)
    before, after = h.position(body, "site-space", "siteSpace")
    store.place(site_spaces_key(site["id"], record.get("section")), record["id"], before=before, after=after)
    return h.json_answer(render_site_space(store, record, h.base_url(request)))
