"""Organizations: list, get, patch, and organizations by email domain."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator.dump_kind import DumpKind
from syncd.emulator.errors import conflict
from syncd.emulator.store import Record, Store

routes = web.RouteTableDef()

ORG_TYPES = ("business", "community")
HOSTNAME_PATTERN = r"^[a-z0-9][a-z0-9-]{1,30}[a-z0-9]$"


def new_org(store: Store, title: str, **fields: Any) -> Record:
    """An organization record; its creator becomes a member through `Store.add_member`."""
    org: Record = {
        "id": store.new_id(),
        "title": title,
        "createdAt": store.now_iso(),
        "emailDomains": [],
        "type": "business",
        "useCase": "internalDocs",
        "defaultRole": None,
        "sso": False,
        "ai": False,
        "inviteLinks": True,
        "plan": "free_2024",
    }
    org.update(fields)
    store.orgs[org["id"]] = org
    return org


def render_org(store: Store, org: Record, base: str, user_id: str | None = None) -> dict[str, Any]:
    role = store.role_in(user_id, org["id"]) if user_id else "admin"
    urls: dict[str, Any] = {
        "location": f"{base}/v1/orgs/{org['id']}",
        "app": f"{base}/app/o/{org['id']}/",
    }
    if org.get("logo"):
        urls["logo"] = org["logo"]
    data: dict[str, Any] = {
        "object": "organization",
        "id": org["id"],
        "title": org["title"],
        "createdAt": org["createdAt"],
        "emailDomains": list(org.get("emailDomains", [])),
        "hostname": org.get("hostname"),
        "type": org.get("type", "business"),
        "useCase": org.get("useCase"),
        "communityType": org.get("communityType"),
        "defaultRole": org.get("defaultRole"),
        "defaultContent": org.get("defaultContent"),
        "sso": org.get("sso", False),
        "ai": org.get("ai", False),
        "inviteLinks": org.get("inviteLinks", True),
        "plan": org.get("plan", "free_2024"),
        "urls": urls,
        "trial": {"status": "none", "count": 0},
        "internal_isOnNewTrial": True,
        "mergeRules": {"type": "none"},
        "permissions": {
            "view": True,
            "access": True,
            "admin": role == "admin",
            "ownTeam": False,
            "createContent": role in ("admin", "create"),
            "createOpenAPISpec": role == "admin",
            "viewBilling": role == "admin",
            "listMembers": True,
            "listTeams": True,
            "listIntegrations": True,
            "listInstallations": role == "admin",
            "installIntegration": role == "admin",
        },
    }
    data = h.strip_none(data)
    data["defaultRole"] = org.get("defaultRole")  # documented as Role or null
    return data


@routes.get("/v1/orgs")
async def list_orgs(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    base = h.base_url(request)
    return h.list_answer(request, store.user_orgs(user), lambda o: render_org(store, o, base, user))


@routes.get("/v1/orgs/{organizationId}")
async def get_org(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    return h.json_answer(render_org(store, org, h.base_url(request), user))


@routes.patch("/v1/orgs/{organizationId}")
async def patch_org(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    store.require_admin(user, org["id"])
    body = await h.json_body(request)
    changes: dict[str, Any] = {}
    if "title" in body:
        changes["title"] = h.text(body, "title", min_len=2, max_len=255)
    if "emailDomains" in body:
        changes["emailDomains"] = h.string_list(body, "emailDomains")
    if "hostname" in body:
        hostname = h.text(body, "hostname", min_len=3, max_len=32, pattern=HOSTNAME_PATTERN)
        taken = any(o.get("hostname") == hostname and o["id"] != org["id"] for o in store.orgs.values())
        if taken:
            raise conflict(f"hostname: {hostname!r} is already used by another organization")
        changes["hostname"] = hostname
    if "defaultRole" in body:
        changes["defaultRole"] = h.role(body, "defaultRole", nullable=True)
    if "defaultContent" in body:
        changes["defaultContent"] = h.obj(body, "defaultContent", nullable=True)
    if "logo" in body:
        changes["logo"] = h.text(body, "logo", max_len=2048, pattern=r"https?://\S+")
    for flag in ("sso", "ai", "inviteLinks"):
        if flag in body:
            changes[flag] = h.boolean(body, flag)
    org.update(changes)
    return h.json_answer(render_org(store, org, h.base_url(request), user))


@routes.get("/v1/email-domains/{emailDomain}/orgs")
async def orgs_by_email_domain(request: web.Request) -> web.Response:
    store, user = h.store_of(request), h.user_of(request)
    domain = request.match_info["emailDomain"].lower()
    base = h.base_url(request)
    found = [o for o in store.orgs.values() if domain in (d.lower() for d in o.get("emailDomains", []))]
    return h.json_answer({"organizations": [render_org(store, o, base, user) for o in found]})


DUMP = [
    DumpKind(
        name="organization",
        records=lambda store, org_id: [store.orgs[org_id]],
        render=lambda store, org, base: render_org(store, org, base),
        label=lambda data: "settings",
        refs={"defaultContent.site": "site"},
        volatile=frozenset({"title", "hostname", "plan", "trial", "internal_isOnNewTrial", "type", "mergeRules"}),
    )
]
