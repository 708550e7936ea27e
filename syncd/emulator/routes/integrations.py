"""Integrations: publishing, listing, unpublishing, and the installations of an integration.

Integrations are global, addressed by a unique name (the record id is the name). The owner
organization's admins publish (each publish replaces the manifest and bumps `version`) and
unpublish; `public` and `unlisted` integrations can be read by every token, `private` ones
only by members of the owner; the list shows public ones plus the caller's own.
An installation belongs to the organization it is installed in (its `org`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import random
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import ApiProblem, bad_request, forbidden, not_found
from syncd.emulator.routes.orgs import render_org
from syncd.emulator.routes.space_model import org_spaces
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()
T = TypeVar("T")

INTEGRATION, INSTALLATION = "integration", "integration-installation"
NAME_PATTERN = r"^[a-zA-Z0-9\-_.]+$"
NAME_MAX = 100
SCOPES = (
    "space:content:read space:content:write space:metadata:read space:metadata:write space:git:sync "
    "page:feedback:read site:metadata:read site:views:read site:script:inject site:script:cookies "
    "site:visitor:auth site:visitor:claims site:adaptive:read site:adaptive:write conversations:ingest "
    "openapi:read openapi:write"
).split()
CATEGORIES = ("analytics", "collaboration", "content", "marketing", "visitor-auth", "other")
TARGETS = ("all", "site", "space", "organization")
VISIBILITIES = ("public", "private", "unlisted")
RUNTIMES = ("v1", "v2")
INSTALLATION_STATUSES = ("active", "pending", "paused")
PROPERTY_TYPES = ("string", "number", "boolean", "button")
CONFIGURATION_LEVELS = ("account", "space", "site")
SECRETS_MAX = 20


# ----- model ------------------------------------------------------------------------------


def can_read(store: Store, record: Record, user_id: str) -> bool:
    """Private integrations exist only for members of the owner organization."""
    return record["visibility"] != "private" or user_id in store.members.get(record["org"], {})


def is_owner_admin(store: Store, record: Record, user_id: str) -> bool:
    return store.role_in(user_id, record["org"]) == "admin"


def org_integrations(store: Store, org_id: str) -> list[Record]:
    return store.where(INTEGRATION, org=org_id)


def integration_installations(store: Store, name: str) -> list[Record]:
    return store.where(INSTALLATION, integration=name)


def publish(store: Store, name: str, org_id: str, manifest: dict[str, Any]) -> Record:
    """Create or replace an integration's manifest; every publish is a new version."""
    ts = store.now_iso()
    record = store.get(INTEGRATION, name)
    if record is None:
        record = store.add(INTEGRATION, {"id": name, "name": name, "org": org_id, "version": 0, "createdAt": ts})
    for key in list(record):
        if key not in ("id", "name", "org", "version", "createdAt"):
            del record[key]
    record.update(manifest)
    record["version"] += 1
    record["updatedAt"] = ts
    return record


def new_installation(store: Store, integration: Record, org_id: str, **fields: Any) -> Record:
    ts = store.now_iso()
    record: Record = {
        "integration": integration["name"],
        "org": org_id,
        "status": "active",
        "space_selection": "all",
        "site_selection": "all",
        "spaces": [],
        "sites": [],
        "configuration": {},
        "externalIds": [],
        "createdAt": ts,
        "updatedAt": ts,
    }
    record.update(fields)
    return store.add(INSTALLATION, record)


# ----- rendering --------------------------------------------------------------------------


def _digest(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def render_integration(store: Store, record: Record, base: str, user_id: str | None = None) -> dict[str, Any]:
    name = record["name"]
    root = f"{base}/v1/integrations/{name}"
    admin = user_id is None or is_owner_admin(store, record, user_id)
    urls = {
        "location": root,
        "app": f"{base}/app/integrations/{name}",
        "assets": f"{base}/integrations/{name}/assets",
        "publicEndpoint": f"{base}/integrations/{name}/public",
        "publicContentEndpoint": f"{base}/integrations/{name}/public",
    }
    if record.get("icon"):
        urls["icon"] = f"{base}/integrations/{name}/assets/icon-{_digest(record['icon'])}.png"
    data: dict[str, Any] = {
        "object": INTEGRATION,
        "name": name,
        "version": record["version"],
        "title": record["title"],
        "description": record["description"],
        "summary": record.get("summary"),
        # Images are stored as sent (base64) and served as URLs named by their content.
        "previewImages": [f"{base}/integrations/{name}/assets/preview-{_digest(img)}.png" for img in record.get("previewImages", [])],
        "target": record.get("target", "all"),
        "verified": False,
        "visibility": record["visibility"],
        "scopes": list(record["scopes"]),
        "categories": list(record.get("categories", [])),
        "blocks": list(record.get("blocks", [])),
        "contentSources": list(record.get("contentSources", [])),
        "configurations": record.get("configurations") or {},
        "externalLinks": list(record.get("externalLinks", [])),
        "owner": render_org(store, store.orgs[record["org"]], base, user_id),
        "urls": urls,
        "permissions": {"admin": admin, "install": True},
        "contentSecurityPolicy": record.get("contentSecurityPolicy"),
    }
    return h.strip_none(data)


def render_installation(store: Store, record: Record, base: str) -> dict[str, Any]:
    root = f"{base}/v1/integrations/{record['integration']}/installations/{record['id']}"
    public = f"{base}/integrations/{record['integration']}/installations/{record['id']}/public"
    return {
        "object": INSTALLATION,
        "id": record["id"],
        "status": record["status"],
        "space_selection": record["space_selection"],
        "site_selection": record["site_selection"],
        "spaces": len(record.get("spaces", [])) if record["space_selection"] == "selected" else _live_space_count(store, record["org"]),
        "configuration": dict(record.get("configuration", {})),
        "externalIds": list(record.get("externalIds", [])),
        "target": {"organization": record["org"]},
        "createdAt": record["createdAt"],
        "updatedAt": record["updatedAt"],
        "urls": {
            "location": root,
            "app": f"{base}/app/o/{record['org']}/integrations/{record['integration']}",
            "publicEndpoint": public,
            "publicContentEndpoint": public,
        },
    }


def _live_space_count(store: Store, org_id: str) -> int:
    return sum(1 for s in store.tables["space"].values() if s.get("org") == org_id and not s.get("deletedAt"))


# ----- validation of a publish body -------------------------------------------------------


def _base64(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise bad_request(f"{where}: must be a base64 string")
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"{where}: must be valid base64") from None
    return value


def _enum_list(body: dict[str, Any], name: str, allowed: tuple[str, ...] | list[str], *, required: bool = False) -> list[str] | None:
    values = h.string_list(body, name, required=required)
    if values is not None:
        bad = [v for v in values if v not in allowed]
        if bad:
            raise bad_request(f"{name}: unknown value(s) {', '.join(bad)} (allowed: {', '.join(allowed)})")
        values = list(dict.fromkeys(values))
    return values


def _objects(body: dict[str, Any], name: str, max_items: int | None = None) -> list[dict[str, Any]] | None:
    if name not in body:
        return None
    value = body[name]
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise bad_request(f"{name}: must be an array of objects")
    if max_items is not None and len(value) > max_items:
        raise bad_request(f"{name}: must have at most {max_items} items")
    return value


def _within(where: str, check: Callable[[], T]) -> T:
    """Run a field check on a nested object, naming the nested field in the 400 message."""
    try:
        return check()
    except ApiProblem as problem:
        raise bad_request(f"{where}.{problem.message}") from None


def _component(item: dict[str, Any], where: str) -> dict[str, Any]:
    """Shared bounds of a block and a content source: id, title 2-40, description max 150, icon."""
    out: dict[str, Any] = {
        "id": _within(where, lambda: h.text(item, "id", required=True, min_len=1)),
        "title": _within(where, lambda: h.text(item, "title", required=True, min_len=2, max_len=40)),
    }
    for key, max_len in (("description", 150), ("icon", None)):
        if key in item:
            out[key] = _within(where, lambda key=key, max_len=max_len: h.text(item, key, max_len=max_len))
    return out


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    items = _objects(body, "blocks")
    if items is None:
        return None
    out = []
    for i, item in enumerate(items):
        block = _component(item, f"blocks[{i}]")
        if "urlUnfurl" in item:
            block["urlUnfurl"] = _within(f"blocks[{i}]", lambda item=item: h.string_list(item, "urlUnfurl"))
        markdown = h.obj(item, "markdown")
        if markdown is not None:
            if not isinstance(markdown.get("codeblock"), str) or not isinstance(markdown.get("body"), str):
                raise bad_request(f"blocks[{i}].markdown: must be {{codeblock, body}} strings")
            block["markdown"] = {"codeblock": markdown["codeblock"], "body": markdown["body"]}
        out.append(block)
    return out


def _content_sources(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    items = _objects(body, "contentSources")
    if items is None:
        return None
    out = []
    for i, item in enumerate(items):
        source = _component(item, f"contentSources[{i}]")
        configuration = item.get("configuration")
        if not isinstance(configuration, dict) or not isinstance(configuration.get("componentId"), str):
            raise bad_request(f"contentSources[{i}].configuration: must be {{componentId}}")
        source["configuration"] = {"componentId": configuration["componentId"]}
        out.append(source)
    return out


def _external_links(body: dict[str, Any]) -> list[dict[str, str]] | None:
    items = _objects(body, "externalLinks", max_items=5)
    if items is None:
        return None
    out = []
    for i, item in enumerate(items):
        if not isinstance(item.get("label"), str):
            raise bad_request(f"externalLinks[{i}].label: is required (string)")
        url = _within(f"externalLinks[{i}]", lambda item=item: h.url_field(item, "url", required=True))
        out.append({"url": str(url), "label": item["label"]})
    return out


def _configurations(body: dict[str, Any]) -> dict[str, Any] | None:
    """`{account, space, site}`, each a schema `{properties, required}` or `{componentId}`."""
    value = h.obj(body, "configurations")
    if value is None:
        return None
    for level, config in value.items():
        where = f"configurations.{level}"
        if level not in CONFIGURATION_LEVELS:
            raise bad_request(f"configurations: unknown level {level!r} (allowed: {', '.join(CONFIGURATION_LEVELS)})")
        if not isinstance(config, dict):
            raise bad_request(f"{where}: must be an object")
        if "componentId" in config:
            if not isinstance(config["componentId"], str):
                raise bad_request(f"{where}.componentId: must be a string")
            continue
        properties = config.get("properties")
        if not isinstance(properties, dict):
            raise bad_request(f"{where}.properties: is required (object)")
        for prop, spec in properties.items():
            if not isinstance(spec, dict) or spec.get("type") not in PROPERTY_TYPES:
                raise bad_request(f"{where}.properties.{prop}.type: must be one of {', '.join(PROPERTY_TYPES)}")
        required = config.get("required", [])
        if not isinstance(required, list) or any(r not in properties for r in required):
            raise bad_request(f"{where}.required: must list names of its properties")
    return value


def _secrets(body: dict[str, Any]) -> dict[str, str] | None:
    value = h.obj(body, "secrets")
    if value is None:
        return None
    if len(value) > SECRETS_MAX or not all(isinstance(v, str) for v in value.values()):
        raise bad_request(f"secrets: must map at most {SECRETS_MAX} names to strings")
    return value


def _csp(body: dict[str, Any]) -> str | dict[str, str] | None:
    value = body.get("contentSecurityPolicy")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return value
    raise bad_request("contentSecurityPolicy: must be a string or an object of directive strings")


def manifest_of(body: dict[str, Any]) -> dict[str, Any]:
    """The publishable fields of a publish body, validated; absent optional ones are left out."""
    manifest: dict[str, Any] = {
        "title": h.text(body, "title", required=True, min_len=2, max_len=30),
        "description": h.text(body, "description", required=True, max_len=100),
        "scopes": _enum_list(body, "scopes", SCOPES, required=True),
        "script": h.text(body, "script", required=True),
        "summary": h.text(body, "summary", max_len=2048),
        "visibility": h.choice(body, "visibility", VISIBILITIES, default="private"),
        "target": h.choice(body, "target", TARGETS, default="all"),
        "runtime": h.choice(body, "runtime", RUNTIMES, default="v1"),
        "categories": _enum_list(body, "categories", CATEGORIES),
        "blocks": _blocks(body),
        "contentSources": _content_sources(body),
        "externalLinks": _external_links(body),
        "configurations": _configurations(body),
        "secrets": _secrets(body),
        "contentSecurityPolicy": _csp(body),
    }
    if "icon" in body:
        manifest["icon"] = _base64(body["icon"], "icon")
    if "previewImages" in body:
        images = body["previewImages"]
        if not isinstance(images, list) or len(images) > 3:
            raise bad_request("previewImages: must be an array of at most 3 base64 images")
        manifest["previewImages"] = [_base64(img, f"previewImages[{i}]") for i, img in enumerate(images)]
    return h.strip_none(manifest)


# ----- routes -----------------------------------------------------------------------------


def _name(request: web.Request) -> str:
    name = request.match_info["integrationName"]
    h.text({"integrationName": name}, "integrationName", min_len=1, max_len=NAME_MAX, pattern=NAME_PATTERN)
    return name


def _readable(request: web.Request) -> Record:
    store, user, name = h.store_of(request), h.user_of(request), _name(request)
    record = store.get(INTEGRATION, name)
    if record is None or not can_read(store, record, user):
        raise not_found(f"integration {name!r} not found")
    return record


def _owner_org(store: Store, user_id: str, ref: str) -> Record:
    """The organization named by id or hostname, among the caller's organizations."""
    for org in store.user_orgs(user_id):
        if ref in (org["id"], org.get("hostname")):
            return org
    raise not_found(f"organization {ref!r} not found")


def _block_domain_matches(record: Record, domain: str) -> bool:
    domain = domain.lower()
    for block in record.get("blocks", []):
        for pattern in block.get("urlUnfurl", []):
            host = (urlsplit(pattern).hostname or pattern).lower().replace("*.", "")
            if host == domain or host.endswith("." + domain) or domain.endswith("." + host):
                return True
    return False


@routes.get("/v1/integrations")
async def list_integrations(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    search = (h.query_text(request, "search") or "").lower()
    category = h.query_choice(request, "category", CATEGORIES)
    block_domain = h.query_text(request, "blockDomain", max_len=100)
    if block_domain is not None:
        h.text({"blockDomain": block_domain}, "blockDomain", pattern=NAME_PATTERN)
    with_blocks = h.query_bool(request, "blocks")
    with_sources = h.query_bool(request, "contentSources")
    owner = h.query_text(request, "owner")
    scope = h.query_choice(request, "scope", SCOPES)
    target = h.query_choice(request, "target", TARGETS)
    own_orgs = {org["id"] for org in store.user_orgs(user)}

    def keep(r: Record) -> bool:
        listed = r["visibility"] == "public" or r["org"] in own_orgs
        return (
            listed
            and (not search or search in r["name"].lower() or search in r["title"].lower())
            and (category is None or category in r.get("categories", []))
            and (block_domain is None or _block_domain_matches(r, block_domain))
            and (with_blocks is None or bool(r.get("blocks")) == with_blocks)
            and (with_sources is None or bool(r.get("contentSources")) == with_sources)
            and (owner is None or r["org"] == owner)
            and (scope is None or scope in r["scopes"])
            and (target is None or r.get("target", "all") in (target, "all"))
        )

    base = h.base_url(request)
    items = [r for r in store.tables[INTEGRATION].values() if keep(r)]
    return h.list_answer(request, items, lambda r: render_integration(store, r, base, user), label=lambda r: r["title"])


@routes.get("/v1/integrations/{integrationName}")
async def get_integration(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    return h.json_answer(render_integration(store, _readable(request), h.base_url(request), user))


@routes.post("/v1/integrations/{integrationName}")
async def publish_integration(request: web.Request) -> web.Response:
    """Publish a new integration or a new version of one the caller's organization owns."""
    store, user, name = h.store_of(request), h.user_of(request), _name(request)
    body = await h.json_body(request)
    org_ref = h.text(body, "organization", required=True, min_len=1)
    manifest = manifest_of(body)
    org = _owner_org(store, user, org_ref)
    store.require_admin(user, org["id"])
    existing = store.get(INTEGRATION, name)
    if existing is not None:
        if not is_owner_admin(store, existing, user):
            raise forbidden(f"integration {name!r} belongs to another organization")
        if existing["org"] != org["id"]:
            raise bad_request(f"organization: integration {name!r} is owned by organization {existing['org']!r}")
    record = publish(store, name, org["id"], manifest)
    return h.json_answer(render_integration(store, record, h.base_url(request), user))


@routes.delete("/v1/integrations/{integrationName}")
async def unpublish_integration(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    record = _readable(request)
    if not is_owner_admin(store, record, user):
        raise forbidden("only admins of the owner organization can unpublish an integration")
    for installation in integration_installations(store, record["name"]):
        store.remove(INSTALLATION, installation["id"])
    store.remove(INTEGRATION, record["id"])
    return h.no_content()


@routes.get("/v1/integrations/{integrationName}/installations")
async def list_installations(request: web.Request) -> web.Response:
    """Owner admins see every installation; others only those in organizations they administer."""
    store, user = h.store_of(request), h.user_of(request)
    record = _readable(request)
    external_id = h.query_text(request, "externalId")
    owner_admin = is_owner_admin(store, record, user)
    items = [
        inst
        for inst in integration_installations(store, record["name"])
        if (owner_admin or store.role_in(user, inst["org"]) == "admin")
        and (external_id is None or external_id in inst.get("externalIds", []))
    ]
    base = h.base_url(request)
    # Installations have no title: the organization they are installed in names them.
    return h.list_answer(
        request, items, lambda r: render_installation(store, r, base), label=lambda r: store.orgs[r["org"]]["title"]
    )


# ----- generator --------------------------------------------------------------------------

TEMPLATES: tuple[dict[str, Any], ...] = (
    {
        "slug": "analytics",
        "title": "Page Analytics",
        "description": "Track page views and reader journeys on published sites",
        "scopes": ["site:views:read", "site:script:inject"],
        "categories": ["analytics"],
        "target": "site",
        "configurations": {
            "site": {"properties": {"tracking_id": {"type": "string", "title": "Tracking ID"}}, "required": ["tracking_id"]}
        },
    },
    {
        "slug": "issues",
        "title": "Issue Embeds",
        "description": "Embed live issues from the tracker in pages",
        "scopes": ["space:content:read"],
        "categories": ["collaboration"],
        "blocks": [
            {
                "id": "issue",
                "title": "Tracker issue",
                "description": "A live preview of an issue",
                "urlUnfurl": ["https://tracker.example.com/browse/*"],
            }
        ],
    },
    {
        "slug": "diagrams",
        "title": "Diagrams",
        "description": "Render diagrams written as code",
        "scopes": ["space:content:read", "space:content:write"],
        "categories": ["content"],
        "blocks": [{"id": "diagram", "title": "Diagram", "markdown": {"codeblock": "diagram", "body": "content"}}],
    },
    {
        "slug": "api-sync",
        "title": "API Reference Sync",
        "description": "Generate reference pages from OpenAPI specifications",
        "scopes": ["openapi:read", "openapi:write", "space:content:write"],
        "categories": ["content"],
        "target": "space",
        "contentSources": [
            {"id": "reference", "title": "API reference", "configuration": {"componentId": "configureReference"}}
        ],
    },
    {
        "slug": "visitor-sso",
        "title": "Visitor Sign-in",
        "description": "Authenticate site visitors with the company identity provider",
        "scopes": ["site:visitor:auth", "site:visitor:claims"],
        "categories": ["visitor-auth"],
        "target": "site",
        "externalLinks": [{"url": "https://idp.example.com/docs", "label": "Set-up guide"}],
    },
)


def _unique_name(store: Store, base_name: str) -> str:
    name, n = base_name, 1
    while store.get(INTEGRATION, name) is not None:
        n += 1
        name = f"{base_name}-{n}"
    return name


def seed(store: Store, org_id: str, rng: random.Random, params: dict[str, int]) -> None:
    """Integrations owned by the organization, each installed in 0 to 2 organizations (its
    owner, and one generated before it)."""
    index = list(store.orgs).index(org_id) + 1
    others = [o for o in store.orgs if o != org_id]
    for i in range(params.get("integrations", 0)):
        template = dict(TEMPLATES[i % len(TEMPLATES)])
        slug = template.pop("slug")
        name = _unique_name(store, f"org-{index}-{slug}")
        manifest = {
            **template,
            "script": f"export default createIntegration({{ name: '{name}' }});",
            "visibility": rng.choice(("public", "public", "unlisted", "private")),
            "summary": f"# {template['title']}\n\n{template['description']}.",
        }
        record = publish(store, name, org_id, manifest)
        if rng.random() < 0.3:  # a republished version now and then
            publish(store, name, org_id, manifest)
        targets = [org_id] + ([rng.choice(others)] if others else [])
        for target_org in targets[: rng.randint(0, 2)]:
            spaces = org_spaces(store, target_org)
            selected = bool(spaces) and rng.random() < 0.4
            new_installation(
                store,
                record,
                target_org,
                status=rng.choice(INSTALLATION_STATUSES[:1] * 3 + INSTALLATION_STATUSES[1:]),
                space_selection="selected" if selected else "all",
                spaces=[s["id"] for s in rng.sample(spaces, min(3, len(spaces)))] if selected else [],
                externalIds=[f"acct-{store.new_id(8).lower()}"] if rng.random() < 0.5 else [],
                configuration={"enabled": True} if rng.random() < 0.5 else {},
            )


# ----- canonical dump ---------------------------------------------------------------------


def _org_installations(store: Store, org_id: str) -> list[Record]:
    return [inst for record in org_integrations(store, org_id) for inst in integration_installations(store, record["name"])]


DUMP = [
    DumpKind(
        name=INTEGRATION,
        records=org_integrations,
        render=lambda store, record, base: render_integration(store, record, base),
        label=lambda data: data["name"],
        volatile=frozenset({"version", "owner"}),
    ),
    DumpKind(
        name=INSTALLATION,
        records=_org_installations,
        render=render_installation,
        label=lambda data: "installation",
        parent=lambda store, record: (INTEGRATION, record["integration"]),
        volatile=frozenset({"target", "spaces"}),
    ),
]
