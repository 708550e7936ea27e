"""Behaviour every client depends on: paging, auth, errors, rate limits and faults."""

from __future__ import annotations

import json
import time

import aiohttp
import pytest

from syncd.emulator.faults import parse_faults
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store, parse_iso
from tests.conftest import ALL_TOKEN, Api


async def test_list_envelope_pages_until_next_is_absent(api: Api, org_id: str) -> None:
    everything = await api.all_items(f"/v1/orgs/{org_id}/spaces")
    seen: list[str] = []
    page = None
    pages = 0
    while True:
        status, data = await api.get(f"/v1/orgs/{org_id}/spaces", limit=3, page=page)
        assert status == 200
        assert data["count"] == len(everything)
        assert len(data["items"]) <= 3
        seen.extend(item["id"] for item in data["items"])
        pages += 1
        page = data.get("next", {}).get("page")
        if page is None:
            assert "next" not in data
            break
        assert isinstance(page, str) and page
    assert pages == -(-len(everything) // 3)
    assert seen == [item["id"] for item in everything]


async def test_limit_above_1000_and_bad_page_token_are_400(api: Api, org_id: str) -> None:
    status, data = await api.get(f"/v1/orgs/{org_id}/spaces", limit=1001)
    assert status == 400 and data["error"]["code"] == 400 and "limit" in data["error"]["message"]
    status, data = await api.get(f"/v1/orgs/{org_id}/spaces", page="not-a-token")
    assert status == 400 and "page" in data["error"]["message"]
    status, _ = await api.get(f"/v1/orgs/{org_id}/spaces", limit=1000)
    assert status == 200


async def test_server_side_page_cap_shrinks_pages(api: Api, org_id: str) -> None:
    status, _ = await api.put(api.base + "/_emulator/page-cap", {"cap": 2})
    assert status == 200
    status, data = await api.get(f"/v1/orgs/{org_id}/spaces", limit=1000)
    assert status == 200 and len(data["items"]) == 2 and data["next"]["page"]
    assert len(await api.all_items(f"/v1/orgs/{org_id}/spaces")) == data["count"]


async def test_missing_and_bad_tokens_are_401_with_error_body(api: Api, org_id: str) -> None:
    for client in (api.as_token(None), api.as_token("nope")):
        status, data = await client.get("/v1/orgs")
        assert status == 401
        assert data["error"]["code"] == 401 and data["error"]["message"]


async def test_invisible_and_unknown_ids_are_404(api: Api, generated) -> None:
    other_org = generated.org_ids[1]
    org1 = api.as_token("org1-token")
    status, data = await org1.get(f"/v1/orgs/{other_org}")
    assert status == 404 and data["error"]["code"] == 404
    status, data = await org1.get(f"/v1/orgs/{other_org}/spaces")
    assert status == 404
    status, orgs = await org1.get("/v1/orgs")
    assert [o["id"] for o in orgs["items"]] == [generated.org_ids[0]]
    status, _ = await api.get("/v1/spaces/doesnotexist")
    assert status == 404
    status, data = await api.get("/v1/no/such/route")
    assert status == 404 and data["error"]["code"] == 404


async def test_every_object_has_object_and_iso_timestamps(api: Api, org_id: str) -> None:
    status, org = await api.get(f"/v1/orgs/{org_id}")
    assert org["object"] == "organization"
    for space in await api.all_items(f"/v1/orgs/{org_id}/spaces"):
        assert space["object"] == "space"
        assert space["createdAt"].endswith("Z") and "T" in space["createdAt"]


async def _emulator_with(**options):
    store = Store(seed=1)
    generate(store, parse_spec("orgs=1,collections=1,spaces=3,pages=2"), seed=1, all_token=ALL_TOKEN)
    return serve_emulator(store, **options)


async def test_rate_limit_headers_and_429_with_retry_after() -> None:
    async with await _emulator_with(rate_limit=5, burst=3) as running, aiohttp.ClientSession() as session:
        api = Api(session, running.url, ALL_TOKEN)
        statuses = []
        for _ in range(6):
            status, data = await api.get("/v1/orgs")
            statuses.append(status)
            headers = api.last_headers
            assert {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} <= set(headers)
            if status == 429:
                assert int(headers["Retry-After"]) >= 1
                assert data["error"]["code"] == 429
        assert statuses[:3] == [200, 200, 200]
        assert 429 in statuses[3:]
        status, stats = await api.get(running.url + "/_emulator/stats")
        assert stats["rate_limited"] >= 1 and stats["by_status"]["429"] >= 1


async def test_faults_5xx_html_drop_truncate() -> None:
    async with await _emulator_with() as running, aiohttp.ClientSession() as session:
        api = Api(session, running.url, ALL_TOKEN)
        admin = running.url + "/_emulator/faults"
        await api.put(admin, {"5xx": 1.0})
        status, data = await api.get("/v1/orgs")
        assert status in (500, 503) and data["error"]["code"] == status
        await api.put(admin, {"5xx": 0, "html502": 1.0})
        status, data = await api.get("/v1/orgs")
        assert status == 502 and isinstance(data, str) and "<html>" in data
        await api.put(admin, {"html502": 0, "drop": 1.0})
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await api.get("/v1/orgs")
        await api.put(admin, {"drop": 0, "truncate": 1.0})
        status, data = await api.get("/v1/orgs")
        assert status == 200 and isinstance(data, str)  # not parseable JSON
        await api.put(admin, {"reset": True})
        status, data = await api.get("/v1/orgs")
        assert status == 200 and data["items"]


async def test_lost_write_takes_effect_but_loses_the_answer() -> None:
    async with await _emulator_with() as running, aiohttp.ClientSession() as session:
        api = Api(session, running.url, ALL_TOKEN)
        org_id = running.store.user_orgs(running.store.tokens[ALL_TOKEN])[0]["id"]
        before = len(await api.all_items(f"/v1/orgs/{org_id}/collections"))
        await api.put(running.url + "/_emulator/faults", {"lost": 1.0})
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Lost answer"})
        await api.put(running.url + "/_emulator/faults", {"lost": 0})
        titles = [c["title"] for c in await api.all_items(f"/v1/orgs/{org_id}/collections")]
        assert len(titles) == before + 1 and "Lost answer" in titles
        status, stats = await api.get(running.url + "/_emulator/stats")
        assert stats["by_status"].get("lost-answer") == 1


async def test_reset_brings_back_the_start_and_only_when_asked_for_at_start() -> None:
    """What tests sharing one emulator process rely on: after any writes and knob changes, a
    reset serves what the emulator served when it started, and new objects get the same ids."""
    async with await _emulator_with(rate_limit=50, resettable=True) as running, aiohttp.ClientSession() as session:
        api = Api(session, running.url, ALL_TOKEN)
        org_id = running.store.user_orgs(running.store.tokens[ALL_TOKEN])[0]["id"]
        dump_path = f"{running.url}/_emulator/orgs/{org_id}/dump"
        _, start_dump = await api.get(dump_path)
        _, start_info = await api.get(running.url + "/_emulator/info")
        status, first = await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Made before the reset"})
        assert status == 201
        await api.put(running.url + "/_emulator/faults", {"5xx": 0.5})
        await api.put(running.url + "/_emulator/profile", {"name": "divergent"})
        await api.put(running.url + "/_emulator/forbidden", {"patterns": ["/collections"]})
        await api.post(running.url + "/_emulator/clock", {"advance_seconds": 3600})
        await api.put(running.url + "/_emulator/page-cap", {"cap": 1})
        _, changed = await api.get(dump_path)
        assert changed != start_dump

        status, answer = await api.post(running.url + "/_emulator/reset")
        assert (status, answer) == (200, {"reset": True, "organizations": 1})
        _, faults = await api.get(running.url + "/_emulator/faults")
        assert not any(faults.values())
        _, stats = await api.get(running.url + "/_emulator/stats")
        assert stats["total"] == 0  # the admin calls are not counted, the API calls were forgotten
        _, info = await api.get(running.url + "/_emulator/info")
        assert info == start_info and info["profile"] == "default"
        assert (await api.get(dump_path))[1] == start_dump
        status, page = await api.get(f"/v1/orgs/{org_id}/spaces", limit=50)
        assert status == 200 and len(page["items"]) == 3  # the page cap of 1 is gone
        status, again = await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Made after the reset"})
        assert status == 201 and again["id"] == first["id"]  # the id generator went back too
        _, clock = await api.post(running.url + "/_emulator/clock", {"advance_seconds": 0})
        assert abs(parse_iso(clock["now"]).timestamp() - time.time()) < 600  # the clock too (it was an hour ahead)

    async with await _emulator_with() as running, aiohttp.ClientSession() as session:
        status, answer = await Api(session, running.url, ALL_TOKEN).post(running.url + "/_emulator/reset")
        assert status == 409 and "--resettable" in answer["error"]["message"]


def test_fault_spec_parsing_rejects_bad_input() -> None:
    assert parse_faults("5xx=0.1,drop=0.05,latency=20") == {"5xx": 0.1, "drop": 0.05, "latency": 20.0}
    for bad in ("5xx", "nope=0.1", "drop=2", "drop=x"):
        with pytest.raises(ValueError):
            parse_faults(bad)


def generated_store(seed: int) -> Store:
    store = Store(seed=seed)
    generate(store, parse_spec("orgs=2,spaces=5,pages=3"), seed=seed)
    return store


def canonical_store(store: Store) -> str:
    """Everything the store serves, as canonical JSON: users, tokens, organizations,
    memberships, every record of every kind with all its fields, sibling orders, counters."""
    content = {
        "users": store.users,
        "tokens": store.tokens,
        "orgs": store.orgs,
        "members": store.members,
        "tables": store.tables,
        "orders": {"/".join(key): order for key, order in store.orders.items()},
        "counters": store.counters,
    }
    return json.dumps(content, sort_keys=True, ensure_ascii=False)


def without_ids(store: Store) -> str:
    """`canonical_store` with every id replaced by one placeholder: what is left is content
    (titles, markdown, fields, timestamps, the shape of the tree), not names."""
    text = canonical_store(store)
    ids = set(store.users) | set(store.orgs) | {i for rows in store.tables.values() for i in rows}
    ids |= {i for order in store.orders.values() for i in order}
    for known in sorted(ids, key=len, reverse=True):
        text = text.replace(json.dumps(known), '"<id>"')
    return text


def test_generator_is_deterministic() -> None:
    first, again, other = generated_store(3), generated_store(3), generated_store(4)
    assert canonical_store(first) == canonical_store(again)
    assert without_ids(first) != without_ids(other), "another seed must change content, not only ids"
    assert without_ids(first).count('"<id>"') > 100  # the ids were really found and replaced
    assert '"markdown": "# ' in canonical_store(first)  # page content is part of what is compared


def test_generator_spec_errors() -> None:
    with pytest.raises(ValueError, match="unknown"):
        parse_spec("planets=3")
    with pytest.raises(ValueError, match="whole number"):
        parse_spec("spaces=many")


async def test_repeated_page_token_fault() -> None:
    async with await _emulator_with(page_cap=1, faults={"repeat_page": 1.0}) as running, aiohttp.ClientSession() as session:
        api = Api(session, running.url, ALL_TOKEN)
        org_id = running.store.user_orgs(running.store.tokens[ALL_TOKEN])[0]["id"]
        status, first = await api.get(f"/v1/orgs/{org_id}/spaces")
        token = first["next"]["page"]
        status, second = await api.get(f"/v1/orgs/{org_id}/spaces", page=token)
        assert status == 200 and second["next"]["page"] == token
