"""Issue 11, item 9: ids `.` and `..` are path segments like any other, never dot segments.

Before the fix `/v1/integrations/./installations` went out as `/v1/integrations/installations`
and a restore's `PUT /v1/orgs/ORG/openapi/..` as `PUT /v1/orgs/ORG/`: a call on another
resource than the one meant. Ids are now sent as `%2E` / `%2E%2E`, exactly as written, and the
emulator (aiohttp's router) matches them as ids, which it does not know: 404.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from syncd import catalog
from syncd.api import ApiError, NotFound, TenantClient
from syncd.config import RetryConfig
from syncd.copy.context import seg
from tests.conftest import ALL_TOKEN
from tests.hostile.hostile_server import HostileServer, answer

FAST = RetryConfig(max_attempts=2, initial_wait=0.01, max_wait=0.02)
DOTS = [".", "..", "...", "%2E", "a/..", "./a", ".%2E", "", "a b?c#d"]


def test_item09_fill_and_seg_never_make_dot_segments() -> None:
    assert catalog.fill("/v1/integrations/{integration}/installations", {"integration": "."}) == "/v1/integrations/%2E/installations"
    assert catalog.fill("/v1/orgs/{org}/openapi/{id}", {"org": "O", "id": ".."}) == "/v1/orgs/O/openapi/%2E%2E"
    assert seg(".") == "%2E" and seg("..") == "%2E%2E" and seg("...") == "..."
    assert catalog.write_path("openapi-spec", "create", {"org": seg("O"), "id": seg("..")}) == "/v1/orgs/O/openapi/%2E%2E"
    # A raw `..` given to write_path (a resolved reference) is made safe too.
    assert catalog.write_path("openapi-spec", "delete", {"org": "O", "id": ".."}) == "/v1/orgs/O/openapi/%2E%2E"
    for value in DOTS:
        filled = catalog.fill("/v1/orgs/{org}/x", {"org": value})
        segments = filled.split("/")
        assert len(segments) == 5 and segments[3] not in (".", ".."), (value, filled)
        assert seg(value) == segments[3]


async def test_item09_the_client_sends_dot_ids_as_written() -> None:
    """Raw paths as the server received them: nothing normalized away."""
    async with HostileServer() as hostile:
        hostile.on(r"/.*", answer(200, {"ok": True}), method=None)
        async with TenantClient("src", hostile.url + "/v1", "dots-token-1", retry=FAST) as api:
            await api.get_json(catalog.fill("/v1/integrations/{i}/installations", {"i": "."}))
            await api.request("PUT", catalog.write_path("openapi-spec", "create", {"org": seg("ORG"), "id": seg("..")}), json={})
            # Paths built without quoting (a reference resolved into a path) are made safe as well.
            await api.request("DELETE", "/v1/orgs/ORG/openapi/..")
            await api.get_json("/v1/orgs/./spaces", params={"page": "../x"})
            await api.get_json("/v1/orgs/ORG/openapi/%2E%2E/versions")
            await api.get_json("/v1/spaces/a b/content")
    assert hostile.seen == [
        ("GET", "/v1/integrations/%2E/installations"),
        ("PUT", "/v1/orgs/ORG/openapi/%2E%2E"),
        ("DELETE", "/v1/orgs/ORG/openapi/%2E%2E"),
        ("GET", "/v1/orgs/%2E/spaces?page=../x"),
        ("GET", "/v1/orgs/ORG/openapi/%2E%2E/versions"),
        ("GET", "/v1/spaces/a%20b/content"),
    ]


async def test_item09_the_emulator_answers_404_for_dot_ids(emulator: Any, org_id: str) -> None:
    """aiohttp's router matches `%2E%2E` as the id `..` (no traversal): unknown, 404 (or, for
    the PUT that creates a spec, an invalid slug); nothing else is read or written."""
    async with HostileServer(upstream=emulator.url) as hostile:
        async with TenantClient("src", hostile.url, ALL_TOKEN, retry=FAST) as api:
            with pytest.raises(NotFound) as integration:
                await api.get_json(catalog.fill("/v1/integrations/{i}/installations", {"i": "."}))
            with pytest.raises(ApiError) as put:
                await api.request("PUT", catalog.write_path("openapi-spec", "create", {"org": seg(org_id), "id": seg("..")}), json={"source": {"url": "https://example.com/a.yaml"}})
            with pytest.raises(NotFound):
                await api.request("DELETE", f"/v1/orgs/{org_id}/openapi/..")
            with pytest.raises(NotFound):
                await api.get_json(catalog.fill("/v1/orgs/{org}", {"org": ".."}))
            org = await api.get_json(f"/v1/orgs/{org_id}")
    assert "installations" not in integration.value.message, integration.value.message
    # A PUT that creates a spec: the slug `..` is refused as a slug (never a PUT on the org).
    assert put.value.status in (400, 404) and "slug" in put.value.message, put.value
    assert org["id"] == org_id
    assert hostile.paths()[:4] == [
        "/v1/integrations/%2E/installations",
        f"/v1/orgs/{org_id}/openapi/%2E%2E",
        f"/v1/orgs/{org_id}/openapi/%2E%2E",
        "/v1/orgs/%2E%2E",
    ]
    async with aiohttp.ClientSession() as session:
        async with session.get(emulator.url + "/_emulator/stats") as resp:
            stats = await resp.json()
    writes = [r for r in stats["routes"] if r["method"] in ("PUT", "POST", "PATCH", "DELETE")]
    assert writes and all(int(r["status"]) in (400, 404) and r["route"].endswith("/openapi/{specSlug}") for r in writes), writes


def test_item09_a_resolved_reference_is_one_segment_and_text_is_never_a_reference() -> None:
    """The write side puts target ids into paths quoted (an id `..` or `a/b` stays one segment),
    and a title that reads like a path reference stays that title."""
    from syncd.copy.model import IdMap
    from syncd.copy.ops import Ref, path_ref
    from syncd.copy.writer import Writer

    idmap = IdMap()
    idmap.put("space", "S1", "..", "created")
    idmap.put("space", "S2", "a/b", "created")
    writer = Writer(store=None, pair=None, run=0, idmap=idmap, target=None, source=None)  # type: ignore[arg-type]
    assert writer.resolve_path(f"/v1/spaces/{path_ref('space', 'S1')}/content") == "/v1/spaces/%2E%2E/content"
    assert writer.resolve_path(f"/v1/spaces/{path_ref('space', 'S2')}") == "/v1/spaces/a%2Fb"
    body = {"title": path_ref("space", "S1"), "parent": Ref("space", "S2")}
    assert writer.resolve(body) == {"title": "{ref:space:S1}", "parent": "a/b"}
