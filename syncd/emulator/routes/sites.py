"""Docs sites: sites, sections, section groups, site-spaces and adaptive schemas.

A site's navigation is kept in `store.orders`:

- `("site", site_id)`: the top-level items, section ids and section group ids mixed;
- `("group", group_id)`: the sections inside a group;
- `("site-spaces", site_id, section_id or "")`: the site-spaces of a section, or of the site
  root when the site has no sections.

Sections are listed in navigation order (top-level sections, and the sections of a group
where the group stands). Defaults live on the owner: `site["defaultSection"]`, and
`defaultSiteSpace` on the section (or on the site for root site-spaces); an owner whose
default goes away falls back to its first child, so a non-empty container always has one.
When a site gets its first section, its root site-spaces move into it (the service turns a
flat site into a sectioned one that way). A site-space whose space is deleted, or no longer
in the site's organization, is hidden until the space comes back.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator.canonical import DumpKind
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.routes.spaces import SPACE, new_space, org_spaces, render_space
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()

SITE, SECTION, GROUP, SITE_SPACE = "site", "site-section", "site-section-group", "site-space"
ADAPTIVE_SCHEMA = "site-adaptive-schema"
SITE_TYPES = ("basic", "premium", "ultimate", "sponsored", "legacy-basic", "legacy-premium")
SITE_VISIBILITIES = ("public", "unlisted", "share-link", "visitor-auth")
HOSTNAME_PATTERN = r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?[.]){2,}[a-z0-9][a-z0-9-]{0,61}[a-z0-9]$"
PROXY_PATTERN = r"^([\w-]+\.)*[\w-]+\.[a-zA-Z]{2,}(\/[\w-]+)+$"
PATH_MAX = 100
ICON_MAX = 50
CONDITION_MAX = 1024
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
UNSIGNED_DESCRIPTION = "Unsigned claims of the site visitor."
CLAIM_TYPES = ("boolean", "string", "number", "array", "object")

_SITE_ROUTE = "/v1/orgs/{organizationId}/sites/{siteId}"


# ----- keys and lookups -------------------------------------------------------------------


def top_key(site_id: str) -> tuple[str, ...]:
    return ("site", site_id)


def group_key(group_id: str) -> tuple[str, ...]:
    return ("group", group_id)


def site_spaces_key(site_id: str, section_id: str | None) -> tuple[str, ...]:
    return ("site-spaces", site_id, section_id or "")


def org_sites(store: Store, org_id: str) -> list[Record]:
    """Sites of an organization in creation order (the order the list answers in)."""
    return store.where(SITE, org=org_id)


def site_groups(store: Store, site_id: str) -> list[Record]:
    return [store.tables[GROUP][i] for i in store.ordered(top_key(site_id)) if i in store.tables[GROUP]]


def group_sections(store: Store, group_id: str) -> list[Record]:
    return [store.tables[SECTION][i] for i in store.ordered(group_key(group_id))]


def site_sections(store: Store, site_id: str) -> list[Record]:
    """Every section of a site in navigation order, grouped ones where their group stands."""
    out: list[Record] = []
    for item_id in store.ordered(top_key(site_id)):
        if item_id in store.tables[SECTION]:
            out.append(store.tables[SECTION][item_id])
        elif item_id in store.tables[GROUP]:
            out.extend(group_sections(store, item_id))
    return out


def space_of(store: Store, site_space: Record) -> Record | None:
    """The live space a site-space shows, or None while it is deleted or in another org."""
    space = store.get(SPACE, site_space["spaceId"])
    if space is None or space.get("deletedAt") or space["org"] != site_space["org"]:
        return None
    return space


def container_site_spaces(store: Store, site_id: str, section_id: str | None) -> list[Record]:
    """The visible site-spaces of one section (or of the site root), in their order."""
    table = store.tables[SITE_SPACE]
    records = (table[i] for i in store.ordered(site_spaces_key(site_id, section_id)))
    return [r for r in records if space_of(store, r) is not None]


def site_site_spaces(store: Store, site_id: str) -> list[Record]:
    """All visible site-spaces of a site: the root ones, then section by section."""
    out = container_site_spaces(store, site_id, None)
    for section in site_sections(store, site_id):
        out.extend(container_site_spaces(store, site_id, section["id"]))
    return out


def _owner(store: Store, site_space: Record) -> Record:
    """The record holding the default of the site-space's container: its section or site."""
    if site_space.get("section"):
        return store.tables[SECTION][site_space["section"]]
    return store.tables[SITE][site_space["site"]]


def is_default_site_space(store: Store, site_space: Record) -> bool:
    return _owner(store, site_space).get("defaultSiteSpace") == site_space["id"]


# ----- model ------------------------------------------------------------------------------


def slugify(text: str, fallback: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:PATH_MAX].strip("-") or fallback


def _unique_path(wanted: str, taken: set[str]) -> str:
    """`wanted`, or `wanted-2`, `wanted-3`... so that siblings never share a path."""
    if wanted not in taken:
        return wanted
    n = 2
    while True:
        suffix = f"-{n}"
        candidate = wanted[: PATH_MAX - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


def _section_paths(store: Store, site_id: str, skip: str | None = None) -> set[str]:
    return {s["path"] for s in site_sections(store, site_id) if s["id"] != skip}


def _site_space_paths(store: Store, site_id: str, section_id: str | None, skip: str | None = None) -> set[str]:
    table = store.tables[SITE_SPACE]
    return {table[i]["path"] for i in store.ordered(site_spaces_key(site_id, section_id)) if i != skip}


def new_site(store: Store, org_id: str, title: str, **fields: Any) -> Record:
    hostname = fields.get("hostname")
    if hostname is not None and (len(hostname) > 512 or not re.fullmatch(HOSTNAME_PATTERN, hostname)):
        raise ValueError(f"site hostname {hostname!r} does not match the documented pattern")
    ts = store.now_iso()
    record: Record = {
        "org": org_id,
        "type": "basic",
        "title": title,
        "visibility": "public",
        "published": False,
        "createdAt": ts,
        "updatedAt": ts,
        "defaultSection": None,
        "defaultSiteSpace": None,
    }
    record.update(fields)
    return store.add(SITE, record)


def add_site_space(store: Store, site: Record, space: Record, section: Record | None = None, **fields: Any) -> Record:
    """Link a space into a section (or the site root), last; the first one becomes default."""
    section_id = section["id"] if section else None
    record: Record = {
        "org": site["org"],
        "site": site["id"],
        "section": section_id,
        "spaceId": space["id"],
        "path": _unique_path(slugify(space["title"], "space"), _site_space_paths(store, site["id"], section_id)),
        "createdAt": store.now_iso(),
    }
    record.update(fields)
    store.add(SITE_SPACE, record)
    store.place(site_spaces_key(site["id"], section_id), record["id"])
    owner = section if section is not None else site
    if owner.get("defaultSiteSpace") is None:
        owner["defaultSiteSpace"] = record["id"]
    return record


def new_section(store: Store, site: Record, space: Record, title: str, **fields: Any) -> Record:
    """A section at the end of the site holding a site-space for `space`.

    The site's first section takes over the root site-spaces (and their default)."""
    first = not site_sections(store, site["id"])
    record: Record = {
        "org": site["org"],
        "site": site["id"],
        "title": title,
        "path": _unique_path(slugify(title, "section"), _section_paths(store, site["id"])),
        "group": None,
        "defaultSiteSpace": None,
        "createdAt": store.now_iso(),
    }
    record.update(fields)
    store.add(SECTION, record)
    store.place(top_key(site["id"]), record["id"])
    if first:
        site["defaultSection"] = record["id"]
        root = store.orders.pop(site_spaces_key(site["id"], None), [])
        for site_space_id in root:
            store.tables[SITE_SPACE][site_space_id]["section"] = record["id"]
        store.orders[site_spaces_key(site["id"], record["id"])] = root
        record["defaultSiteSpace"], site["defaultSiteSpace"] = site.get("defaultSiteSpace"), None
    if not any(r["spaceId"] == space["id"] for r in container_site_spaces(store, site["id"], record["id"])):
        add_site_space(store, site, space, record)
    return record


def new_group(store: Store, site: Record, title: str, sections: Iterable[Record] = (), **fields: Any) -> Record:
    record: Record = {"org": site["org"], "site": site["id"], "title": title, "createdAt": store.now_iso()}
    record.update(fields)
    store.add(GROUP, record)
    store.place(top_key(site["id"]), record["id"])
    for section in sections:
        put_in_group(store, section, record)
    return record


def _section_key(section: Record) -> tuple[str, ...]:
    return group_key(section["group"]) if section.get("group") else top_key(section["site"])


def put_in_group(store: Store, section: Record, group: Record) -> None:
    """Move a section (from the top level or another group) to the end of `group`."""
    if section.get("group") == group["id"]:
        return
    store.unplace(_section_key(section), section["id"])
    section["group"] = group["id"]
    store.place(group_key(group["id"]), section["id"])


def take_out_of_group(store: Store, section: Record) -> None:
    """Put a grouped section back at the site's top level, right after its group."""
    group_id = section["group"]
    store.unplace(group_key(group_id), section["id"])
    section["group"] = None
    store.place(top_key(section["site"]), section["id"], after=group_id)


def _refresh_defaults(store: Store, site: Record) -> None:
    """Give a site and its containers their first child as default when theirs went away."""
    sections = site_sections(store, site["id"])
    if site.get("defaultSection") not in {s["id"] for s in sections}:
        site["defaultSection"] = sections[0]["id"] if sections else None
    for owner, section_id in [(site, None)] + [(s, s["id"]) for s in sections]:
        ids = store.ordered(site_spaces_key(site["id"], section_id))
        if owner.get("defaultSiteSpace") not in ids:
            owner["defaultSiteSpace"] = ids[0] if ids else None


def delete_site_space(store: Store, site_space: Record) -> None:
    store.unplace(site_spaces_key(site_space["site"], site_space.get("section")), site_space["id"])
    store.remove(SITE_SPACE, site_space["id"])


def delete_section(store: Store, section: Record) -> None:
    key = site_spaces_key(section["site"], section["id"])
    for site_space_id in store.orders.pop(key, []):
        store.remove(SITE_SPACE, site_space_id)
    store.unplace(_section_key(section), section["id"])
    store.remove(SECTION, section["id"])


def delete_group(store: Store, group: Record) -> None:
    """Remove a group; its sections take its place at the top level, in their order."""
    for section in reversed(group_sections(store, group["id"])):
        take_out_of_group(store, section)
    store.orders.pop(group_key(group["id"]), None)
    store.unplace(top_key(group["site"]), group["id"])
    store.remove(GROUP, group["id"])


def delete_site(store: Store, site: Record) -> None:
    for site_space in store.where(SITE_SPACE, site=site["id"]):
        store.remove(SITE_SPACE, site_space["id"])
    for kind in (SECTION, GROUP):
        for record in store.where(kind, site=site["id"]):
            store.remove(kind, record["id"])
            store.orders.pop(site_spaces_key(site["id"], record["id"]), None)
            store.orders.pop(group_key(record["id"]), None)
    store.orders.pop(top_key(site["id"]), None)
    store.orders.pop(site_spaces_key(site["id"], None), None)
    store.remove(ADAPTIVE_SCHEMA, site["id"])
    store.remove(SITE, site["id"])
    org = store.orgs.get(site["org"])
    default_content = (org or {}).get("defaultContent") or {}
    if org is not None and default_content.get("site") == site["id"]:
        org["defaultContent"] = None


def default_adaptive_schema() -> dict[str, Any]:
    """The schema a site has before one is set: only the (empty) unsigned claims."""
    return {
        "$schema": DRAFT_07,
        "type": "object",
        "properties": {
            "unsigned": {
                "type": "object",
                "description": UNSIGNED_DESCRIPTION,
                "properties": {},
                "additionalProperties": False,
            }
        },
        "additionalProperties": False,
    }


def set_adaptive_schema(store: Store, site: Record, json_schema: dict[str, Any]) -> Record:
    record = {
        "id": site["id"],
        "org": site["org"],
        "site": site["id"],
        "jsonSchema": json_schema,
        "updatedAt": store.now_iso(),
    }
    return store.add(ADAPTIVE_SCHEMA, record)


# ----- rendering --------------------------------------------------------------------------


def _site_published_url(site: Record, base: str) -> str | None:
    if not site.get("published"):
        return None
    if site.get("hostname"):
        root = f"https://{site['hostname']}/"
    else:
        root = f"{base}/pub/{site['org']}/{site['id']}/"
    return root + (f"{site['basename']}/" if site.get("basename") else "")


def _under(url: str | None, path: str) -> str | None:
    return f"{url}{path}/" if url else None


def render_site(store: Store, record: Record, base: str) -> dict[str, Any]:
    location = f"{base}/v1/orgs/{record['org']}/sites/{record['id']}"
    urls = {
        "location": location,
        "app": f"{base}/app/o/{record['org']}/sites/{record['id']}/",
        "preview": f"{base}/preview/{record['org']}/sites/{record['id']}/",
        "published": _site_published_url(record, base),
    }
    proxy = record.get("proxy")
    data = {
        "object": "site",
        "id": record["id"],
        "type": record["type"],
        "appliedType": record["type"],
        "title": record["title"],
        "hostname": record.get("hostname"),
        "basename": record.get("basename"),
        "proxy": {"origin": proxy, "target": f"https://proxy.gitbook.site/{proxy}"} if proxy else None,
        "visibility": record["visibility"],
        "defaultLevel": "inherit",
        "published": record["published"],
        "siteSpaces": len(site_site_spaces(store, record["id"])),
        "createdAt": record["createdAt"],
        "adaptiveContent": record.get("adaptiveContent"),
        "features": [],
        "urls": h.strip_none(urls),
        "permissions": {
            "view": True,
            "access": True,
            "edit": True,
            "create": True,
            "admin": True,
            "installIntegration": True,
            "viewAdaptiveSchema": True,
            "editAdaptiveSchema": True,
        },
    }
    return h.strip_none(data)


def _container_url(store: Store, site: Record, section_id: str | None, base: str) -> str | None:
    url = _site_published_url(site, base)
    if section_id is None or url is None:
        return url
    return _under(url, store.tables[SECTION][section_id]["path"])


def render_site_space(store: Store, record: Record, base: str) -> dict[str, Any]:
    space = store.tables[SPACE][record["spaceId"]]
    site = store.tables[SITE][record["site"]]
    data = {
        "object": "site-space",
        "id": record["id"],
        "path": record["path"],
        "section": record.get("section"),
        "space": render_space(store, space, base),
        "title": space["title"],
        "default": is_default_site_space(store, record),
        "condition": record.get("condition"),
        "draft": False,
        "hidden": False,
        "hasAdvancedCustomizationFeature": False,
        "urls": h.strip_none({"published": _under(_container_url(store, site, record.get("section"), base), record["path"])}),
    }
    return h.strip_none(data)


def render_section(store: Store, record: Record, base: str) -> dict[str, Any]:
    site = store.tables[SITE][record["site"]]
    site_spaces = container_site_spaces(store, site["id"], record["id"])
    data = {
        "object": "site-section",
        "id": record["id"],
        "title": record["title"],
        "description": record.get("description"),
        "default": site.get("defaultSection") == record["id"],
        "draft": False,
        "path": record["path"],
        "condition": record.get("condition"),
        "sectionGroup": record.get("group"),
        "siteSpaces": [render_site_space(store, r, base) for r in site_spaces],
        "urls": h.strip_none({"published": _under(_site_published_url(site, base), record["path"])}),
        "icon": record.get("icon"),
    }
    return h.strip_none(data)


def render_group(store: Store, record: Record, base: str) -> dict[str, Any]:
    sections = [render_section(store, s, base) for s in group_sections(store, record["id"])]
    data = {
        "object": "site-section-group",
        "id": record["id"],
        "title": record["title"],
        "icon": record.get("icon"),
        "draft": False,
        "sections": sections,
        "children": sections,
    }
    return h.strip_none(data)


def render_adaptive_schema(store: Store, record: Record, base: str) -> dict[str, Any]:
    return {"object": "site-adaptive-schema", "jsonSchema": record["jsonSchema"], "updatedAt": record["updatedAt"]}


def _themed(light: str, dark: str) -> dict[str, str]:
    return {"light": light, "dark": dark}


def site_customization(site: Record) -> dict[str, Any]:
    """The site's customization settings: the service's defaults, titled after the site."""
    return {
        "title": site["title"],
        "styling": {
            "theme": "clean",
            "primaryColor": _themed("#346DDB", "#346DDB"),
            "tint": {"color": _themed("#346DDB", "#346DDB")},
            "infoColor": _themed("#787878", "#787878"),
            "successColor": _themed("#00C950", "#00C950"),
            "warningColor": _themed("#FE9A00", "#FE9A00"),
            "dangerColor": _themed("#FB2C36", "#FB2C36"),
            "corners": "rounded",
            "depth": "subtle",
            "links": "default",
            "font": "Inter",
            "monospaceFont": "IBMPlexMono",
            "codeTheme": {
                "default": _themed("default-light", "default-dark"),
                "openapi": _themed("default-light", "default-dark"),
            },
            "background": "plain",
            "icons": "regular",
            "sidebar": {"background": "default", "list": "default"},
            "search": "subtle",
        },
        "internationalization": {"locale": "en"},
        "favicon": {},
        "header": {"preset": "default", "links": []},
        "footer": {"groups": []},
        "themes": {"default": "system", "toggeable": True},
        "feedback": {"enabled": False},
        "ai": {"mode": "search"},
        "advancedCustomization": {"enabled": False},
        "trademark": {"enabled": True},
        "externalLinks": {"target": "self"},
        "pagination": {"enabled": True},
        "pageActions": {"items": ["markdown", "pdf"]},
        "privacyPolicy": {},
        "socialPreview": {},
        "socialAccounts": [],
        "insights": {"trackingCookie": True},
    }


def render_published(store: Store, site: Record, base: str) -> dict[str, Any]:
    """What the published site serves: sections and groups in navigation order, or the
    root site-spaces when the site has no sections."""
    items: list[dict[str, Any]] = []
    for item_id in store.ordered(top_key(site["id"])):
        if item_id in store.tables[SECTION]:
            items.append(render_section(store, store.tables[SECTION][item_id], base))
        elif item_id in store.tables[GROUP]:
            items.append(render_group(store, store.tables[GROUP][item_id], base))
    if items:
        structure = {"type": "sections", "structure": items}
    else:
        root = container_site_spaces(store, site["id"], None)
        structure = {"type": "siteSpaces", "structure": [render_site_space(store, r, base) for r in root]}
    return {
        "object": "published-content-site",
        "site": render_site(store, site, base),
        "structure": structure,
        "customizations": {"site": site_customization(site), "siteSpaces": {}},
        "scripts": [],
    }


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


def _space_for_site(store: Store, site: Record, body: dict[str, Any], title: str | None) -> Record:
    """`spaceId` of a body: an existing space of the org, or null to create a new one."""
    if "spaceId" not in body:
        raise bad_request("spaceId: is required")
    if body["spaceId"] is None:
        return new_space(store, site["org"], (title or site["title"])[:50])
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
    return h.list_answer(request, sites, lambda r: render_site(store, r, base))


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
        spaces.append(new_space(store, org["id"], new_space_title))
    for space in spaces:
        add_site_space(store, site, space)
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
        if site_space.get("section") != default_section:
            raise bad_request("defaultSiteSpace: must be a site-space of the site's default section (or of the root)")
    site.update(changes)
    if section is not None:
        site["defaultSection"] = section["id"]
    if site_space is not None:
        _owner(store, site_space)["defaultSiteSpace"] = site_space["id"]
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
    space = _space_for_site(store, site, body, title)
    if title is None:
        title = space["title"] if len(space["title"]) >= 2 else "Untitled section"
    record = new_section(store, site, space, title)
    base = h.base_url(request)
    location = f"{base}/v1/orgs/{site['org']}/sites/{site['id']}/sections/{record['id']}"
    return _created(render_section(store, record, base), location)


@routes.delete(f"{_SITE_ROUTE}/sections/{{siteSectionId}}")
async def remove_section(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    section = _child(store, SECTION, site, request.match_info["siteSectionId"], "section")
    delete_section(store, section)
    _refresh_defaults(store, site)
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
        changes["path"] = _unique_or_400(path, _section_paths(store, site["id"], skip=section["id"]))
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
    groups), or the sections of its group."""
    store, site = h.store_of(request), _site(request)
    section = _child(store, SECTION, site, request.match_info["siteSectionId"], "section")
    body = await h.json_body(request, required=False)
    before, after = h.position(body, "site-section", "siteSection")
    store.place(_section_key(section), section["id"], before=before, after=after)
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
    put_in_group(store, section, group)
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
    space = _space_for_site(store, site, body, title)
    record = add_site_space(store, site, space, section)
    base = h.base_url(request)
    location = f"{base}/v1/orgs/{site['org']}/sites/{site['id']}/site-spaces/{record['id']}"
    return _created(render_site_space(store, record, base), location)


@routes.delete(f"{_SITE_ROUTE}/site-spaces/{{siteSpaceId}}")
async def remove_site_space(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    record = _visible_site_space(store, site, request.match_info["siteSpaceId"])
    delete_site_space(store, record)
    _refresh_defaults(store, site)
    return h.no_content()


@routes.patch(f"{_SITE_ROUTE}/site-spaces/{{siteSpaceId}}")
async def patch_site_space(request: web.Request) -> web.Response:
    store, site = h.store_of(request), _site(request)
    record = _visible_site_space(store, site, request.match_info["siteSpaceId"])
    body = await h.json_body(request)
    path = None
    if "path" in body:
        path = h.text(body, "path", min_len=1, max_len=PATH_MAX)
        _unique_or_400(path, _site_space_paths(store, site["id"], record.get("section"), skip=record["id"]))
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
