"""Request helpers the site routes and the site navigation routes share: the site the path
names, a space a body names or one made for a site, and a 201 with its Location."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator.errors import bad_request, not_found
from syncd.emulator.profile import land, profile_of
from syncd.emulator.routes.site_model import SITE
from syncd.emulator.routes.space_model import SPACE, new_space, tree_key
from syncd.emulator.store import Record, Store

SITE_ROUTE = "/v1/orgs/{organizationId}/sites/{siteId}"


def site_in_path(request: web.Request) -> Record:
    """The site of the path, 404 unless it belongs to the path's (visible) organization."""
    store, user = h.store_of(request), h.user_of(request)
    org = store.org_for(user, request.match_info["organizationId"])
    site_id = request.match_info["siteId"]
    site = store.get(SITE, site_id)
    if site is None or site["org"] != org["id"]:
        raise not_found(f"site {site_id!r} not found")
    return site


def created(data: dict[str, Any], location: str) -> web.Response:
    response = h.json_answer(data, status=201)
    response.headers["Location"] = location
    return response


def org_space(store: Store, org_id: str, space_id: Any, name: str) -> Record:
    """A live space of the organization named by body field `name` (400 when it is not one)."""
    if not isinstance(space_id, str):
        raise bad_request(f"{name}: must be a space id")
    space = store.get(SPACE, space_id)
    if space is None or space["org"] != org_id or space.get("deletedAt"):
        raise bad_request(f"{name}: space {space_id!r} not found in this organization")
    return space


def new_root_space(request: web.Request, store: Store, org_id: str, title: str) -> Record:
    """A space created for a site at the organization's root, landing where the profile says."""
    space = new_space(store, org_id, title)
    land(store, profile_of(request), tree_key(org_id, None), space["id"])
    return space
