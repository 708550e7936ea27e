"""Admin routes outside `/v1` (tests, benchmarks and the demo only): statistics, faults,
rate limit, page size and page-token lifetime, clock, outages, a reset to the start, and the
canonical dump of an organization. No auth: the emulator is meant for loopback."""

from __future__ import annotations

import re

from aiohttp import web

from syncd.emulator import http as h
from syncd.emulator.canonical import dump_org
from syncd.emulator.errors import bad_request, conflict, not_found
from syncd.emulator.http import ADMIN_PREFIX
from syncd.emulator.knobs import EMULATOR, START, Emulator, reset_app
from syncd.emulator.listener import LISTENER, MAX_OUTAGE_SECONDS
from syncd.emulator.profile import PROFILE, get_profile, profile_of

OUTAGE_DELAY = 0.05
"""Seconds between answering `POST /_emulator/outage` and going down: the 202 is sent first."""
routes = web.RouteTableDef()


def _emulator(request: web.Request) -> Emulator:
    return request.app[EMULATOR]


@routes.get(ADMIN_PREFIX + "/stats")
async def get_stats(request: web.Request) -> web.Response:
    emu = _emulator(request)
    data = emu.stats.as_dict()
    data["rate_limited"] = emu.limiter.limited
    listener = request.app.get(LISTENER)
    data["outages"] = listener.outages if listener is not None else 0
    return h.json_answer(data)


@routes.delete(ADMIN_PREFIX + "/stats")
async def reset_stats(request: web.Request) -> web.Response:
    emu = _emulator(request)
    emu.stats.by_route.clear()
    emu.limiter.limited = 0
    return h.no_content()


@routes.get(ADMIN_PREFIX + "/faults")
async def get_faults(request: web.Request) -> web.Response:
    return h.json_answer(_emulator(request).faults.as_dict())


@routes.put(ADMIN_PREFIX + "/faults")
async def put_faults(request: web.Request) -> web.Response:
    """Set fault probabilities at run time, e.g. `{"5xx": 0.1, "drop": 0.05}`; `{}` keeps them."""
    emu = _emulator(request)
    body = await h.json_body(request)
    if body.pop("reset", False):
        emu.faults.__init__()  # type: ignore[misc]
    try:
        emu.faults.update(body)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    return h.json_answer(emu.faults.as_dict())


@routes.put(ADMIN_PREFIX + "/forbidden")
async def put_forbidden(request: web.Request) -> web.Response:
    """`{"patterns": [regex, ...]}`: API paths answered 403 from now on (`[]` clears); a
    pattern is matched against the path and against `METHOD path`."""
    _emulator(request).forbidden[:] = await _patterns(request)
    return h.json_answer({"patterns": _emulator(request).forbidden})


@routes.put(ADMIN_PREFIX + "/corrupt")
async def put_corrupt(request: web.Request) -> web.Response:
    """`{"patterns": [regex, ...]}`: list paths whose first item comes back malformed."""
    _emulator(request).corrupt[:] = await _patterns(request)
    return h.json_answer({"patterns": _emulator(request).corrupt})


async def _patterns(request: web.Request) -> list[str]:
    body = await h.json_body(request)
    patterns = body.get("patterns")
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise bad_request("patterns: must be an array of regular expressions")
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise bad_request(f"patterns: {pattern!r} is not a regular expression ({exc})") from None
    return patterns


@routes.put(ADMIN_PREFIX + "/rate-limit")
async def put_rate_limit(request: web.Request) -> web.Response:
    emu = _emulator(request)
    body = await h.json_body(request)
    rate, burst = body.get("rate", 0), body.get("burst")
    if not isinstance(rate, (int, float)) or rate < 0:
        raise bad_request("rate: must be a number >= 0 (0 disables the limit)")
    emu.limiter.configure(float(rate), float(burst) if burst else None)
    return h.json_answer({"rate": emu.limiter.rate, "burst": emu.limiter.burst})


@routes.put(ADMIN_PREFIX + "/page-cap")
async def put_page_cap(request: web.Request) -> web.Response:
    body = await h.json_body(request)
    cap = body.get("cap")
    if not isinstance(cap, int) or cap < 1:
        raise bad_request("cap: must be a positive integer")
    request.app[h.CAPS].page_cap = cap
    return h.json_answer({"cap": cap})


@routes.put(ADMIN_PREFIX + "/profile")
async def put_profile(request: web.Request) -> web.Response:
    """`{"name": "mixed:7"}`: the behaviour at the spec's open points from now on, the page
    cap and page-token lifetime included (one emulator serves many profiles in a test)."""
    body = await h.json_body(request)
    name = body.get("name")
    if not isinstance(name, str):
        raise bad_request("name: is required (default, divergent or mixed:SEED)")
    try:
        chosen = get_profile(name)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    request.app[PROFILE].profile = chosen
    caps = request.app[h.CAPS]
    caps.page_cap, caps.page_token_ttl = chosen.page_cap, chosen.page_token_ttl
    return h.json_answer({"profile": chosen.name, "cap": caps.page_cap, "ttl": caps.page_token_ttl})


@routes.put(ADMIN_PREFIX + "/page-tokens")
async def put_page_tokens(request: web.Request) -> web.Response:
    """`{"ttl": seconds}`: page tokens older than that are refused (400) from now on, including
    those already handed out; `{"ttl": null}`: they never expire. Lets tests expire tokens fast."""
    body = await h.json_body(request)
    if "ttl" not in body:
        raise bad_request("ttl: is required (seconds, or null for tokens that never expire)")
    ttl = body["ttl"]
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl < 0):
        raise bad_request("ttl: must be a number of seconds >= 0, or null")
    request.app[h.CAPS].page_token_ttl = None if ttl is None else float(ttl)
    return h.json_answer({"ttl": request.app[h.CAPS].page_token_ttl})


@routes.post(ADMIN_PREFIX + "/clock")
async def advance_clock(request: web.Request) -> web.Response:
    """`{"advance_seconds": S}`: S seconds pass at once for timestamps, rate-limit buckets (they
    refill) and page tokens (they age): tests make time pass without waiting."""
    body = await h.json_body(request)
    seconds = body.get("advance_seconds")
    if not isinstance(seconds, (int, float)) or seconds < 0:
        raise bad_request("advance_seconds: must be a number >= 0")
    store = h.store_of(request)
    store.advance_clock(float(seconds))
    return h.json_answer({"now": store.now_iso()})


@routes.post(ADMIN_PREFIX + "/outage")
async def post_outage(request: web.Request) -> web.Response:
    """`{"seconds": S}`: stop listening for S seconds (0 < S <= 3600), hanging up on every request
    meanwhile, then come back on the same URL with the same data. Answers 202 first."""
    body = await h.json_body(request)
    seconds = body.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_OUTAGE_SECONDS:
        raise bad_request(f"seconds: must be a number > 0 and <= {MAX_OUTAGE_SECONDS:g}")
    listener = request.app.get(LISTENER)
    if listener is None:
        raise conflict("outage: this app is not served through serve_app, there is no listener to stop")
    if listener.busy:
        raise conflict("outage: one is already scheduled or under way")
    listener.schedule_outage(float(seconds), delay=OUTAGE_DELAY)
    return h.json_answer({"down_for": float(seconds)}, status=202)


@routes.post(ADMIN_PREFIX + "/reset")
async def post_reset(request: web.Request) -> web.Response:
    """Everything as it was when the emulator started (`knobs.reset_app`); 409 unless it was
    started resettable (`syncd emulator serve --resettable`) or while an outage is under way."""
    if START not in request.app:
        raise conflict("reset: this emulator was not started resettable (syncd emulator serve --resettable)")
    listener = request.app.get(LISTENER)
    if listener is not None and listener.busy:
        raise conflict("reset: an outage is scheduled or under way")
    reset_app(request.app)
    return h.json_answer({"reset": True, "organizations": len(h.store_of(request).orgs)})


@routes.get(ADMIN_PREFIX + "/info")
async def info(request: web.Request) -> web.Response:
    """Users, their tokens and organizations: what a demo needs to point syncd at."""
    store = h.store_of(request)
    users = []
    for user_id, user in store.users.items():
        tokens = [t for t, u in store.tokens.items() if u == user_id]
        orgs = [{"id": o["id"], "title": o["title"]} for o in store.user_orgs(user_id)]
        users.append({"id": user_id, "email": user["email"], "tokens": tokens, "organizations": orgs})
    profile = profile_of(request).name
    return h.json_answer({"users": users, "organizations": len(store.orgs), "profile": profile})


@routes.get(ADMIN_PREFIX + "/orgs/{organizationId}/dump")
async def dump(request: web.Request) -> web.Response:
    store = h.store_of(request)
    org_id = request.match_info["organizationId"]
    if org_id not in store.orgs:
        raise not_found(f"organization {org_id!r} not found")
    return h.json_answer(dump_org(store, org_id))
