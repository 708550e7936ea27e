"""Paging: every item exactly once, whatever the page size or token format; never a loop.

The emulator plays every server it can (page cap, repeated tokens, expired tokens, refusals);
the tiny servers below play what it cannot, each saying what."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from aiohttp import web

from syncd.api import (
    MAX_RESTARTS,
    ApiError,
    AuthError,
    MalformedResponse,
    NotFound,
    Paginator,
    PagingError,
    TenantClient,
    check_envelope,
    next_token,
)
from syncd.config import RetryConfig
from syncd.errors import SyncdError
from tests.conftest import ALL_TOKEN
from tests.test_api_client import admin, app_with, route_count, serve

FAST = RetryConfig(max_attempts=3, initial_wait=0.001, max_wait=0.005)
TOKEN = "paging-secret-token"


def client(url: str, token: str = TOKEN, **options: Any) -> TenantClient:
    options.setdefault("retry", FAST)
    return TenantClient("src", url, token, **options)


async def collect(api: TenantClient, path: str, **options: Any) -> tuple[list[Any], int]:
    """(all items, number of pages)."""
    items: list[Any] = []
    pages = 0
    async for page in api.paginate(path, **options):
        items.extend(page)
        pages += 1
    return items, pages


# ----------------------------------------------------------------------------- the emulator


async def test_every_item_exactly_once_with_a_small_server_page_cap(emulator: Any, org_id: str) -> None:
    async with client(emulator.url, ALL_TOKEN) as api:
        expected = {
            path: await collect(api, path)
            for path in (f"/v1/orgs/{org_id}/collections", f"/v1/orgs/{org_id}/members", f"/v1/orgs/{org_id}/spaces")
        }
        await admin(emulator, "PUT", "/page-cap", {"cap": 3})
        for path, (items, pages) in expected.items():
            assert pages == 1
            capped, capped_pages = await collect(api, path)
            ids = [item["id"] if "id" in item else item["user"]["id"] for item in capped]
            assert len(ids) == len(set(ids)) == len(items)
            assert sorted(map(repr, capped)) == sorted(map(repr, items))
            assert capped_pages == math.ceil(len(items) / 3) > 1


async def test_answers_that_are_not_list_envelopes_go_through_get_json(emulator: Any, org_id: str) -> None:
    async with client(emulator.url, ALL_TOKEN) as api:
        space = (await collect(api, f"/v1/orgs/{org_id}/spaces"))[0][0]
        sso = await api.get_json(f"/v1/orgs/{org_id}/sso")
        pages = await api.get_json(f"/v1/spaces/{space['id']}/content/pages")
        fields = await api.get_json(f"/v1/spaces/{space['id']}/custom-fields")
        # `{items}` without next or count is still a (one-page) list envelope.
        sso_items, sso_pages = await collect(api, f"/v1/orgs/{org_id}/sso")
    assert isinstance(sso["items"], list) and "next" not in sso
    assert (sso_items, sso_pages) == (sso["items"], 1)
    assert isinstance(pages["pages"], list) and isinstance(fields, list)


# ----------------------------------------------------------------------------- tiny servers


def list_server(tokens: dict[str | None, tuple[list[Any], Any]], seen: list[dict[str, str]]) -> web.Application:
    """Answers `GET /v1/things` from `tokens`: page token -> (items, next value), and records each
    query. For what the emulator cannot play: tokens of other formats, cycles, the query sent."""

    async def things(request: web.Request) -> web.Response:
        seen.append(dict(request.query))
        items, nxt = tokens[request.query.get("page")]
        body: dict[str, Any] = {"items": items, "count": 99}
        if nxt is not None:
            body["next"] = nxt
        return web.json_response(body)

    return app_with(("GET", "/v1/things", things))


@pytest.mark.parametrize(
    "first, second",
    [
        (2, 3),  # numbers
        ("https://api.example.invalid/v1/things?page=2", "/v1/things?page=3&x=%20y"),  # URLs
        ("  spaces and ü ", "a+b/c=="),  # anything a server may call a token
    ],
)
async def test_page_tokens_of_any_format_are_sent_back_verbatim(first: Any, second: Any) -> None:
    seen: list[dict[str, str]] = []
    tokens = {
        None: ([{"id": 1}, {"id": 2}], {"page": first}),
        str(first): ([{"id": 3}], {"page": second}),
        str(second): ([], {"page": None}),
    }
    async with serve(list_server(tokens, seen)) as url:
        async with client(url) as api:
            items, pages = await collect(api, "/v1/things", params={"filter": "x", "limit": 5})
    assert [item["id"] for item in items] == [1, 2, 3] and pages == 3
    assert [q.get("page") for q in seen] == [None, str(first), str(second)]
    assert all(q["limit"] == "5" and q["filter"] == "x" for q in seen)


async def test_paging_asks_for_the_largest_pages_by_default() -> None:
    # A tiny server: the emulator does not report the query a client sent.
    seen: list[dict[str, str]] = []
    async with serve(list_server({None: ([{"id": 1}], None)}, seen)) as url:
        async with client(url) as api:
            assert await collect(api, "/v1/things") == ([{"id": 1}], 1)
    assert seen == [{"limit": "1000"}]


async def test_a_repeated_page_token_stops_the_listing_fast(emulator: Any, org_id: str) -> None:
    await admin(emulator, "PUT", "/page-cap", {"cap": 1})
    await admin(emulator, "PUT", "/faults", {"repeat_page": 1.0})  # every page after the first
    path = f"/v1/orgs/{org_id}/spaces"
    async with client(emulator.url, ALL_TOKEN) as api:
        with pytest.raises(PagingError) as caught:
            await collect(api, path)
    error = caught.value
    assert isinstance(error, ApiError) and isinstance(error, SyncdError)
    assert "repeated a page token" in str(error)
    assert (error.tenant, error.method, error.path, error.status) == ("src", "GET", path, None)
    assert ALL_TOKEN not in str(error) and ALL_TOKEN not in repr(error)
    stats = await admin(emulator, "GET", "/stats")
    assert route_count(stats, "GET", "/v1/orgs/{organizationId}/spaces") == {"200": 1, "repeated-page": 1}


async def test_a_token_cycle_is_detected() -> None:
    # A tiny server: the emulator's repeat_page fault repeats one token, it makes no cycle.
    seen: list[dict[str, str]] = []
    tokens = {
        None: ([{"id": 1}], {"page": "a"}),
        "a": ([{"id": 2}], {"page": "b"}),
        "b": ([{"id": 3}], {"page": "a"}),
    }
    async with serve(list_server(tokens, seen)) as url, client(url) as api:
        got: list[Any] = []
        with pytest.raises(PagingError):
            async for page in api.paginate("/v1/things"):
                got.extend(page)
    assert len(seen) == 3 and got == [{"id": 1}, {"id": 2}]


async def test_the_page_guard_stops_a_listing_longer_than_allowed(emulator: Any, org_id: str) -> None:
    await admin(emulator, "PUT", "/page-cap", {"cap": 1})  # one space a page: 8 pages
    path = f"/v1/orgs/{org_id}/spaces"
    async with client(emulator.url, ALL_TOKEN, max_pages=8) as api:
        assert len((await collect(api, path))[0]) == 8
    await admin(emulator, "DELETE", "/stats")
    async with client(emulator.url, ALL_TOKEN, max_pages=7) as api:
        with pytest.raises(PagingError, match="more than 7 pages"):
            await collect(api, path)
        with pytest.raises(PagingError, match="more than 3 pages"):
            await collect(api, path, max_pages=3)
    stats = await admin(emulator, "GET", "/stats")
    assert route_count(stats, "GET", "/v1/orgs/{organizationId}/spaces") == {"200": 7 + 3}


@pytest.mark.parametrize(
    "body",
    [
        {"things": []},
        {"items": {"a": 1}},
        {"items": [], "next": {"page": ["x"]}},
        [{"id": 1}],
    ],
)
async def test_a_malformed_envelope_is_retried_then_raised(body: Any) -> None:
    # A tiny server: the emulator's corrupt fault garbles an item, never the envelope itself.
    calls = 0

    async def bad(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.json_response(body)

    async with serve(app_with(("GET", "/v1/bad", bad))) as url:
        async with client(url) as api:
            with pytest.raises(MalformedResponse) as caught:
                await collect(api, "/v1/bad")
            assert await api.get_json("/v1/bad") == body  # without the envelope check it is fine
    assert calls == FAST.max_attempts + 1
    assert caught.value.attempts == FAST.max_attempts and "unexpected answer" in str(caught.value)
    assert api.stats.malformed == FAST.max_attempts and api.stats.retries == FAST.max_attempts - 1


# ----------------------------------------------------------------------------- expiring page tokens


def expiring_server(status: int, seen: list[str | None], refusals: int = 1) -> web.Application:
    """`GET /v1/things` in two pages whose token `t1` is refused with `status` `refusals` times:
    404 and 410, which other services answer for a stale token (the emulator's is a 400)."""
    refused = 0

    async def things(request: web.Request) -> web.Response:
        nonlocal refused
        page = request.query.get("page")
        seen.append(page)
        if page is None:
            return web.json_response({"items": [{"id": 1}, {"id": 2}], "next": {"page": "t1"}})
        if refused < refusals:
            refused += 1
            return web.json_response({"error": {"code": status, "message": "anything at all"}}, status=status)
        return web.json_response({"items": [{"id": 3}]})

    return app_with(("GET", "/v1/things", things))


@pytest.mark.parametrize("status", [404, 410])
async def test_a_refused_page_token_restarts_the_listing_from_the_first_page(status: int) -> None:
    seen: list[str | None] = []
    events: list[Any] = []
    async with serve(expiring_server(status, seen)) as url, client(url) as api:
        async for page in api.paginate("/v1/things", on_restart=lambda: events.append("restart")):
            events.append([item["id"] for item in page])
    assert events == [[1, 2], "restart", [1, 2], [3]]
    assert seen == [None, "t1", None, "t1"] and api.stats.paging_restarts == 1


async def test_an_async_on_restart_is_awaited_before_the_first_page_again() -> None:
    seen: list[str | None] = []
    items: list[int] = []

    async def reset() -> None:
        await asyncio.sleep(0)
        items.clear()

    async with serve(expiring_server(410, seen, refusals=2)) as url, client(url) as api:
        async for page in api.paginate("/v1/things", on_restart=reset):
            items.extend(item["id"] for item in page)
    assert items == [1, 2, 3] and api.stats.paging_restarts == 2


async def test_a_refused_first_page_and_other_statuses_are_not_restarts(emulator: Any, org_id: str) -> None:
    async with client(emulator.url, ALL_TOKEN) as api:
        with pytest.raises(NotFound):
            await collect(api, "/v1/orgs/no-such-org/spaces", on_restart=lambda: pytest.fail("restarted"))
        await admin(emulator, "PUT", "/page-cap", {"cap": 2})
        path = f"/v1/orgs/{org_id}/spaces"
        pages = 0
        with pytest.raises(AuthError):
            async for _ in api.paginate(path, on_restart=lambda: pytest.fail("restarted")):
                pages += 1  # the next page is refused with a 403: not a stale token
                await admin(emulator, "PUT", "/forbidden", {"patterns": [f"^GET {path}$"]})
        assert pages == 1 and api.stats.paging_restarts == 0
    stats = await admin(emulator, "GET", "/stats")
    assert route_count(stats, "GET", "/v1/orgs/{organizationId}/spaces") == {"404": 1, "200": 1, "forbidden": 1}


async def test_expired_emulator_tokens_restart_the_listing_and_every_item_comes_once(emulator: Any, org_id: str) -> None:
    path = f"/v1/orgs/{org_id}/spaces"
    async with client(emulator.url, ALL_TOKEN) as api:
        expected, _ = await collect(api, path)
        await admin(emulator, "PUT", "/page-cap", {"cap": 3})
        items: list[Any] = []
        pages = 0

        async def reset() -> None:
            await admin(emulator, "PUT", "/page-tokens", {"ttl": None})
            items.clear()

        async for page in api.paginate(path, on_restart=reset):
            pages += 1
            items.extend(page)
            if pages == 1:  # the token just handed out is a minute old when it is used
                await admin(emulator, "PUT", "/page-tokens", {"ttl": 30})
                await admin(emulator, "POST", "/clock", {"advance_seconds": 60})
    assert api.stats.paging_restarts == 1 and pages == 1 + math.ceil(len(expected) / 3)
    assert [item["id"] for item in items] == [item["id"] for item in expected]


async def test_emulator_tokens_that_always_expire_fail_the_listing_after_three_restarts(emulator: Any, org_id: str) -> None:
    await admin(emulator, "PUT", "/page-cap", {"cap": 2})
    await admin(emulator, "PUT", "/page-tokens", {"ttl": 0.05})
    # Every answer at least 100 ms late: each token is older than 50 ms when used, however fast.
    await admin(emulator, "PUT", "/faults", {"latency": 100})
    path = f"/v1/orgs/{org_id}/collections"
    restarts = 0

    def count() -> None:
        nonlocal restarts
        restarts += 1

    async with client(emulator.url, ALL_TOKEN) as api:
        with pytest.raises(PagingError, match="gave up") as caught:
            await collect(api, path, on_restart=count)
    assert restarts == api.stats.paging_restarts == MAX_RESTARTS == 3
    assert api.stats.requests == 2 * (MAX_RESTARTS + 1)
    error = caught.value
    assert error.path == path and path in str(error) and "400" in str(error) and error.tenant == "src"
    assert isinstance(error.__cause__, ApiError) and error.__cause__.status == 400
    stats = await admin(emulator, "GET", "/stats")
    assert route_count(stats, "GET", "/v1/orgs/{organizationId}/collections") == {"200": 4, "400": 4}


# ----------------------------------------------------------------------------- the pure part


def test_next_token_reads_every_plausible_shape() -> None:
    assert next_token({"items": []}) is None
    assert next_token({"next": None}) is None
    assert next_token({"next": {}}) is None
    assert next_token({"next": {"page": ""}}) is None
    assert next_token({"next": {"page": None}}) is None
    assert next_token({"next": {"page": "abc"}}) == "abc"
    assert next_token({"next": {"page": 7}}) == "7"
    assert next_token({"next": {"page": 7.0}}) == "7"
    assert next_token({"next": "raw"}) == "raw"
    for bad in ({"page": True}, {"page": {"x": 1}}, {"page": [1]}):
        with pytest.raises(TypeError):
            next_token({"next": bad})


def test_check_envelope_names_the_problem() -> None:
    check_envelope({"items": []})
    check_envelope({"items": [1], "next": {"page": "x"}, "count": 1})
    with pytest.raises(ValueError, match="no 'items'"):
        check_envelope({"pages": []})
    with pytest.raises(TypeError, match="must be an array"):
        check_envelope({"items": None})
    with pytest.raises(TypeError, match="expected an object"):
        check_envelope([])


def test_paginator_holds_the_state_and_does_no_io() -> None:
    pager = Paginator(path="/v1/x", limit=50, max_pages=3)
    assert pager.params({"page": "ignored", "q": 1}) == {"limit": 50, "q": 1}
    assert pager.update({"items": [1, 2], "next": {"page": "t1"}}) == [1, 2]
    assert pager.params() == {"limit": 50, "page": "t1"} and not pager.done
    assert pager.update({"items": [3], "next": {"page": "t2"}}) == [3]
    with pytest.raises(PagingError, match="more than 3 pages"):
        pager.update({"items": [4], "next": {"page": "t3"}})
    assert pager.done and (pager.pages, pager.items) == (3, 4)

    last = Paginator(path="/v1/x")
    assert last.update({"items": [], "next": {"page": "t"}}) == []
    assert last.update({"items": [9]}) == [9] and last.done and last.token is None
