"""Contract tests of space content, links, search, import and the content admin routes."""

from __future__ import annotations

from typing import Any

import aiohttp

from syncd.emulator.server import RunningEmulator
from tests.conftest import Api

PAGE_KEYS = {"object", "id", "title", "kind", "type", "urls", "slug", "path", "pages", "layout", "tags"}


def _walk(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for page in pages:
        out.append(page)
        out.extend(_walk(page["pages"]))
    return out


async def _space(api: Api, org_id: str, index: int = 0) -> dict[str, Any]:
    return (await api.all_items(f"/v1/orgs/{org_id}/spaces"))[index]


async def test_content_tree_pages_and_single_page(api: Api, org_id: str) -> None:
    space = await _space(api, org_id)
    status, revision = await api.get(f"/v1/spaces/{space['id']}/content")
    assert status == 200 and revision["object"] == "revision" and revision["id"] == space["revision"]
    assert {"parents", "files", "reusableContents", "tags", "createdAt", "type"} <= set(revision)
    pages = _walk(revision["pages"])
    assert len(pages) == 5 and any(p["pages"] for p in revision["pages"])  # nested
    for page in pages:
        assert PAGE_KEYS <= set(page) and isinstance(page["markdown"], str) and page["documentId"]
        assert page["urls"]["app"].endswith("/" + page["path"])
    assert all(f["downloadURL"] and f["size"] > 0 for f in revision["files"])
    status, listed = await api.get(f"/v1/spaces/{space['id']}/content/pages")
    assert status == 200 and listed["pages"] == revision["pages"]

    parent = next(p for p in revision["pages"] if p["pages"])
    child = parent["pages"][0]
    assert child["path"] == f"{parent['path']}/{child['slug']}"
    status, page = await api.get(f"/v1/spaces/{space['id']}/content/page/{child['id']}")
    assert status == 200 and page["markdown"].startswith(f"# {child['title']}") and page["path"] == child["path"]
    status, doc = await api.get(f"/v1/spaces/{space['id']}/content/page/{child['id']}", format="document")
    assert doc["document"]["object"] == "document" and doc["document"]["nodes"] and "markdown" not in doc
    status, data = await api.get(f"/v1/spaces/{space['id']}/content/page/{child['id']}", format="html")
    assert status == 400 and "format" in data["error"]["message"]
    status, data = await api.get(f"/v1/spaces/{space['id']}/content", metadata="maybe")
    assert status == 400 and "metadata" in data["error"]["message"]


async def test_files_paging_download_and_backlinks(api: Api, org_id: str) -> None:
    space = await _space(api, org_id)
    path = f"/v1/spaces/{space['id']}/content/files"
    status, first = await api.get(path, limit=1)
    assert status == 200 and first["count"] == 2 and len(first["items"]) == 1 and first["next"]["page"]
    status, second = await api.get(path, limit=1, page=first["next"]["page"])
    assert len(second["items"]) == 1 and "next" not in second
    files = first["items"] + second["items"]
    assert {f["contentType"] for f in files} >= {"application/pdf"}
    assert any(f.get("dimensions", {}).get("width") for f in files)
    for file in files:
        status, again = await api.get(f"{path}/{file['id']}")
        assert status == 200 and again == file
        async with aiohttp.ClientSession() as anonymous, anonymous.get(file["downloadURL"]) as resp:
            body = await resp.read()
            assert resp.status == 200 and len(body) == file["size"] and resp.content_type == file["contentType"]

    status, revision = await api.get(f"/v1/spaces/{space['id']}/content")
    for file in files:
        refs = await api.all_items(f"{path}/{file['id']}/backlinks")
        expected = []
        for page in _walk(revision["pages"]):
            _, full = await api.get(f"/v1/spaces/{space['id']}/content/page/{page['id']}")
            if file["name"] in full["markdown"]:
                expected.append(page["id"])
        assert [r["page"]["id"] for r in refs] == expected
        assert all(r["kind"] == "page" and r["space"] == space["id"] and r["file"]["id"] == file["id"] for r in refs)
    status, data = await api.get(f"{path}/nope")
    assert status == 404 and data["error"]["code"] == 404
    status, _ = await api.get(f"{path}/nope/backlinks")
    assert status == 404


async def test_links_with_stats_and_status_filter(api: Api, emulator: RunningEmulator, org_id: str) -> None:
    space = await _space(api, org_id, 1)
    base = f"/_emulator/spaces/{space['id']}/pages"
    status, target = await api.post(base, {"title": "Link target", "markdown": "# Target"})
    assert status == 201
    markdown = "# Links\n\n[ok](link-target) [gone](no/such/page) [web](https://example.com) [app](/app/o/x/s/y/)\n"
    status, source = await api.post(base, {"title": "Link source", "markdown": markdown})
    status, links = await api.get(f"/v1/spaces/{space['id']}/content/page/{source['id']}/links")
    assert status == 200 and links["count"] == 4 and links["stats"]["total"] == 4
    assert links["stats"]["broken"] == {"total": 1, "changeRequest": 0}
    by_status = {item["status"]: item for item in links["items"]}
    assert set(by_status) == {"ok", "broken", "in-app"}
    ok_targets = [i["targetReference"] for i in links["items"] if i["status"] == "ok"]
    assert {"kind": "page", "page": target["id"]} in ok_targets
    assert by_status["broken"]["locationReferences"] == [{"kind": "page", "page": source["id"], "space": space["id"]}]

    status, broken = await api.get(f"/v1/spaces/{space['id']}/links", status="broken")
    assert status == 200 and broken["items"] and all(i["status"] == "broken" for i in broken["items"])
    assert broken["stats"]["broken"]["total"] == broken["count"]  # the seeded markdown has broken links too
    everything = await api.all_items(f"/v1/spaces/{space['id']}/links", limit=2)
    assert len(everything) == broken["stats"]["total"] and any(i["status"] == "ok" for i in everything)
    status, data = await api.get(f"/v1/spaces/{space['id']}/links", status="dead")
    assert status == 400
    status, _ = await api.get(f"/v1/spaces/{space['id']}/content/page/nope/links")
    assert status == 404


async def test_space_and_org_search(api: Api, org_id: str) -> None:
    space = await _space(api, org_id)
    status, _ = await api.post(f"/_emulator/spaces/{space['id']}/pages", {"title": "Zebra crossing", "markdown": "# Zebra\n\n## Stripes\n\nBlack and white ZEBRA stripes.\n"})
    results = await api.all_items(f"/v1/spaces/{space['id']}/search", query="zebra")
    assert [r["title"] for r in results] == ["Zebra crossing"]
    hit = results[0]
    assert hit["path"] == "zebra-crossing" and hit["rank"] == 1 and hit["urls"]["app"].endswith("/zebra-crossing")
    assert [s["title"] for s in hit["sections"]] == ["Zebra", "Stripes"]
    assert hit["sections"][1]["path"] == "zebra-crossing#stripes" and "ZEBRA" in hit["sections"][1]["body"]
    status, data = await api.get(f"/v1/spaces/{space['id']}/search", query="Black AND WHITE")
    assert status == 200 and data["count"] == 1

    status, data = await api.get(f"/v1/spaces/{space['id']}/search")
    assert status == 400 and "query" in data["error"]["message"]
    status, data = await api.get(f"/v1/spaces/{space['id']}/search", query="q" * 513)
    assert status == 400 and "512" in data["error"]["message"]

    groups = await api.all_items(f"/v1/orgs/{org_id}/search", query="zebra")
    assert [(g["id"], g["title"]) for g in groups] == [(space["id"], space["title"])]
    assert groups[0]["pages"][0]["id"] == hit["id"]
    broad = await api.all_items(f"/v1/orgs/{org_id}/search", query="before you", limit=2)
    assert len(broad) > 2 and all(g["pages"] for g in broad)
    status, _ = await api.get("/v1/orgs/nope/search", query="x")
    assert status == 404


async def test_admin_page_edits_make_new_revisions(api: Api, org_id: str) -> None:
    space = await _space(api, org_id)
    admin = f"/_emulator/spaces/{space['id']}/pages"
    parent = _walk((await api.get(f"/v1/spaces/{space['id']}/content"))[1]["pages"])[0]
    status, page = await api.post(admin, {"title": "Getting started", "markdown": "# Hi", "parent": parent["id"]})
    assert status == 201 and page["path"].startswith(parent["path"] + "/") and page["markdown"] == "# Hi"
    status, after_add = await api.get(f"/v1/spaces/{space['id']}")
    assert after_add["revision"] != space["revision"] and after_add["updatedAt"] != space["updatedAt"]

    status, edited = await api.patch(f"{admin}/{page['id']}", {"markdown": "# Hello", "title": "Welcome"})
    assert status == 200 and edited["title"] == "Welcome" and edited["documentId"] != page["documentId"]
    assert edited["slug"] == page["slug"]  # renaming keeps the URL
    status, after_edit = await api.get(f"/v1/spaces/{space['id']}")
    assert after_edit["revision"] != after_add["revision"]
    status, content = await api.get(f"/v1/spaces/{space['id']}/content")
    assert content["parents"] == [after_add["revision"]]
    status, fetched = await api.get(f"/v1/spaces/{space['id']}/content/page/{page['id']}")
    assert fetched["markdown"] == "# Hello"

    status, body = await api.delete(f"{admin}/{parent['id']}")
    assert status == 204 and body is None
    for gone in (parent["id"], page["id"]):  # the subtree goes with its root
        status, _ = await api.get(f"/v1/spaces/{space['id']}/content/page/{gone}")
        assert status == 404
    status, after_delete = await api.get(f"/v1/spaces/{space['id']}")
    assert after_delete["revision"] != after_edit["revision"]

    status, data = await api.post(admin, {"markdown": "no title"})
    assert status == 400 and "title" in data["error"]["message"]
    status, data = await api.post(admin, {"title": "Orphan", "parent": "nope"})
    assert status == 400 and "parent" in data["error"]["message"]
    status, _ = await api.patch(f"{admin}/nope", {"title": "x"})
    assert status == 404
    status, _ = await api.post("/_emulator/spaces/nope/pages", {"title": "x"})
    assert status == 404


async def test_import_across_organizations(api: Api, emulator: RunningEmulator, generated) -> None:
    org1, org2 = generated.org_ids
    one = api.as_token("org1-token")
    target = (await one.all_items(f"/v1/orgs/{org1}/spaces"))[0]
    private, public = (await api.all_items(f"/v1/orgs/{org2}/spaces"))[:2]
    emulator.store.get("space", private["id"])["visibility"] = "private"
    emulator.store.get("space", public["id"])["visibility"] = "public"
    status, _ = await one.get(f"/v1/spaces/{private['id']}")
    assert status == 404

    path = f"/v1/spaces/{target['id']}/content/import"
    status, data = await one.post(path, {"url": private["urls"]["app"], "source": "website"})
    assert status == 400 and "private" in data["error"]["message"]
    status, source = await api.get(f"/v1/spaces/{public['id']}/content")
    status, result = await one.post(path, {"url": public["urls"]["app"] + "some/page", "source": "website"})
    assert status == 200
    expected = len(_walk(source["pages"])) + len(source["files"])
    assert result["importedResources"] == result["totalResources"] == expected
    status, space_after = await one.get(f"/v1/spaces/{target['id']}")
    assert space_after["revision"] == result["revision"] != target["revision"]
    status, copied = await one.get(f"/v1/spaces/{target['id']}/content")
    assert [p["path"] for p in _walk(copied["pages"])] == [p["path"] for p in _walk(source["pages"])]
    assert {p["id"] for p in _walk(copied["pages"])}.isdisjoint(p["id"] for p in _walk(source["pages"]))
    assert [f["name"] for f in copied["files"]] == [f["name"] for f in source["files"]]
    status, again = await one.post(path, {"url": public["urls"]["location"], "source": "markdown"})
    assert status == 200 and again["revision"] != result["revision"]

    for body, needle in [
        ({"url": "https://example.com/docs", "source": "website"}, "not reachable from the emulator"),
        ({"url": emulator.url + "/elsewhere", "source": "website"}, "not reachable"),
        ({"url": emulator.url + "/pub/s/nope/", "source": "website"}, "no space"),
        ({"url": "not a url", "source": "website"}, "url"),
        ({"source": "website"}, "url"),
        ({"url": public["urls"]["app"]}, "source"),
        ({"url": public["urls"]["app"], "source": "fax"}, "source"),
    ]:
        status, data = await one.post(path, body)
        assert status == 400 and needle in data["error"]["message"], (body, data)
    status, _ = await one.post(f"/v1/spaces/{public['id']}/content/import", {"url": target["urls"]["app"], "source": "website"})
    assert status == 404  # the target must be visible
    status, _ = await api.as_token(None).post(path, {"url": public["urls"]["app"], "source": "website"})
    assert status == 401


async def test_unknown_space_content_is_404(api: Api) -> None:
    for path in ("/v1/spaces/nope/content", "/v1/spaces/nope/content/pages", "/v1/spaces/nope/links", "/v1/spaces/nope/content/files"):
        status, data = await api.get(path)
        assert status == 404 and data["error"]["code"] == 404
    async with aiohttp.ClientSession() as anonymous, anonymous.get(api.base + "/_files/nope/x.png") as resp:
        assert resp.status == 404
