"""Docs sites, the routes: sites, sections, section groups, site-spaces and adaptive
schemas, plus the generator's sites and their canonical dump. The model (navigation orders,
defaults, paths) and the rendering are in `site_model`.

Where the spec leaves a choice open, handlers follow the app's profile: where a created
section, group or site-space lands, how paths are derived, whether a site's first section
takes over its root site-spaces, and the order of the site list. The generator keeps the
default behaviour, so a seed gives the same sites in every profile.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.profile import land, profile_of
from syncd.emulator.routes.site_model import (
    ADAPTIVE_SCHEMA,
    CLAIM_TYPES,
    CONDITION_MAX,
    DRAFT_07,
    GROUP,
    ICON_MAX,
    PATH_MAX,
    PROXY_PATTERN,
    SECTION,
    SITE,
    SITE_SPACE,
    SITE_TYPES,
    SITE_VISIBILITIES,
    add_site_space,
    container_owner,
    default_adaptive_schema,
    delete_group,
    delete_section,
    delete_site,
    delete_site_space,
    group_key,
    is_default_site_space,
    new_group,
    new_section,
    new_site,
    org_sites,
    put_in_group,
    refresh_defaults,
    render_adaptive_schema,
    render_group,
    render_published,
    render_section,
    render_site,
    render_site_space,
    section_key,
    section_paths,
    set_adaptive_schema,
    site_groups,
    site_sections,
    site_site_spaces,
    site_space_paths,
    site_spaces_key,
    slugify,
    space_of,
    take_out_of_group,
    top_key,
)
from syncd.emulator.routes.space_model import SPACE, new_space, org_spaces, tree_key
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()

_SITE_ROUTE = "/v1/orgs/{organizationId}/sites/{siteId}"


# ----- request helpers --------------------------------------------------------------------


def _site(request: web.Request) -> Record:
    """The site of the path, 404 unless it belongs to the path's (visible) organization."""
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    site_id = request.match_info["siteId"]
    site = store.get(SITE, site_id)
    if site is None or site["org"] != org["id"]:
        raise not_found(f"site {site_id!r} not found")
    return site


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


def _created(data: dict[str, Any], location: str) -> web.Response:
    response = h.json_answer(data, status=201)
    response.headers["Location"] = location
    return response


def _org_space(store: Store, org_id: str, space_id: Any, name: str) -> Record:
    """A live space of the organization named by body field `name` (400 when it is not one)."""
    if not isinstance(space_id, str):
        raise bad_request(f"{name}: must be a space id")
    space = store.get(SPACE, space_id)
    if space is None or space["org"] != org_id or space.get("deletedAt"):
        raise bad_request(f"{name}: space {space_id!r} not found in this organization")
    return space


def _new_space(request: web.Request, store: Store, org_id: str, title: str) -> Record:
    """A space created for a site at the organization's root, landing where the profile says."""
    space = new_space(store, org_id, title)
    land(store, profile_of(request), tree_key(org_id, None), space["id"])
    return space


def _space_for_site(request: web.Request, store: Store, site: Record, body: dict[str, Any], title: str | None) -> Record:
    """`spaceId` of a body: an existing space of the org, or null to create a new one."""
    if "spaceId" not in body:
        raise bad_request("spaceId: is required")
    if body["spaceId"] is None:
        return _new_space(request, store, site["org"], (title or site["title"])[:50])
    return _org_space(store, site["org"], body["spaceId"], "spaceId")


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


def _validate_adaptive_schema(value: Any) -> dict[str, Any]:
    """A draft-07 object schema whose properties are visitor claims (400 otherwise)."""
    if not isinstance(value, dict):
        raise bad_request("jsonSchema: must be an object")
    if "$schema" in value and value["$schema"] != DRAFT_07:
        raise bad_request(f"jsonSchema.$schema: must be {DRAFT_07}")
    if value.get("type") != "object":
        raise bad_request("jsonSchema.type: must be 'object'")
    properties = value.get("properties")
    if not isinstance(properties, dict):
        raise bad_request("jsonSchema.properties: must be an object")
    if value.get("additionalProperties") is not False:
        raise bad_request("jsonSchema.additionalProperties: must be false")
    for name, claim in properties.items():
        if not isinstance(claim, dict) or claim.get("type") not in CLAIM_TYPES:
            raise bad_request(f"jsonSchema.properties.{name}: must be a claim schema with a type among {', '.join(CLAIM_TYPES)}")
    return value


# ----- sites ------------------------------------------------------------------------------


def _type_filter(request: web.Request) -> set[str] | None:
    raw = [part for value in request.query.getall("type", []) for part in value.split(",") if part]
    for value in raw:
        if value not in SITE_TYPES:
            raise bad_request(f"type: must be among {', '.join(SITE_TYPES)}")
    return set(raw) or None


@routes.get("/v1/orgs/{organizationId}/sites")
async def list_sites(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    space_id = h.query_text(request, "space")
    title = h.query_text(request, "title")
    published = h.query_bool(request, "published")
    types = _type_filter(request)
    sites = org_sites(store, org["id"])
    if space_id is not None:
        sites = [s for s in sites if any(r["spaceId"] == space_id for r in site_site_spaces(store, s["id"]))]
    if title is not None:
        sites = [s for s in sites if title.lower() in s["title"].lower()]
    if published is not None:
        sites = [s for s in sites if s["published"] == published]
    if types is not None:
        sites = [s for s in sites if s["type"] in types]
    base = h.base_url(request)
    return h.list_answer(request, sites, lambda r: render_site(store, r, base), label=lambda r: r["title"])


@routes.post("/v1/orgs/{organizationId}/sites")
async def create_site(request: web.Request) -> web.Response:
    """`spaces` is a list of space ids (root site-spaces, in that order), or an object
    asking for a new space for the site (`{title?}`, the title defaulting to the site's)."""
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    body = await h.json_body(request, required=False)
    site_type = h.choice(body, "type", SITE_TYPES, default="basic")
    title = h.text(body, "title", min_len=2, max_len=128, default="Untitled site")
    visibility = h.choice(body, "visibility", SITE_VISIBILITIES, default="public")
    spaces: list[Record] = []
    new_space_title: str | None = None
    wanted = body.get("spaces")
    if isinstance(wanted, list):
        for index, space_id in enumerate(wanted):
            spaces.append(_org_space(store, org["id"], space_id, f"spaces[{index}]"))
    elif isinstance(wanted, dict):
        new_space_title = h.text(wanted, "title", min_len=1, max_len=50, default=title[:50])
    elif wanted is not None:
        raise bad_request("spaces: must be an array of space ids or an object to create a new space")
    site = new_site(store, org["id"], title, type=site_type, visibility=visibility)
    if new_space_title is not None:
        spaces.append(_new_space(request, store, org["id"], new_space_title))
    for space in spaces:  # root site-spaces in the order asked, whatever the profile
        add_site_space(store, site, space, profile=profile_of(request))
    base = h.base_url(request)
    return _created(render_site(store, site, base), f"{base}/v1/orgs/{org['id']}/sites/{site['id']}")


@routes.get(_SITE_ROUTE)
async def get_site(request: web.Request) -> web.Response:
    return h.json_answer(render_site(h.store_of(request), _site(request), h.base_url(request)))


@routes.delete(_SITE_ROUTE)
async def remove_site(request: web.Request) -> web.Response:
    delete_site(h.store_of(request), _site(request))
    return h.no_content()


@routes.patch(_SITE_ROUTE)
async def patch_site(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    body = await h.json_body(request)
    changes: dict[str, Any] = {}
    if "title" in body:
        changes["title"] = h.text(body, "title", min_len=2, max_len=128)
    if "visibility" in body:
        changes["visibility"] = h.choice(body, "visibility", SITE_VISIBILITIES)
    if "basename" in body:
        changes["basename"] = h.text(body, "basename", min_len=1, max_len=PATH_MAX)
    if "adaptiveContent" in body:
        adaptive = h.obj(body, "adaptiveContent")
        if not isinstance(adaptive.get("enabled"), bool):
            raise bad_request("adaptiveContent.enabled: is required and must be a boolean")
        changes["adaptiveContent"] = {"enabled": adaptive["enabled"]}
    if "proxy" in body:
        changes["proxy"] = h.text(body, "proxy", max_len=512, pattern=PROXY_PATTERN, nullable=True)
    section: Record | None = None
    if "defaultSiteSection" in body:
        section_id = h.text(body, "defaultSiteSection", required=True)
        section = store.get(SECTION, section_id)
        if section is None or section["site"] != site["id"]:
            raise bad_request(f"defaultSiteSection: section {section_id!r} not found in this site")
    site_space: Record | None = None
    if "defaultSiteSpace" in body:
        site_space_id = h.text(body, "defaultSiteSpace", required=True)
        site_space = store.get(SITE_SPACE, site_space_id)
        if site_space is None or site_space["site"] != site["id"] or space_of(store, site_space) is None:
            raise bad_request(f"defaultSiteSpace: site-space {site_space_id!r} not found in this site")
        default_section = section["id"] if section else site.get("defaultSection")
        if site_space.get("section") not in (default_section, None):
            raise bad_request("defaultSiteSpace: must be a site-space of the site's default section (or of the root)")
    site.update(changes)
    if section is not None:
        site["defaultSection"] = section["id"]
    if site_space is not None:
        container_owner(store, site_space)["defaultSiteSpace"] = site_space["id"]
    site["updatedAt"] = store.now_iso()
    return h.json_answer(render_site(store, site, h.base_url(request)))


@routes.get(f"{_SITE_ROUTE}/adaptive-schema")
async def get_adaptive_schema(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    record = store.get(ADAPTIVE_SCHEMA, site["id"])
    if record is None:
        record = {"jsonSchema": default_adaptive_schema(), "updatedAt": site["createdAt"]}
    return h.json_answer(render_adaptive_schema(store, record, h.base_url(request)))


@routes.put(f"{_SITE_ROUTE}/adaptive-schema")
async def put_adaptive_schema(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    body = await h.json_body(request)
    json_schema = _validate_adaptive_schema(h.obj(body, "jsonSchema", required=True))
    record = set_adaptive_schema(store, site, json_schema)
    return h.json_answer(render_adaptive_schema(store, record, h.base_url(request)))


@routes.get(f"{_SITE_ROUTE}/published")
async def get_published(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    return h.json_answer(render_published(store, site, h.base_url(request)))


# ----- sections ---------------------------------------------------------------------------


@routes.get(f"{_SITE_ROUTE}/sections")
async def list_sections(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    base = h.base_url(request)
    return h.list_answer(request, site_sections(store, site["id"]), lambda r: render_section(store, r, base))


@routes.post(f"{_SITE_ROUTE}/sections")
async def create_section(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
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
    return _created(render_section(store, record, base), location)


@routes.delete(f"{_SITE_ROUTE}/sections/{{siteSectionId}}")
async def remove_section(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    section = _child(store, SECTION, site, request.match_info["siteSectionId"], "section")
    delete_section(store, section)
    refresh_defaults(store, site)
    return h.no_content()


@routes.patch(f"{_SITE_ROUTE}/sections/{{siteSectionId}}")
async def patch_section(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
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


@routes.post(f"{_SITE_ROUTE}/sections/{{siteSectionId}}/move")
async def move_section(request: web.Request) -> web.Response:
    """Reorder a section among its siblings: the site's top-level items (sections and
    groups), or the sections of its group. Whether a top-level section may be placed
    relative to a group is the profile's (`strict_section_refs`: only a section is named)."""
    store, site = h.store_of(request), _site(request)
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


@routes.get(f"{_SITE_ROUTE}/section-groups")
async def list_groups(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    base = h.base_url(request)
    return h.list_answer(request, site_groups(store, site["id"]), lambda r: render_group(store, r, base))


@routes.post(f"{_SITE_ROUTE}/section-groups")
async def create_group(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    body = await h.json_body(request)
    title = h.text(body, "title", required=True, min_len=1, max_len=100)
    icon = h.text(body, "icon", max_len=ICON_MAX, nullable=True)
    sections = _site_sections_from(store, site, h.string_list(body, "sections") or [], "sections")
    record = new_group(store, site, title, sections, **({"icon": icon} if icon else {}))
    land(store, profile_of(request), top_key(site["id"]), record["id"])
    base = h.base_url(request)
    location = f"{base}/v1/orgs/{site['org']}/sites/{site['id']}/section-groups/{record['id']}"
    return _created(render_group(store, record, base), location)


def _group(request: web.Request, site: Record) -> Record:
    return _child(h.store_of(request), GROUP, site, request.match_info["siteSectionGroupId"], "section group")


@routes.delete(f"{_SITE_ROUTE}/section-groups/{{siteSectionGroupId}}")
async def remove_group(request: web.Request) -> web.Response:
    site = _site(request)
    delete_group(h.store_of(request), _group(request, site))
    return h.no_content()


@routes.patch(f"{_SITE_ROUTE}/section-groups/{{siteSectionGroupId}}")
async def patch_group(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    group = _group(request, site)
    body = await h.json_body(request)
    title = h.text(body, "title", min_len=1, max_len=100) if "title" in body else None
    _check_nullable(body, "icon", max_len=ICON_MAX)
    if title is not None:
        group["title"] = title
    _nullable_field(group, body, "icon", max_len=ICON_MAX)
    return h.json_answer(render_group(store, group, h.base_url(request)))


@routes.post(f"{_SITE_ROUTE}/section-groups/{{siteSectionGroupId}}/sections")
async def add_section_to_group(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    group = _group(request, site)
    body = await h.json_body(request)
    section_id = h.text(body, "sectionId", required=True)
    (section,) = _site_sections_from(store, site, [section_id], "sectionId")
    if section.get("group") != group["id"]:
        put_in_group(store, section, group)
        land(store, profile_of(request), group_key(group["id"]), section["id"])
    return h.json_answer(render_group(store, group, h.base_url(request)))


@routes.delete(f"{_SITE_ROUTE}/section-groups/{{siteSectionGroupId}}/sections/{{siteSectionId}}")
async def remove_section_from_group(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    group = _group(request, site)
    section = _child(store, SECTION, site, request.match_info["siteSectionId"], "section")
    if section.get("group") != group["id"]:
        raise not_found(f"section {section['id']!r} is not in section group {group['id']!r}")
    take_out_of_group(store, section)
    return h.no_content()


@routes.post(f"{_SITE_ROUTE}/section-groups/{{siteSectionGroupId}}/move")
async def move_group(request: web.Request) -> web.Response:
    """Reorder a group among the site's top-level items (sections and groups)."""
    store, site = h.store_of(request), _site(request)
    group = _group(request, site)
    body = await h.json_body(request, required=False)
    # The spec names groups `site-section` with key `id`; the OpenAPI document `site-section-group`.
    before, after = h.position(body, ("site-section", "site-section-group"), "id")
    store.place(top_key(site["id"]), group["id"], before=before, after=after)
    return h.json_answer(render_group(store, group, h.base_url(request)))


# ----- site spaces ------------------------------------------------------------------------


@routes.get(f"{_SITE_ROUTE}/site-spaces")
async def list_site_spaces(request: web.Request) -> web.Response:
    """`default=true` keeps the default site-space of each container (one per section, or
    the root one), `default=false` the others."""
    store, site = h.store_of(request), _site(request)
    only_default = h.query_bool(request, "default")
    records = site_site_spaces(store, site["id"])
    if only_default is not None:
        records = [r for r in records if is_default_site_space(store, r) == only_default]
    base = h.base_url(request)
    return h.list_answer(request, records, lambda r: render_site_space(store, r, base))


@routes.post(f"{_SITE_ROUTE}/site-spaces")
async def create_site_space(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
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
    return _created(render_site_space(store, record, base), location)


@routes.delete(f"{_SITE_ROUTE}/site-spaces/{{siteSpaceId}}")
async def remove_site_space(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    record = _visible_site_space(store, site, request.match_info["siteSpaceId"])
    delete_site_space(store, record)
    refresh_defaults(store, site)
    return h.no_content()


@routes.patch(f"{_SITE_ROUTE}/site-spaces/{{siteSpaceId}}")
async def patch_site_space(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
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


@routes.post(f"{_SITE_ROUTE}/site-spaces/{{siteSpaceId}}/move")
async def move_site_space(request: web.Request) -> web.Response:
    """Reorder a site-space within its section (or the site root)."""
    store, site = h.store_of(request), _site(request)
    record = _visible_site_space(store, site, request.match_info["siteSpaceId"])
    body = await h.json_body(request, required=False)
    before, after = h.position(body, "site-space", "siteSpace")
    store.place(site_spaces_key(site["id"], record.get("section")), record["id"], before=before, after=after)
    return h.json_answer(render_site_space(store, record, h.base_url(request)))


# ----- generator --------------------------------------------------------------------------

SITE_WORDS = "Product Developer Help Partner Platform API Internal Customer Community Status".split()
SECTION_TITLES = (
    "Guides", "API reference", "Changelog", "SDKs", "Tutorials", "Integrations",
    "Help center", "Security", "Release notes", "Self-hosting", "Concepts", "FAQ",
)
ICONS = ("book", "code", "rocket", "gear", "shield", "bolt", "life-ring", "puzzle-piece")
CONDITIONS = (
    'visitor.claims.unsigned.beta == true',
    'visitor.claims.plan == "enterprise"',
    'visitor.claims.unsigned.region == "eu"',
)


def _adaptive_example() -> dict[str, Any]:
    schema = default_adaptive_schema()
    schema["properties"]["unsigned"]["properties"] = {
        "beta": {"type": "boolean", "description": "Visitor joined the beta programme"},
        "region": {"type": "string", "description": "Region of the visitor's account"},
    }
    schema["properties"]["plan"] = {"type": "string", "description": "Signed plan of the visitor"}
    return schema


def _seed_sections(store: Store, site: Record, spaces: list[Record], rng: random.Random, count: int) -> None:
    """`count` sections of 1-3 distinct spaces each, some grouped, in a shuffled order."""
    sections: list[Record] = []
    for index in range(count):
        picks = rng.sample(spaces, min(len(spaces), rng.randint(1, 3)))
        title = SECTION_TITLES[index % len(SECTION_TITLES)] + (f" {index // len(SECTION_TITLES) + 1}" if index >= len(SECTION_TITLES) else "")
        extra: dict[str, Any] = {}
        if rng.random() < 0.5:
            extra["icon"] = rng.choice(ICONS)
        if rng.random() < 0.3:
            extra["condition"] = rng.choice(CONDITIONS)
        if rng.random() < 0.5:
            extra["description"] = f"{title} for {site['title']}"
        section = new_section(store, site, picks[0], title, **extra)
        for space in picks[1:]:
            fields = {"condition": rng.choice(CONDITIONS)} if rng.random() < 0.2 else {}
            add_site_space(store, site, space, section, **fields)
        sections.append(section)
    if count >= 3:
        grouped = sections[1:3] if count < 5 else sections[1:4]
        new_group(store, site, f"{rng.choice(SITE_WORDS)} resources", grouped, icon=rng.choice(ICONS))
    top = store.orders[top_key(site["id"])]
    if len(top) >= 2:  # a non-creation order: the last item goes first
        store.place(top_key(site["id"]), top[-1], before=top[0])
    site["defaultSection"] = rng.choice(sections)["id"]
    for section in sections:
        ids = store.ordered(site_spaces_key(site["id"], section["id"]))
        if len(ids) > 1:
            section["defaultSiteSpace"] = ids[-1]
            store.place(site_spaces_key(site["id"], section["id"]), ids[0])
            break


def seed(store: Store, org_id: str, rng: random.Random, params: dict[str, int]) -> None:
    """Sites of two shapes, alternating: sectioned (with a group, conditions, icons, a
    shuffled order, and on the first one an adaptive schema) and flat (root site-spaces)."""
    spaces = [s for s in org_spaces(store, org_id) if not s.get("deletedAt")]
    sections = params.get("sections", 0)
    schema_done = False
    for index in range(params.get("sites", 0)):
        title = f"{rng.choice(SITE_WORDS)} docs {index + 1}"
        site_fields: dict[str, Any] = {
            "visibility": rng.choice(SITE_VISIBILITIES),
            "published": index == 0 or rng.random() < 0.6,
            "type": rng.choice(("basic", "basic", "premium", "ultimate")),
        }
        if rng.random() < 0.5:
            site_fields["basename"] = slugify(title, "docs")
        if index % 3 == 1:
            site_fields["hostname"] = f"docs{index}.org-{org_id[:6].lower()}.example.com"
        if rng.random() < 0.2:
            site_fields["proxy"] = f"example.com/docs{index}"
        site = new_site(store, org_id, title, **site_fields)
        if not spaces:
            continue
        if index % 2 == 0 and sections > 0:
            _seed_sections(store, site, spaces, rng, sections)
            if not schema_done:
                site["adaptiveContent"] = {"enabled": True}
                set_adaptive_schema(store, site, _adaptive_example())
                schema_done = True
        else:
            for space in rng.sample(spaces, min(len(spaces), rng.randint(1, 4))):
                fields = {"condition": rng.choice(CONDITIONS)} if rng.random() < 0.25 else {}
                add_site_space(store, site, space, **fields)
            root = store.ordered(site_spaces_key(site["id"], None))
            site["defaultSiteSpace"] = rng.choice(root)


# ----- canonical dump ---------------------------------------------------------------------


def _per_site(collect: Callable[[Store, str], list[Record]]) -> Callable[[Store, str], list[Record]]:
    """An organization's records of one kind, site after site (sites in list order)."""

    def records(store: Store, org_id: str) -> list[Record]:
        return [r for site in org_sites(store, org_id) for r in collect(store, site["id"])]

    return records


def _dump_section(store: Store, record: Record, base: str) -> dict[str, Any]:
    """A section without its site-spaces: they are dumped as their own kind."""
    data = render_section(store, record, base)
    data.pop("siteSpaces", None)
    return data


def _adaptive_schemas(store: Store, site_id: str) -> list[Record]:
    record = store.get(ADAPTIVE_SCHEMA, site_id)
    return [record] if record else []


def _site_space_parent(store: Store, record: Record) -> tuple[str, str]:
    return (SECTION, record["section"]) if record.get("section") else (SITE, record["site"])


def _in_site(store: Store, record: Record) -> tuple[str, str]:
    return (SITE, record["site"])


DUMP = [
    DumpKind(
        name=SITE,
        records=org_sites,
        render=render_site,
        label=lambda data: data["title"],
        volatile=frozenset({"siteSpaces", "published", "hostname", "appliedType"}),
    ),
    DumpKind(
        name=GROUP,
        records=_per_site(site_groups),
        render=render_group,
        label=lambda data: data["title"],
        parent=_in_site,
        refs={"sections": SECTION, "children": SECTION},
    ),
    DumpKind(
        name=SECTION,
        records=_per_site(site_sections),
        render=_dump_section,
        label=lambda data: data["path"],
        parent=_in_site,
        refs={"sectionGroup": GROUP},
    ),
    DumpKind(
        name=SITE_SPACE,
        records=_per_site(site_site_spaces),
        render=render_site_space,
        label=lambda data: data["path"],
        parent=_site_space_parent,
        refs={"space": SPACE, "section": SECTION},
    ),
    DumpKind(
        name=ADAPTIVE_SCHEMA,
        records=_per_site(_adaptive_schemas),
        render=render_adaptive_schema,
        label=lambda data: "schema",
        parent=_in_site,
    ),
]
