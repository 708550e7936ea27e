"""Contract tests of integrations: publishing, visibility, listing filters, installations."""

from __future__ import annotations

import base64
from typing import Any

from syncd.emulator.canonical import dump_org
from tests.conftest import Api

PNG = base64.b64encode(b"\x89PNG fake image").decode()


def _manifest(org: str, **extra: Any) -> dict[str, Any]:
    body = {
        "title": "Status Board",
        "description": "Show service status in pages",
        "scopes": ["space:content:read"],
        "script": "export default {}",
        "organization": org,
    }
    body.update(extra)
    return body


def _assert_400(status: int, data: Any, field: str) -> None:
    assert status == 400, data
    assert data["error"]["code"] == 400 and field in data["error"]["message"], data


async def test_publish_republish_and_unpublish(api: Api, org_id: str) -> None:
    org1 = api.as_token("org1-token")
    blocks = [{"id": "status", "title": "Status widget", "urlUnfurl": ["https://status.example.org/*"]}]
    status, first = await org1.post("/v1/integrations/status-board", _manifest(org_id, visibility="public", blocks=blocks, icon=PNG, previewImages=[PNG]))
    assert status == 200 and first["object"] == "integration" and first["name"] == "status-board"
    assert first["version"] == 1 and first["owner"]["id"] == org_id and first["permissions"]["admin"] is True
    assert first["blocks"][0]["urlUnfurl"] == ["https://status.example.org/*"] and first["urls"]["icon"]
    assert len(first["previewImages"]) == 1 and first["previewImages"][0].startswith("http")
    assert "script" not in first and "secrets" not in first

    status, second = await org1.post("/v1/integrations/status-board", _manifest(org_id, title="Status Board 2", visibility="public"))
    assert status == 200 and second["version"] == 2 and second["title"] == "Status Board 2" and second["blocks"] == []
    status, got = await api.as_token("org2-token").get("/v1/integrations/status-board")
    assert status == 200 and got["version"] == 2 and got["permissions"]["admin"] is False

    # Only admins of the owner organization may republish or unpublish.
    status, data = await api.as_token("org2-token").post("/v1/integrations/status-board", _manifest("whatever"))
    assert status == 404  # the organization named in the body is not one of the caller's
    org2_id = (await api.as_token("org2-token").get("/v1/orgs"))[1]["items"][0]["id"]
    status, data = await api.as_token("org2-token").post("/v1/integrations/status-board", _manifest(org2_id))
    assert status == 403 and data["error"]["code"] == 403
    status, data = await api.as_token("org2-token").delete("/v1/integrations/status-board")
    assert status == 403

    assert await org1.delete("/v1/integrations/status-board") == (204, None)
    assert (await org1.get("/v1/integrations/status-board"))[0] == 404


async def test_publish_by_hostname_and_validation(api: Api, org_id: str) -> None:
    await api.patch(f"/v1/orgs/{org_id}", {"hostname": "acme-docs"})
    status, published = await api.post("/v1/integrations/acme.tool", _manifest("acme-docs"))
    assert status == 200 and published["owner"]["id"] == org_id and published["visibility"] == "private"
    path = "/v1/integrations/new-one"
    _assert_400(*await api.post(path, _manifest(org_id, title="x")), "title")
    _assert_400(*await api.post(path, _manifest(org_id, title="t" * 31)), "title")
    _assert_400(*await api.post(path, _manifest(org_id, description="d" * 101)), "description")
    _assert_400(*await api.post(path, _manifest(org_id, summary="s" * 2049)), "summary")
    _assert_400(*await api.post(path, _manifest(org_id, scopes=["space:everything"])), "scopes")
    _assert_400(*await api.post(path, _manifest(org_id, previewImages=[PNG] * 4)), "previewImages")
    _assert_400(*await api.post(path, _manifest(org_id, icon="not base64!")), "icon")
    _assert_400(*await api.post(path, _manifest(org_id, externalLinks=[{"url": "https://e.com", "label": "x"}] * 6)), "externalLinks")
    _assert_400(*await api.post(path, _manifest(org_id, externalLinks=[{"url": "nope", "label": "x"}])), "externalLinks[0].url")
    _assert_400(*await api.post(path, _manifest(org_id, visibility="secret")), "visibility")
    _assert_400(*await api.post(path, _manifest(org_id, target="planet")), "target")
    _assert_400(*await api.post(path, _manifest(org_id, categories=["games"])), "categories")
    _assert_400(*await api.post(path, _manifest(org_id, blocks=[{"id": "b", "title": "x"}])), "blocks[0].title")
    _assert_400(*await api.post(path, _manifest(org_id, contentSources=[{"id": "c", "title": "Source"}])), "contentSources[0].configuration")
    _assert_400(*await api.post(path, _manifest(org_id, configurations={"planet": {}})), "configurations")
    _assert_400(*await api.post(path, _manifest(org_id, secrets={"k": 1})), "secrets")
    body = _manifest(org_id)
    del body["script"]
    _assert_400(*await api.post(path, body), "script")
    _assert_400(*await api.post("/v1/integrations/bad name!", _manifest(org_id)), "integrationName")
    _assert_400(*await api.post("/v1/integrations/" + "n" * 101, _manifest(org_id)), "integrationName")
    assert (await api.get(path))[0] == 404


async def test_visibility_and_list_filters(api: Api, generated) -> None:
    org1_id, org2_id = generated.org_ids
    org1, org2 = api.as_token("org1-token"), api.as_token("org2-token")
    await org1.post("/v1/integrations/zz-private", _manifest(org1_id, visibility="private", categories=["analytics"]))
    await org1.post("/v1/integrations/zz-unlisted", _manifest(org1_id, visibility="unlisted"))
    source = [{"id": "src", "title": "Source", "configuration": {"componentId": "cfg"}}]
    blocks = [{"id": "card", "title": "Card", "urlUnfurl": ["https://cards.zz-example.com/*"]}]
    await org1.post("/v1/integrations/zz-public", _manifest(org1_id, visibility="public", contentSources=source, blocks=blocks))

    names2 = {i["name"] for i in await org2.all_items("/v1/integrations")}
    assert "zz-public" in names2 and "zz-private" not in names2 and "zz-unlisted" not in names2
    assert (await org2.get("/v1/integrations/zz-private"))[0] == 404
    assert (await org2.get("/v1/integrations/zz-unlisted"))[0] == 200
    names1 = {i["name"] for i in await org1.all_items("/v1/integrations")}
    assert {"zz-private", "zz-unlisted", "zz-public"} <= names1

    async def names(**query: Any) -> set[str]:
        return {i["name"] for i in await org1.all_items("/v1/integrations", **query)}

    assert await names(search="zz-") == {"zz-private", "zz-unlisted", "zz-public"}
    assert "zz-private" in await names(category="analytics") and "zz-public" not in await names(category="analytics")
    assert await names(contentSources=True, search="zz") == {"zz-public"}
    assert await names(contentSources=False, search="zz") == {"zz-private", "zz-unlisted"}
    assert await names(blocks=True, search="zz") == {"zz-public"}
    assert await names(blockDomain="zz-example.com") == {"zz-public"}
    status, _ = await org2.post("/v1/integrations/zz-org2-public", _manifest(org2_id, visibility="public"))
    assert status == 200
    owned = await names(owner=org2_id)
    assert "zz-org2-public" in owned and all(n.startswith(("org-2-", "zz-org2-")) for n in owned)
    status, data = await org1.get("/v1/integrations", category="games")
    _assert_400(status, data, "category")
    status, data = await org1.get("/v1/integrations", blockDomain="bad domain!")
    _assert_400(status, data, "blockDomain")

    # Paging over the whole list, one item per page.
    everything = await org1.all_items("/v1/integrations")
    paged, page = [], None
    while True:
        status, data = await org1.get("/v1/integrations", limit=1, page=page)
        paged.extend(i["name"] for i in data["items"])
        page = (data.get("next") or {}).get("page")
        if not page:
            break
    assert paged == [i["name"] for i in everything] and len(paged) == data["count"]


async def test_installations(api: Api, emulator, generated) -> None:
    org1_id, org2_id = generated.org_ids
    store = emulator.store
    from syncd.emulator.routes.integrations import new_installation

    org1 = api.as_token("org1-token")
    status, record = await org1.post("/v1/integrations/zz-installed", _manifest(org1_id, visibility="public"))
    integration = store.get("integration", "zz-installed")
    new_installation(store, integration, org1_id, externalIds=["ext-1"])
    new_installation(store, integration, org2_id, status="paused", configuration={"k": "v"})
    status, data = await org1.get("/v1/integrations/zz-installed/installations")
    assert status == 200 and data["count"] == 2
    first = data["items"][0]
    assert {"id", "status", "space_selection", "site_selection", "spaces", "configuration"} <= set(first)
    assert first["target"] == {"organization": org1_id} and first["externalIds"] == ["ext-1"]
    status, one = await org1.get("/v1/integrations/zz-installed/installations", limit=1)
    assert len(one["items"]) == 1 and one["next"]["page"]
    status, filtered = await org1.get("/v1/integrations/zz-installed/installations", externalId="ext-1")
    assert [i["id"] for i in filtered["items"]] == [first["id"]]
    # Someone who does not administer the owner sees only their own organization's installation.
    status, theirs = await api.as_token("org2-token").get("/v1/integrations/zz-installed/installations")
    assert [i["target"]["organization"] for i in theirs["items"]] == [org2_id]
    assert (await org1.get("/v1/integrations/no-such-thing/installations"))[0] == 404
    assert (await org1.delete("/v1/integrations/zz-installed"))[0] == 204
    assert not store.where("integration-installation", integration="zz-installed")


async def test_seeded_integrations_and_dump(api: Api, emulator, org_id: str) -> None:
    owned = await api.all_items("/v1/integrations", owner=org_id)
    assert len(owned) == 2 and all(i["name"].startswith("org-1-") and i["version"] >= 1 for i in owned)
    dump = dump_org(emulator.store, org_id)["kinds"]
    assert [row["path"] for row in dump["integration"]] == [f"integration:{i['name']}" for i in owned]
    assert all("version" not in row["data"] and "owner" not in row["data"] for row in dump["integration"])
    for row in dump["integration-installation"]:
        assert row["path"].startswith("integration:org-1-") and "target" not in row["data"]
