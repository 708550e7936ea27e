"""Docs sites, the model: sites, sections, section groups, site-spaces, adaptive schemas,
and how each renders. The routes, the generator and the dump are in `sites`.

A site's navigation is kept in `store.orders`:

- `("site", site_id)`: the top-level items, section ids and section group ids mixed;
- `("group", group_id)`: the sections inside a group;
- `("site-spaces", site_id, section_id or "")`: the site-spaces of a section, or of the site
  root (a site without sections, or one whose first section left them there).

Sections are listed in navigation order (top-level sections, and the sections of a group
where the group stands). Defaults live on the owner: `site["defaultSection"]`, and
`defaultSiteSpace` on the section (or on the site for root site-spaces); an owner whose
default goes away falls back to its first child, so a non-empty container always has one.
When a site gets its first section, its root site-spaces move into it in the default profile
(the service turns a flat site into a sectioned one that way) and stay at the root in the
divergent one. A site-space whose space is deleted, or no longer in the site's organization,
is hidden until the space comes back. Paths derived from titles follow the profile too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from syncd.emulator import http as h
from syncd.emulator.profile import DEFAULT, Profile
from syncd.emulator.routes.space_model import SPACE, render_space
from syncd.emulator.store import Record, Store

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


def container_owner(store: Store, site_space: Record) -> Record:
    """The record holding the default of the site-space's container: its section or site."""
    if site_space.get("section"):
        return store.tables[SECTION][site_space["section"]]
    return store.tables[SITE][site_space["site"]]


def is_default_site_space(store: Store, site_space: Record) -> bool:
    return container_owner(store, site_space).get("defaultSiteSpace") == site_space["id"]


# ----- model ------------------------------------------------------------------------------


def slugify(text: str, fallback: str, profile: Profile = DEFAULT) -> str:
    """A path from a title: runs of anything but [a-z0-9] become the profile's separator."""
    sep = profile.slug_separator
    slug = re.sub(r"[^a-z0-9]+", sep, text.lower()).strip(sep)
    return slug[:PATH_MAX].strip(sep) or fallback


def unique_path(wanted: str, taken: set[str], profile: Profile = DEFAULT) -> str:
    """`wanted`, or a numbered variant (`wanted-2`, `wanted-3`... by default, `wanted_1`,
    `wanted_2`... in the divergent profile) so that siblings never share a path."""
    if wanted not in taken:
        return wanted
    n = profile.first_duplicate_suffix
    while True:
        suffix = f"{profile.slug_separator}{n}"
        candidate = wanted[: PATH_MAX - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


def section_paths(store: Store, site_id: str, skip: str | None = None) -> set[str]:
    return {s["path"] for s in site_sections(store, site_id) if s["id"] != skip}


def site_space_paths(store: Store, site_id: str, section_id: str | None, skip: str | None = None) -> set[str]:
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


def add_site_space(
    store: Store, site: Record, space: Record, section: Record | None = None, *, profile: Profile = DEFAULT, **fields: Any
) -> Record:
    """Link a space into a section (or the site root), last; the first one becomes default.
    Its path comes from the space's title the way `profile` derives paths."""
    section_id = section["id"] if section else None
    taken = site_space_paths(store, site["id"], section_id)
    record: Record = {
        "org": site["org"],
        "site": site["id"],
        "section": section_id,
        "spaceId": space["id"],
        "path": unique_path(slugify(space["title"], "space", profile), taken, profile),
        "createdAt": store.now_iso(),
    }
    record.update(fields)
    store.add(SITE_SPACE, record)
    store.place(site_spaces_key(site["id"], section_id), record["id"])
    owner = section if section is not None else site
    if owner.get("defaultSiteSpace") is None:
        owner["defaultSiteSpace"] = record["id"]
    return record


def new_section(store: Store, site: Record, space: Record, title: str, *, profile: Profile = DEFAULT, **fields: Any) -> Record:
    """A section at the end of the site holding a site-space for `space`.

    The site's first section becomes its default section and, when the profile says so,
    takes over the root site-spaces (and their default); paths follow the profile."""
    first = not site_sections(store, site["id"])
    record: Record = {
        "org": site["org"],
        "site": site["id"],
        "title": title,
        "path": unique_path(slugify(title, "section", profile), section_paths(store, site["id"]), profile),
        "group": None,
        "defaultSiteSpace": None,
        "createdAt": store.now_iso(),
    }
    record.update(fields)
    store.add(SECTION, record)
    store.place(top_key(site["id"]), record["id"])
    if first:
        site["defaultSection"] = record["id"]
    if first and profile.first_section_takes_root:
        root = store.orders.pop(site_spaces_key(site["id"], None), [])
        for site_space_id in root:
            store.tables[SITE_SPACE][site_space_id]["section"] = record["id"]
        store.orders[site_spaces_key(site["id"], record["id"])] = root
        record["defaultSiteSpace"], site["defaultSiteSpace"] = site.get("defaultSiteSpace"), None
    if not any(r["spaceId"] == space["id"] for r in container_site_spaces(store, site["id"], record["id"])):
        add_site_space(store, site, space, record, profile=profile)
    return record


def new_group(store: Store, site: Record, title: str, sections: Iterable[Record] = (), **fields: Any) -> Record:
    record: Record = {"org": site["org"], "site": site["id"], "title": title, "createdAt": store.now_iso()}
    record.update(fields)
    store.add(GROUP, record)
    store.place(top_key(site["id"]), record["id"])
    for section in sections:
        put_in_group(store, section, record)
    return record


def section_key(section: Record) -> tuple[str, ...]:
    return group_key(section["group"]) if section.get("group") else top_key(section["site"])


def put_in_group(store: Store, section: Record, group: Record) -> None:
    """Move a section (from the top level or another group) to the end of `group`."""
    if section.get("group") == group["id"]:
        return
    store.unplace(section_key(section), section["id"])
    section["group"] = group["id"]
    store.place(group_key(group["id"]), section["id"])


def take_out_of_group(store: Store, section: Record) -> None:
    """Put a grouped section back at the site's top level, right after its group."""
    group_id = section["group"]
    store.unplace(group_key(group_id), section["id"])
    section["group"] = None
    store.place(top_key(section["site"]), section["id"], after=group_id)


def refresh_defaults(store: Store, site: Record) -> None:
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
    store.unplace(section_key(section), section["id"])
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
