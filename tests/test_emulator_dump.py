"""The canonical dump: two organizations built alike compare equal, whatever their ids."""

from __future__ import annotations

import aiohttp

from syncd.emulator.canonical import comparable
from syncd.emulator.generate import DEFAULTS, generate
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from tests.conftest import ALL_TOKEN, Api


async def _build(api: Api, org: str) -> dict[str, str]:
    """The same small organization, built through the API."""
    _, coll = await api.post(f"/v1/orgs/{org}/collections", {"title": "Guides"})
    _, inner = await api.post(f"/v1/orgs/{org}/collections", {"title": "Inner", "parent": coll["id"]})
    ids = {"coll": coll["id"], "inner": inner["id"]}
    for title, parent in (("One", coll["id"]), ("Two", coll["id"]), ("Root", None)):
        _, space = await api.post(f"/v1/orgs/{org}/spaces", {"title": title, "parent": parent})
        ids[title] = space["id"]
    _, site = await api.post(f"/v1/orgs/{org}/sites", {"title": "Docs site"})
    _, section = await api.post(f"/v1/orgs/{org}/sites/{site['id']}/sections", {"spaceId": ids["One"], "title": "Start"})
    await api.post(f"/v1/orgs/{org}/sites/{site['id']}/site-spaces", {"spaceId": ids["Two"], "sectionId": section["id"]})
    await api.put(f"/v1/orgs/{org}/teams", {"title": "Writers"})
    await api.post(f"/v1/orgs/{org}/custom-fields", {"name": "owner", "type": "text", "title": "Owner"})
    await api.patch(f"/v1/orgs/{org}", {"emailDomains": ["docs.example.com"], "title": f"Org {org}"})
    return ids


def _content(dump: dict) -> dict:
    """All but the members: each organization has its own owner, which no copy changes."""
    return {kind: rows for kind, rows in comparable(dump).items() if kind != "member"}


async def test_organizations_built_alike_dump_alike_and_differences_show() -> None:
    params = {key: 0 for key in DEFAULTS} | {"orgs": 2}
    store = Store(seed=5)
    result = generate(store, params, seed=5, all_token=ALL_TOKEN)
    first, second = result.org_ids
    async with serve_emulator(store) as running, aiohttp.ClientSession() as session:
        api = Api(session, running.url, ALL_TOKEN)
        ids_a = await _build(api, first)
        ids_b = await _build(api, second)
        assert ids_a["One"] != ids_b["One"]

        async def dump(org: str) -> dict:
            status, data = await api.get(f"{running.url}/_emulator/orgs/{org}/dump")
            assert status == 200
            return data

        dump_a, dump_b = await dump(first), await dump(second)
        assert _content(dump_a) == _content(dump_b)
        assert comparable(dump_a)["member"] != comparable(dump_b)["member"]
        paths = [row["path"] for row in dump_a["kinds"]["space"]]
        assert paths == ["space:Root", "collection:Guides/space:One", "collection:Guides/space:Two"]  # by parent, then in order
        assert {row["id"] for row in dump_a["kinds"]["space"]} == {ids_a[t] for t in ("One", "Two", "Root")}
        site_space = dump_a["kinds"]["site-space"][-1]["data"]
        assert site_space["space"] == "collection:Guides/space:Two"  # references become paths

        await api.post(f"/v1/spaces/{ids_b['Two']}/move", {"position": {"before": {"type": "space", "space": ids_b["One"]}}})
        moved = comparable(await dump(second))
        assert moved["space"] != comparable(dump_a)["space"]
        await api.post(f"/v1/spaces/{ids_b['Two']}/move", {"position": {"after": {"type": "space", "space": ids_b["One"]}}})
        await api.patch(f"/v1/spaces/{ids_b['Root']}", {"title": "Renamed"})
        renamed = comparable(await dump(second))
        assert renamed["space"] != comparable(dump_a)["space"]
        assert renamed["collection"] == comparable(dump_a)["collection"]
        status, _ = await api.get(f"{running.url}/_emulator/orgs/nope/dump")
        assert status == 404
