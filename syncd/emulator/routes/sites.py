"""Docs sites, the routes: sites and adaptive schemas (their sections, section groups and
site-spaces in `site_navigation`), plus the generator's sites and their canonical dump. The
model (navigation orders, defaults, paths) and the rendering are in `site_model`.

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
from syncd.emulator.errors import bad_request
from syncd.emulator.profile import profile_of
from syncd.emulator.routes.site_model import (
    ADAPTIVE_SCHEMA,
    CLAIM_TYPES,
    DRAFT_07,
    GROUP,
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
    delete_site,
    new_group,
    new_section,
    new_site,
    org_sites,
    render_adaptive_schema,
    render_group,
    render_published,
    render_section,
    render_site,
    render_site_space,
    set_adaptive_schema,
    site_groups,
    site_sections,
    site_site_spaces,
    site_spaces_key,
    slugify,
    space_of,
    top_key,
)
from syncd.emulator.routes.site_requests import SITE_ROUTE, created, new_root_space, org_space, site_in_path
from syncd.emulator.routes.space_model import SPACE, org_spaces
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()


# ----- request helpers --------------------------------------------------------------------


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
            spaces.append(org_space(store, org["id"], space_id, f"spaces[{index}]"))
    elif isinstance(wanted, dict):
        new_space_title = h.text(wanted, "title", min_len=1, max_len=50, default=title[:50])
    elif wanted is not None:
        raise bad_request("spaces: must be an array of space ids or an object to create a new space")
    site = new_site(store, org["id"], title, type=site_type, visibility=visibility)
    if new_space_title is not None:
        spaces.append(new_root_space(request, store, org["id"], new_space_title))
    for space in spaces:  # root site-spaces in the order asked, whatever the profile
        add_site_space(store, site, space, profile=profile_of(request))
    base = h.base_url(request)
    return created(render_site(store, site, base), f"{base}/v1/orgs/{org['id']}/sites/{site['id']}")


@routes.get(SITE_ROUTE)
async def get_site(request: web.Request) -> web.Response:
    return h.json_answer(render_site(h.store_of(request), site_in_path(request), h.base_url(request)))


@routes.delete(SITE_ROUTE)
async def remove_site(request: web.Request) -> web.Response:
    delete_site(h.store_of(request), site_in_path(request))
    return h.no_content()


@routes.patch(SITE_ROUTE)
async def patch_site(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
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


@routes.get(f"{SITE_ROUTE}/adaptive-schema")
async def get_adaptive_schema(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    record = store.get(ADAPTIVE_SCHEMA, site["id"])
    if record is None:
        record = {"jsonSchema": default_adaptive_schema(), "updatedAt": site["createdAt"]}
    return h.json_answer(render_adaptive_schema(store, record, h.base_url(request)))


@routes.put(f"{SITE_ROUTE}/adaptive-schema")
async def put_adaptive_schema(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    body = await h.json_body(request)
    json_schema = _validate_adaptive_schema(h.obj(body, "jsonSchema", required=True))
    record = set_adaptive_schema(store, site, json_schema)
    return h.json_answer(render_adaptive_schema(store, record, h.base_url(request)))


@routes.get(f"{SITE_ROUTE}/published")
async def get_published(request: web.Request) -> web.Response:
    store, site = h.store_of(request), site_in_path(request)
    return h.json_answer(render_published(store, site, h.base_url(request)))


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
