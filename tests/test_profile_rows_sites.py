"""The behaviour-profile row "section-move-reference" over loopback HTTP, and its probe.

The spec's move reference for a site section is a section (`{type: "site-section",
siteSection: <id>}`), a section group's is `{type: "site-section", id: <id>}`; whether a
top-level section may still be placed relative to a group is left open. `default` accepts
it; `divergent` (`strict_section_refs`) answers 400 `'position.before' does not reference a
sibling in the site` (or `.after`) and moves nothing. A group's move may name a section or a
group in both.

`PROBES` maps the row to a probe another session's table test imports: `probe(session, base,
token)` (base: the emulator's root URL without /v1) returns an observation that differs
between the two profiles.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from tests.conftest import ALL_TOKEN

PROBE_SPEC = "orgs=1,collections=2,spaces=4,pages=2,sites=1,empty_orgs=1"
PROFILE_NAMES = ("default", "divergent")


async def _call(session: aiohttp.ClientSession, token: str, method: str, url: str, body: Any = None) -> tuple[int, Any]:
    async with session.request(method, url, json=body, headers={"Authorization": f"Bearer {token}"}) as resp:
        raw = await resp.read()
        return resp.status, (await resp.json(content_type=None)) if raw else None


async def _made(session: aiohttp.ClientSession, token: str, url: str, body: Any) -> str:
    """The id of what a create made (201 whole or 200 minimal: the create-answer row)."""
    status, data = await _call(session, token, "POST", url, body)
    assert status in (200, 201), (url, status, data)
    return str(data["id"])


async def _section_ids(session: aiohttp.ClientSession, token: str, site_url: str) -> list[str]:
    """Sections in navigation order (grouped ones where their group stands)."""
    status, data = await _call(session, token, "GET", f"{site_url}/sections?limit=100")
    assert status == 200, data
    return [item["id"] for item in data["items"]]


async def _alternating_site(session: aiohttp.ClientSession, base: str, token: str) -> tuple[str, dict[str, str]]:
    """A new site of the first organization with Section A, Section C and Group B (holding
    Section B1), wherever the profile lands them; (the site's URL, ids by name)."""
    status, orgs = await _call(session, token, "GET", f"{base}/v1/orgs")
    assert status == 200, orgs
    org = orgs["items"][0]["id"]
    site = await _made(session, token, f"{base}/v1/orgs/{org}/sites", {"title": "Probe site"})
    site_url = f"{base}/v1/orgs/{org}/sites/{site}"
    ids = {name: await _made(session, token, f"{site_url}/sections", {"title": f"Section {name}", "spaceId": None}) for name in ("A", "C", "B1")}
    ids["B"] = await _made(session, token, f"{site_url}/section-groups", {"title": "Group B", "sections": [ids["B1"]]})
    return site_url, ids


async def probe_section_move_reference(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Move Section A `after` Group B, naming the group as a section's sibling: (status, the
    error message or None, whether A now comes right after the group's section).
    default: (200, None, True); divergent: (400, "'position.after' does not reference a
    sibling in the site", False)."""
    site_url, ids = await _alternating_site(session, base, token)
    body = {"position": {"after": {"type": "site-section", "siteSection": ids["B"]}}}
    status, answer = await _call(session, token, "POST", f"{site_url}/sections/{ids['A']}/move", body)
    order = await _section_ids(session, token, site_url)
    message = answer["error"]["message"] if status >= 400 and isinstance(answer, dict) and "error" in answer else None
    return status, message, order.index(ids["A"]) == order.index(ids["B1"]) + 1


PROBES: dict[str, Callable[[aiohttp.ClientSession, str, str], Awaitable[Any]]] = {
    "section-move-reference": probe_section_move_reference,
}


@pytest.fixture(params=PROFILE_NAMES)
async def served(request: pytest.FixtureRequest) -> AsyncIterator[tuple[aiohttp.ClientSession, str, str]]:
    """(session, emulator root URL, profile) for a generated emulator as a probe sees it."""
    store = Store(seed=7)
    generate(store, parse_spec(PROBE_SPEC), seed=7, all_token=ALL_TOKEN)
    async with serve_emulator(store, profile=request.param) as running, aiohttp.ClientSession() as session:
        yield session, running.url, request.param


async def test_probe_tells_the_profiles_apart(served: tuple[aiohttp.ClientSession, str, str]) -> None:
    session, base, profile = served
    seen = await PROBES["section-move-reference"](session, base, ALL_TOKEN)
    if profile == "divergent":
        assert seen == (400, "'position.after' does not reference a sibling in the site", False)
    else:
        assert seen == (200, None, True)


async def test_section_naming_a_group_before(served: tuple[aiohttp.ClientSession, str, str]) -> None:
    """`before` a group: refused with a JSON error body under divergent, nothing moves; done
    under default. Naming a section works in both."""
    session, base, profile = served
    site_url, ids = await _alternating_site(session, base, ALL_TOKEN)
    order = await _section_ids(session, ALL_TOKEN, site_url)
    body = {"position": {"before": {"type": "site-section", "siteSection": ids["B"]}}}
    status, answer = await _call(session, ALL_TOKEN, "POST", f"{site_url}/sections/{ids['C']}/move", body)
    if profile == "divergent":
        assert status == 400
        assert answer == {"error": {"code": 400, "message": "'position.before' does not reference a sibling in the site"}}
        assert await _section_ids(session, ALL_TOKEN, site_url) == order
    else:
        assert status == 200 and answer["id"] == ids["C"]
        now = await _section_ids(session, ALL_TOKEN, site_url)
        assert now.index(ids["C"]) + 1 == now.index(ids["B1"])
    body = {"position": {"before": {"type": "site-section", "siteSection": ids["A"]}}}
    status, _ = await _call(session, ALL_TOKEN, "POST", f"{site_url}/sections/{ids['C']}/move", body)
    assert status == 200
    now = await _section_ids(session, ALL_TOKEN, site_url)
    assert now.index(ids["C"]) + 1 == now.index(ids["A"])


async def test_a_group_may_name_a_section_or_a_group(served: tuple[aiohttp.ClientSession, str, str]) -> None:
    session, base, _ = served
    site_url, ids = await _alternating_site(session, base, ALL_TOKEN)
    other = await _made(session, ALL_TOKEN, f"{site_url}/sections", {"title": "Section D1", "spaceId": None})
    group_d = await _made(session, ALL_TOKEN, f"{site_url}/section-groups", {"title": "Group D", "sections": [other]})
    for side, sibling, follows in (("after", ids["A"], True), ("before", group_d, False), ("after", ids["C"], True)):
        body = {"position": {side: {"type": "site-section", "id": sibling}}}
        status, answer = await _call(session, ALL_TOKEN, "POST", f"{site_url}/section-groups/{ids['B']}/move", body)
        assert status == 200, answer
        now = await _section_ids(session, ALL_TOKEN, site_url)
        anchor = sibling if sibling != group_d else other
        assert (now.index(ids["B1"]) == now.index(anchor) + 1) if follows else (now.index(ids["B1"]) + 1 == now.index(anchor))


async def test_a_grouped_section_moves_among_its_group(served: tuple[aiohttp.ClientSession, str, str]) -> None:
    """Inside a group a section names a section of the group, in both profiles."""
    session, base, _ = served
    site_url, ids = await _alternating_site(session, base, ALL_TOKEN)
    second = await _made(session, ALL_TOKEN, f"{site_url}/sections", {"title": "Section B2", "spaceId": None})
    status, _ = await _call(session, ALL_TOKEN, "POST", f"{site_url}/section-groups/{ids['B']}/sections", {"sectionId": second})
    assert status == 200
    body = {"position": {"after": {"type": "site-section", "siteSection": second}}}
    status, answer = await _call(session, ALL_TOKEN, "POST", f"{site_url}/sections/{ids['B1']}/move", body)
    assert status == 200, answer
    now = await _section_ids(session, ALL_TOKEN, site_url)
    assert now.index(second) + 1 == now.index(ids["B1"])
