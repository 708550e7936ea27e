"""The emulator's aiohttp application: middlewares for statistics, rate limits, faults,
authentication, errors and the behaviour profile's answer shapes around the route families
of `syncd.emulator.route_table` and the admin routes."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from syncd.emulator import admin
from syncd.emulator.errors import ApiProblem, error_response, unauthorized
from syncd.emulator.http import ANSWER_DATA, CAPS, FAULT_STATUS, STORE, USER_ID, ServerCaps
from syncd.emulator.knobs import EMULATOR, START, Start, new_knobs
from syncd.emulator.profile import PROFILE, Played, Profile, get_profile, profile_of
from syncd.emulator.route_table import FAMILIES
from syncd.emulator.store import Store

log = logging.getLogger("syncd.emulator")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
API_PREFIX = "/v1/"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HTML_502 = (
    "<html><head><title>502 Bad Gateway</title></head>"
    "<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>"
)


def route_name(request: web.Request) -> str:
    info = request.match_info
    resource = info.route.resource if info.route is not None else None
    return resource.canonical if resource is not None else request.path


def _is_api(request: web.Request) -> bool:
    return request.path.startswith(API_PREFIX)


@web.middleware
async def stats_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not _is_api(request):
        return await handler(request)
    emu = request.app[EMULATOR]
    status = "error"
    try:
        response = await handler(request)
        status = request.get(FAULT_STATUS) or str(response.status)
        return response
    finally:
        emu.stats.record(request.method, route_name(request), status)


@web.middleware
async def rate_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not _is_api(request):
        return await handler(request)
    emu = request.app[EMULATOR]
    key = request.headers.get("Authorization") or f"ip:{request.remote}"
    allowed, headers = emu.limiter.take(key)
    if not allowed:
        return error_response(429, "rate limit exceeded: retry after the Retry-After delay", headers)
    response = await handler(request)
    if not response.prepared:
        response.headers.update(headers)
    return response


def _drop(request: web.Request, status: str) -> web.Response:
    """Close the connection without an answer (the client sees a disconnect)."""
    request[FAULT_STATUS] = status
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=599)


@web.middleware
async def fault_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not _is_api(request):
        return await handler(request)
    emu = request.app[EMULATOR]
    faults, rng = emu.faults, emu.rng
    delay = faults.delay_seconds(rng)
    if delay:
        await asyncio.sleep(delay)
    call = f"{request.method} {request.path}"
    if any(re.search(pattern, request.path) or re.search(pattern, call) for pattern in emu.forbidden):
        request[FAULT_STATUS] = "forbidden"
        return error_response(403, "you do not have access to this resource (injected)")
    if faults.drop and rng.random() < faults.drop:
        return _drop(request, "dropped")
    if faults.rate_limited and rng.random() < faults.rate_limited:
        request[FAULT_STATUS] = "fault-429"
        headers = {"Retry-After": "1", "X-RateLimit-Limit": str(int(emu.limiter.burst or 1)), "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(emu.limiter.wall()) + 1)}
        return error_response(429, "rate limit exceeded (injected): retry after the Retry-After delay", headers)
    if faults.error_5xx and rng.random() < faults.error_5xx:
        request[FAULT_STATUS] = "fault-5xx"
        status = rng.choice((500, 503))
        return error_response(status, "internal error (injected)" if status == 500 else "service unavailable (injected)")
    if faults.html_502 and rng.random() < faults.html_502:
        request[FAULT_STATUS] = "fault-502"
        return web.Response(status=502, text=HTML_502, content_type="text/html")
    response = await handler(request)
    if request.method == "GET" and any(re.search(pattern, request.path) for pattern in emu.corrupt):
        response = _corrupt_first_item(request, response)
    if faults.repeat_page and request.query.get("page") and rng.random() < faults.repeat_page:
        response = _repeat_page_token(request, response)
    if request.method in WRITE_METHODS and faults.lost_write and response.status < 400 and rng.random() < faults.lost_write:
        return _drop(request, "lost-answer")
    chance = faults.truncate if request.method == "GET" else faults.truncate_write if request.method in WRITE_METHODS else 0.0
    if (
        chance
        and 200 <= response.status < 300
        and isinstance(response, web.Response)
        and response.body
        and rng.random() < chance
    ):
        request[FAULT_STATUS] = "truncated"
        body = bytes(response.body)  # type: ignore[arg-type]
        truncated = web.Response(status=response.status, body=body[: max(1, len(body) // 2)], content_type="application/json")
        return truncated
    return response


def _rewrite_json(response: web.StreamResponse) -> Any:
    """The JSON of a 200 answer, or None when it has none."""
    if not isinstance(response, web.Response) or response.status != 200 or not response.body:
        return None
    try:
        return json.loads(bytes(response.body))  # type: ignore[arg-type]
    except ValueError:
        return None


def _corrupt_first_item(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """Replace the first item of a list answer by an object without an id."""
    data = _rewrite_json(response)
    if not isinstance(data, dict) or not isinstance(data.get("items"), list) or not data["items"]:
        return response
    data["items"][0] = {"object": "unknown", "garbled": True}
    request[FAULT_STATUS] = "corrupted"
    return web.Response(status=200, body=json.dumps(data).encode(), content_type="application/json")


def _repeat_page_token(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """Answer a list page with `next.page` equal to the token it was asked with."""
    data = _rewrite_json(response)
    if not isinstance(data, dict) or "next" not in data:
        return response
    data["next"] = {"page": request.query["page"]}
    request[FAULT_STATUS] = "repeated-page"
    return web.Response(status=200, body=json.dumps(data).encode(), content_type="application/json")


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not _is_api(request):
        return await handler(request)
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("missing API token: send 'Authorization: Bearer <token>'")
    user_id = request.app[STORE].tokens.get(token.strip())
    if user_id is None:
        raise unauthorized("invalid API token")
    request[USER_ID] = user_id
    return await handler(request)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiProblem as problem:
        return problem.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, exc.reason or "error")
    except asyncio.CancelledError:
        raise
    except ConnectionResetError:  # the client went away while sending its body: nobody to answer
        request[FAULT_STATUS] = "client-gone"
        return web.Response(status=499)
    except Exception:  # an emulator bug must still answer with the documented body
        log.exception("emulator handler failed: %s %s", request.method, request.path)
        return error_response(500, "internal error")


# ----- answer shapes of the profile ---------------------------------------------------------


def etag(data: Any) -> str:
    """A short hash of an object's JSON: stable while the object does not change."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


_WALKED = (dict, list, tuple)
"""What `with_unknown_fields` looks inside: an object may be there."""


def with_unknown_fields(data: Any, profile: Profile) -> Any:
    """`data` with fields no client knows on every object (anything with an `object` key,
    at any depth); the etag is taken over the object as the handler rendered it."""
    if isinstance(data, list | tuple):  # a tuple is sent as a list: walked like one
        return [with_unknown_fields(item, profile) if isinstance(item, _WALKED) else item for item in data]
    if not isinstance(data, dict):
        return data
    # Leaves (most values) are taken as they are, without a call each.
    out = {key: with_unknown_fields(value, profile) if isinstance(value, _WALKED) else value for key, value in data.items()}
    if "object" in data:
        out["etag"] = etag(data)
        out["x-emulator"] = {"profile": profile.name}
    return out


def minimal_created(full: Any, body: Any) -> dict[str, Any]:
    """What a minimal create (or PATCH) answers: `object` and `id`, plus the top-level fields of the
    whole object whose names the request body also had."""
    if not isinstance(full, dict):
        return {}
    sent = body if isinstance(body, dict) else {}
    out = {key: full[key] for key in ("object", "id") if key in full}
    out.update({key: full[key] for key in sent if key in full and key not in out})
    return out


async def _request_json(request: web.Request) -> Any:
    """The request's JSON body (aiohttp keeps the bytes the handler read), or None."""
    raw = await request.read()
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return None


@web.middleware
async def shape_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Reshape `/v1/` JSON answers as the profile says: minimal creates, minimal PATCH
    answers (`{object, id}` plus the fields the body named, still 200), unknown fields.

    A middleware, not the render functions: the canonical dump renders with those and must
    not change with the profile."""
    response = await handler(request)
    profile = profile_of(request)
    if not _is_api(request) or not (profile.unknown_fields or profile.minimal_create or profile.minimal_patch):
        return response
    if not isinstance(response, web.Response) or response.content_type != "application/json" or not response.body:
        return response
    status = response.status
    # What the handler encoded, unless a body must be awaited first (a write: the store may
    # change meanwhile, and the bytes sent are what counts) or the answer was made otherwise.
    created = profile.minimal_create and status == 201
    patched = profile.minimal_patch and request.method == "PATCH" and status == 200
    data = None if created or patched else response.get(ANSWER_DATA)
    if data is None:
        try:
            data = json.loads(bytes(response.body))  # type: ignore[arg-type]
        except ValueError:
            return response
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-type", "content-length")}
    if created:
        data = minimal_created(data, await _request_json(request))
        status = 200
        headers.pop("Location", None)
    elif patched:
        data = minimal_created(data, await _request_json(request))
    if profile.unknown_fields and 200 <= status < 300:
        data = with_unknown_fields(data, profile)
        if isinstance(data, dict) and isinstance(data.get("items"), list):
            data["hasMore"] = bool(data.get("next"))
            data["requestId"] = uuid.uuid4().hex
    return web.Response(
        status=status, body=json.dumps(data, separators=(",", ":")).encode(), content_type="application/json", headers=headers
    )


def create_app(
    store: Store,
    *,
    profile: str = "default",
    rate_limit: float = 0.0,
    burst: float | None = None,
    page_cap: int | None = None,
    faults: dict[str, float] | None = None,
    fault_seed: int = 0,
    resettable: bool = False,
) -> web.Application:
    """An application serving `store` with the behaviour `profile` (see `syncd.emulator.profile`);
    `page_cap` None takes the profile's. Every knob can be changed later through `/_emulator`.
    `resettable` keeps a copy of the start (`reset_app`); off by default, since a benchmark's
    store can be large."""
    chosen = get_profile(profile)
    emu = new_knobs(store, rate_limit, burst, faults, fault_seed)
    app = web.Application(
        middlewares=[
            stats_middleware,
            rate_limit_middleware,
            fault_middleware,
            error_middleware,
            auth_middleware,
            shape_middleware,
        ],
        client_max_size=32 * 1024 * 1024,
    )
    app[STORE] = store
    app[EMULATOR] = emu
    app[PROFILE] = Played(chosen)
    app[CAPS] = ServerCaps(page_cap=page_cap or chosen.page_cap, page_token_ttl=chosen.page_token_ttl)
    if resettable:
        app[START] = Start(
            store=copy.deepcopy(store), profile=chosen, caps=copy.copy(app[CAPS]),
            rate=rate_limit, burst=burst, faults=dict(faults or {}), fault_seed=fault_seed,
        )
    for family in FAMILIES:
        app.add_routes(family.routes)
    app.add_routes(admin.routes)
    return app


def api_routes(app: web.Application) -> list[tuple[str, str]]:
    """(METHOD, PATH) of every API operation served, in a stable order."""
    seen: set[tuple[str, str]] = set()
    for route in app.router.routes():
        if route.method in ("HEAD", "OPTIONS", "*") or route.resource is None:
            continue
        path = route.resource.canonical
        if path.startswith(API_PREFIX):
            seen.add((route.method, path))
    return sorted(seen, key=lambda mp: (mp[1], mp[0]))


def dumps(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True)
