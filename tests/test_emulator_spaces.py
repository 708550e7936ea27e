"""Contract tests of organizations, collections and spaces over loopback HTTP."""

from __future__ import annotations

from tests.conftest import Api


async def _titles(api: Api, path: str) -> list[str]:
    return [item["title"] for item in await api.all_items(path)]


async def test_org_get_and_patch(api: Api, org_id: str, generated) -> None:
    status, org = await api.patch(f"/v1/orgs/{org_id}", {"title": "Renamed org", "emailDomains": ["a.example"], "hostname": "renamed-org", "defaultRole": None})
    assert status == 200 and org["title"] == "Renamed org" and org["hostname"] == "renamed-org" and org["defaultRole"] is None
    status, again = await api.get(f"/v1/orgs/{org_id}")
    assert again["title"] == "Renamed org" and again["emailDomains"] == ["a.example"]
    status, data = await api.patch(f"/v1/orgs/{org_id}", {"title": "x"})
    assert status == 400 and "title" in data["error"]["message"]
    status, data = await api.patch(f"/v1/orgs/{generated.org_ids[1]}", {"hostname": "renamed-org"})
    assert status == 409
    status, data = await api.get("/v1/email-domains/a.example/orgs")
    assert status == 200 and [o["id"] for o in data["organizations"]] == [org_id]


async def test_create_nested_collections_and_spaces(api: Api, org_id: str) -> None:
    status, parent = await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Parent"})
    assert status == 201 and parent["object"] == "collection" and "parent" not in parent
    status, child = await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Child", "parent": parent["id"]})
    assert status == 201 and child["parent"] == parent["id"]
    status, space = await api.post(f"/v1/orgs/{org_id}/spaces", {"title": "Inside", "parent": child["id"], "emoji": "1f680"})
    assert status == 201 and space["parent"] == child["id"] and space["revision"]
    assert api.last_headers["Location"].endswith(f"/v1/spaces/{space['id']}")
    assert await _titles(api, f"/v1/collections/{child['id']}/spaces") == ["Inside"]
    nested = await api.all_items(f"/v1/orgs/{org_id}/collections")
    top = await api.all_items(f"/v1/orgs/{org_id}/collections", nested=False)
    assert child["id"] in [c["id"] for c in nested] and child["id"] not in [c["id"] for c in top]
    ids = [c["id"] for c in nested]
    assert ids.index(parent["id"]) + 1 == ids.index(child["id"])  # depth first


async def test_validation_errors(api: Api, org_id: str) -> None:
    cases = [
        ("POST", f"/v1/orgs/{org_id}/collections", {"title": "x" * 51}, "title"),
        ("POST", f"/v1/orgs/{org_id}/collections", {"parent": "nope"}, "parent"),
        ("POST", f"/v1/orgs/{org_id}/spaces", {"title": "y" * 51}, "title"),
        ("POST", f"/v1/orgs/{org_id}/spaces", {"editMode": "frozen"}, "editMode"),
    ]
    for method, path, body, field in cases:
        status, data = await api.call(method, path, json=body)
        assert status == 400, (path, body)
        assert data["error"]["code"] == 400 and field in data["error"]["message"]
    space = (await api.all_items(f"/v1/orgs/{org_id}/spaces"))[0]
    status, data = await api.patch(f"/v1/spaces/{space['id']}", {"defaultLevel": "god"})
    assert status == 400
    status, data = await api.call("PATCH", f"/v1/spaces/{space['id']}", json=None)
    assert status == 400 and "body" in data["error"]["message"]


async def test_move_reorders_siblings(api: Api, org_id: str) -> None:
    status, coll = await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Box"})
    ids = []
    for title in ("A", "B", "C"):
        status, space = await api.post(f"/v1/orgs/{org_id}/spaces", {"title": title, "parent": coll["id"]})
        ids.append(space["id"])
    a, b, c = ids
    path = f"/v1/collections/{coll['id']}/spaces"
    status, _ = await api.post(f"/v1/spaces/{c}/move", {"position": {"before": {"type": "space", "space": a}}})
    assert status == 200
    assert await _titles(api, path) == ["C", "A", "B"]
    await api.post(f"/v1/spaces/{c}/move", {"position": {"after": {"type": "space", "space": b}}})
    assert await _titles(api, path) == ["A", "B", "C"]
    await api.post(f"/v1/spaces/{a}/move", {})
    assert await _titles(api, path) == ["B", "C", "A"]
    status, moved = await api.post(f"/v1/spaces/{a}/move", {"parent": None})
    assert status == 200 and "parent" not in moved
    assert await _titles(api, path) == ["B", "C"]
    status, data = await api.post(f"/v1/spaces/{b}/move", {"position": {"before": {"type": "space", "space": a}}})
    assert status == 400  # a is no longer a sibling of b
    status, data = await api.post(f"/v1/spaces/{b}/move", {"position": {"before": {"type": "site-space", "siteSpace": c}}})
    assert status == 400


async def test_collection_cannot_move_into_itself(api: Api, org_id: str) -> None:
    status, outer = await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Outer"})
    status, inner = await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Inner", "parent": outer["id"]})
    status, data = await api.post(f"/v1/collections/{outer['id']}/move", {"parent": inner["id"]})
    assert status == 400
    status, moved = await api.post(f"/v1/collections/{inner['id']}/move", {"parent": None})
    assert status == 200 and "parent" not in moved


async def test_delete_restore_within_seven_days(api: Api, org_id: str) -> None:
    status, space = await api.post(f"/v1/orgs/{org_id}/spaces", {"title": "Doomed"})
    status, body = await api.delete(f"/v1/spaces/{space['id']}")
    assert status == 204 and body is None
    assert "Doomed" not in await _titles(api, f"/v1/orgs/{org_id}/spaces")
    status, deleted = await api.get(f"/v1/spaces/{space['id']}")
    assert status == 200 and deleted["deletedAt"]
    status, restored = await api.post(f"/v1/spaces/{space['id']}/restore")
    assert status == 200 and "deletedAt" not in restored
    assert "Doomed" in await _titles(api, f"/v1/orgs/{org_id}/spaces")
    await api.delete(f"/v1/spaces/{space['id']}")
    await api.post(api.base + "/_emulator/clock", {"advance_seconds": 8 * 86400})
    status, data = await api.post(f"/v1/spaces/{space['id']}/restore")
    assert status == 404 and "7 days" in data["error"]["message"]


async def test_delete_collection_deletes_its_tree(api: Api, org_id: str) -> None:
    status, coll = await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Gone"})
    status, space = await api.post(f"/v1/orgs/{org_id}/spaces", {"title": "Gone space", "parent": coll["id"]})
    status, _ = await api.delete(f"/v1/collections/{coll['id']}")
    assert status == 204
    assert (await api.get(f"/v1/collections/{coll['id']}"))[0] == 404
    assert "Gone space" not in await _titles(api, f"/v1/orgs/{org_id}/spaces")
    status, restored = await api.post(f"/v1/spaces/{space['id']}/restore")
    assert status == 200 and "parent" not in restored


async def test_duplicate_copies_content_and_transfer_moves(api: Api, org_id: str, generated) -> None:
    spaces = await api.all_items(f"/v1/orgs/{org_id}/spaces")
    source = spaces[0]
    status, dup = await api.post(f"/v1/spaces/{source['id']}/duplicate")
    assert status == 201 and dup["id"] != source["id"] and dup["title"] == source["title"]
    status, src_content = await api.get(f"/v1/spaces/{source['id']}/content")
    status, dup_content = await api.get(f"/v1/spaces/{dup['id']}/content")
    assert [p["title"] for p in dup_content["pages"]] == [p["title"] for p in src_content["pages"]]
    assert dup["revision"] != source["revision"]
    other = generated.org_ids[1]
    status, moved = await api.post(f"/v1/spaces/{dup['id']}/transfer", {"organization": other})
    assert status == 200 and moved["organization"] == other
    assert dup["id"] in [s["id"] for s in await api.all_items(f"/v1/orgs/{other}/spaces")]
    assert dup["id"] not in [s["id"] for s in await api.all_items(f"/v1/orgs/{org_id}/spaces")]
    status, coll = await api.post(f"/v1/orgs/{org_id}/collections", {"title": "Travels"})
    await api.post(f"/v1/orgs/{org_id}/spaces", {"title": "Passenger", "parent": coll["id"]})
    status, moved = await api.post(f"/v1/collections/{coll['id']}/transfer", {"organization": other})
    assert status == 200 and moved["organization"] == other
    assert await _titles(api, f"/v1/collections/{coll['id']}/spaces") == ["Passenger"]
    org1 = api.as_token("org1-token")
    status, _ = await org1.post(f"/v1/spaces/{source['id']}/transfer", {"organization": other})
    assert status == 404  # org1's owner is not a member of the other organization


async def test_patch_space_fields(api: Api, org_id: str) -> None:
    space = (await api.all_items(f"/v1/orgs/{org_id}/spaces"))[0]
    status, patched = await api.patch(f"/v1/spaces/{space['id']}", {"title": "New title", "editMode": "locked", "emoji": "1f4a1", "defaultLevel": "edit"})
    assert status == 200
    assert (patched["title"], patched["editMode"], patched["emoji"], patched["defaultLevel"]) == ("New title", "locked", "1f4a1", "edit")
    assert patched["revision"] == space["revision"]  # metadata is not content
