"""Integrations: publishing, listing, unpublishing, and the installations of an integration.

Integrations are global, addressed by a unique name (the record id is the name). The owner
organization's admins publish (each publish replaces the manifest and bumps `version`) and
unpublish; `public` and `unlisted` integrations can be read by every token, `private` ones
only by members of the owner; the list shows public ones plus the caller's own.
An installation belongs to the organization it is installed in (its `org`).

What a publish body may hold, and its checks, are in `integration_manifest`.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import bad_request, forbidden, not_found
from syncd.emulator.routes.integration_manifest import CATEGORIES, SCOPES, TARGETS, manifest_of
from syncd.emulator.routes.orgs import render_org
from syncd.emulator.routes.space_model import org_spaces
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()

INTEGRATION, INSTALLATION = "integration", "integration-installation"
NAME_PATTERN = r"^[a-zA-Z0-9\-_.]+$"
NAME_MAX = 100
INSTALLATION_STATUSES = ("active", "pending", "paused")


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
