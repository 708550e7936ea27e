"""Probes for the first eight behaviour-profile rows (`syncd.emulator.profile.ROWS`): one real
HTTP observation per open point, which `default` and `divergent` answer differently.

`tests/test_profile_rows.py` runs each probe against a freshly generated emulator in
`default`, `divergent` and `mixed:SEED`. A probe gets `(session, base, token)` (base: the
emulator's root URL, without `/v1`) and returns a JSON-like observation. Each observation
depends on its own row alone: probes work in objects they create, place them with documented
moves where a landing place would otherwise leak in, leave out ids and timestamps, and
ignore the fields of other rows (unknown fields, what a create answers), so that under
`mixed:SEED` a row's observation is `default`'s or `divergent`'s whatever the other rows play.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

Probe = Callable[[aiohttp.ClientSession, str, str], Awaitable[Any]]

UNKNOWN_KEYS = ("etag", "x-emulator", "hasMore", "requestId")
"""Keys the spec does not give (the `unknown-fields` row's extras); ignored by the other probes."""


class Client:
    """Just enough of an API client for a probe: JSON in, (status, JSON) out."""

    def __init__(self, session: aiohttp.ClientSession, base: str, token: str) -> None:
        self.session, self.base, self.token = session, base.rstrip("/"), token
        self.headers: Any = {}

    async def call(self, method: str, path: str, body: Any = None, **params: Any) -> tuple[int, Any]:
        query = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items() if v is not None}
        async with self.session.request(
            method, self.base + path, json=body, params=query, headers={"Authorization": f"Bearer {self.token}"}
        ) as resp:
            self.headers = resp.headers
            raw = await resp.read()
            return resp.status, (await resp.json(content_type=None)) if raw else None

    async def ok(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        status, data = await self.call(method, path, body, **params)
        assert 200 <= status < 300, (method, path, status, data)
        return data

    async def create(self, path: str, body: Any = None, method: str = "POST") -> str:
        """Id of what a create made, whatever the create answers (201 whole or 200 minimal)."""
        return str((await self.ok(method, path, body))["id"])

    async def items(self, path: str, **params: Any) -> list[Any]:
        """Every item of a list, following `next.page` (whatever the page size)."""
        found: list[Any] = []
        page = None
        while True:
            data = await self.ok("GET", path, limit=1000, page=page, **params)
            found.extend(data["items"])
            page = (data.get("next") or {}).get("page")
            if not page:
                return found

    async def org(self) -> str:
        """The generated organization that holds spaces (the other one is empty)."""
        for org in await self.items("/v1/orgs"):
            if (await self.ok("GET", f"/v1/orgs/{org['id']}/spaces", limit=1))["count"]:
                return str(org["id"])
        raise AssertionError("no organization with spaces")

    async def move_to_end(self, space: str, parent: str) -> None:
        """A documented move (no `position`: to the end), to place a space whatever the
        `new-object-place` row made of it."""
        await self.ok("POST", f"/v1/spaces/{space}/move", {"parent": parent})


async def probe_duplicate(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Title of a duplicate and where it lands among [original, sibling]: right after the
    original, or first."""
    api = Client(session, base, token)
    org = await api.org()
    box = await api.create(f"/v1/orgs/{org}/collections", {"title": "Duplicate probe"})
    alpha = await api.create(f"/v1/orgs/{org}/spaces", {"title": "Alpha", "parent": box})
    beta = await api.create(f"/v1/orgs/{org}/spaces", {"title": "Beta", "parent": box})
    await api.move_to_end(beta, box)  # [Alpha, Beta] whichever end new spaces land at
    copy = await api.create(f"/v1/spaces/{alpha}/duplicate")
    names = {alpha: "original", beta: "sibling", copy: "copy"}
    return [(names[s["id"]], s["title"]) for s in await api.items(f"/v1/collections/{box}/spaces")]


async def probe_new_object_place(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Titles of a collection's spaces, created one after the other: the newest last or first."""
    api = Client(session, base, token)
    org = await api.org()
    box = await api.create(f"/v1/orgs/{org}/collections", {"title": "Landing probe"})
    for title in ("First made", "Second made", "Third made"):
        await api.create(f"/v1/orgs/{org}/spaces", {"title": title, "parent": box})
    return [s["title"] for s in await api.items(f"/v1/collections/{box}/spaces")]


async def probe_derived_paths(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Paths a site derives for sections whose titles make the same slug, and for a title
    with no letters at all."""
    api = Client(session, base, token)
    org = await api.org()
    site = await api.create(f"/v1/orgs/{org}/sites", {"title": "Paths probe"})
    for title in ("Hello, World", "hello   world", "!!"):
        await api.create(f"/v1/orgs/{org}/sites/{site}/sections", {"title": title, "spaceId": None})
    return sorted(s["path"] for s in await api.items(f"/v1/orgs/{org}/sites/{site}/sections"))


async def probe_list_order(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Order of a list the spec leaves unordered (custom fields), made out of title order."""
    api = Client(session, base, token)
    org = await api.org()
    made = ["zz-probe", "mm-probe", "aa-probe"]
    for name in made:
        await api.create(f"/v1/orgs/{org}/custom-fields", {"name": name, "type": "text"})
    return [f["name"] for f in await api.items(f"/v1/orgs/{org}/custom-fields") if f["name"] in made]


async def probe_paging(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """How many items a `limit=1000` page holds when there are more than 100, and what a page
    token answers once 31 s have passed on the emulator's clock (no real waiting)."""
    api = Client(session, base, token)
    org = await api.org()
    await asyncio.gather(*(api.create(f"/v1/orgs/{org}/custom-fields", {"name": f"paging-{n:03}", "type": "text"}) for n in range(101)))
    page = await api.ok("GET", f"/v1/orgs/{org}/custom-fields", limit=1000)
    first = await api.ok("GET", f"/v1/orgs/{org}/spaces", limit=1)
    token_ = first["next"]["page"]
    await api.ok("POST", "/_emulator/clock", {"advance_seconds": 31})
    status, later = await api.call("GET", f"/v1/orgs/{org}/spaces", limit=1, page=token_)
    return {
        "page": len(page["items"]),
        "more": "next" in page,
        "aged token": status if status != 200 else "accepted",
        "message": later["error"]["message"] if status != 200 else None,
    }


async def probe_unknown_fields(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Keys the spec does not give, on an object, on a listed object and on a list envelope
    (their names only: `x-emulator` names the profile, which differs under `mixed:SEED`)."""
    api = Client(session, base, token)
    org = await api.org()
    space = (await api.ok("GET", f"/v1/orgs/{org}/spaces", limit=1))["items"][0]
    whole = await api.ok("GET", f"/v1/spaces/{space['id']}")
    envelope = await api.ok("GET", f"/v1/orgs/{org}/collections", limit=1)
    nested = envelope["items"][0] if envelope["items"] else {}
    return {
        "object": sorted(set(whole) & set(UNKNOWN_KEYS)),
        "item": sorted(set(nested) & set(UNKNOWN_KEYS)),
        "envelope": sorted(set(envelope) & set(UNKNOWN_KEYS)),
    }


async def probe_first_section(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Which site-spaces a site's first section holds: the root ones it found, or only its own
    and those added after it."""
    api = Client(session, base, token)
    org = await api.org()
    spaces = {title: await api.create(f"/v1/orgs/{org}/spaces", {"title": title}) for title in ("Root A", "Root B", "Own C", "Later D")}
    site = await api.create(f"/v1/orgs/{org}/sites", {"title": "Sections probe", "spaces": [spaces["Root A"], spaces["Root B"]]})
    section = await api.create(f"/v1/orgs/{org}/sites/{site}/sections", {"title": "First", "spaceId": spaces["Own C"]})
    await api.create(f"/v1/orgs/{org}/sites/{site}/site-spaces", {"spaceId": spaces["Later D"]})
    titles = {v: k for k, v in spaces.items()}
    rows = await api.items(f"/v1/orgs/{org}/sites/{site}/site-spaces")
    return sorted((titles[r["space"]["id"]], r.get("section") == section) for r in rows)


async def probe_create_answer(session: aiohttp.ClientSession, base: str, token: str) -> Any:
    """Status, `Location` and shape of what a create answers (a collection, a site section)."""
    api = Client(session, base, token)
    org = await api.org()
    seen = []
    site = await api.create(f"/v1/orgs/{org}/sites", {"title": "Answer probe"})
    for path, body in (
        (f"/v1/orgs/{org}/collections", {"title": "Answered"}),
        (f"/v1/orgs/{org}/sites/{site}/sections", {"title": "Answered", "spaceId": None}),
    ):
        status, data = await api.call("POST", path, body)
        keys = set(data) - set(UNKNOWN_KEYS)
        seen.append({
            "status": status,
            "location": "Location" in api.headers,
            "only what was sent": keys <= {"object", "id"} | set(body),
        })
    return seen


PROBES: dict[str, Probe] = {
    "duplicate": probe_duplicate,
    "new-object-place": probe_new_object_place,
    "derived-paths": probe_derived_paths,
    "list-order": probe_list_order,
    "paging": probe_paging,
    "unknown-fields": probe_unknown_fields,
    "first-section": probe_first_section,
    "create-answer": probe_create_answer,
}
"""Row name -> probe, for the first eight rows of `ROWS`."""
