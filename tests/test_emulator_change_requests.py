"""Contract tests of change requests: lifecycle, counters, merge/update, content, PDF."""

from __future__ import annotations

from typing import Any

import aiohttp

from syncd.emulator.server import RunningEmulator
from tests.conftest import Api


def _titles(pages: list[dict[str, Any]]) -> list[str]:
    out = []
    for page in pages:
        out.append(page["title"])
        out.extend(_titles(page["pages"]))
    return out


async def _fresh_space(api: Api, org_id: str, title: str = "CR playground") -> dict[str, Any]:
    """A new space with two pages, so counters and lists start from zero."""
    status, space = await api.post(f"/v1/orgs/{org_id}/spaces", {"title": title})
    assert status == 201
    for page_title in ("Intro", "Usage"):
        status, _ = await api.post(f"/_emulator/spaces/{space['id']}/pages", {"title": page_title, "markdown": f"# {page_title}\n"})
        assert status == 201
    return (await api.get(f"/v1/spaces/{space['id']}"))[1]


async def _content_titles(api: Api, path: str) -> list[str]:
    status, revision = await api.get(path)
    assert status == 200, revision
    return _titles(revision["pages"])


async def test_create_get_by_id_and_number_and_counters(api: Api, org_id: str) -> None:
    space = await _fresh_space(api, org_id)
    base = f"/v1/spaces/{space['id']}/change-requests"
    status, cr = await api.post(base, {"subject": "Rework intro"})
    assert status == 201 and cr["object"] == "change-request" and cr["status"] == "draft"
    assert api.last_headers["Location"].endswith(f"{base}/{cr['id']}")
    assert cr["number"] == 1 and cr["revisionInitial"] == space["revision"] and cr["revision"] != space["revision"]
    assert cr["outdated"] is False and cr["createdBy"]["object"] == "user" and cr["space"] == space["id"]
    status, by_number = await api.get(f"{base}/1")
    status2, by_id = await api.get(f"{base}/{cr['id']}")
    assert status == status2 == 200 and by_number == by_id == cr
    status, second = await api.post(base)
    assert status == 201 and second["number"] == 2 and second["subject"] == ""

    status, counted = await api.get(f"/v1/spaces/{space['id']}")
    assert (counted["changeRequests"], counted["changeRequestsDraft"], counted["changeRequestsOpen"]) == (2, 2, 0)
    status, opened = await api.patch(f"{base}/2", {"status": "open", "subject": "Second"})
    assert status == 200 and opened["status"] == "open" and opened["subject"] == "Second"
    status, counted = await api.get(f"/v1/spaces/{space['id']}")
    assert (counted["changeRequests"], counted["changeRequestsDraft"], counted["changeRequestsOpen"]) == (2, 1, 1)

    for method, path, body, field in [
        ("POST", base, {"subject": "s" * 101}, "subject"),
        ("PATCH", f"{base}/1", {"subject": "s" * 101}, "subject"),
        ("PATCH", f"{base}/1", {"status": "merged"}, "status"),
        ("PATCH", f"{base}/1", {"status": "closed"}, "status"),
    ]:
        status, data = await api.call(method, path, json=body)
        assert status == 400 and field in data["error"]["message"] and data["error"]["code"] == 400
    for missing in (f"{base}/99", f"{base}/nope", "/v1/spaces/nope/change-requests"):
        status, data = await api.get(missing)
        assert status == 404 and data["error"]["code"] == 404
    other = await _fresh_space(api, org_id, "Other")
    status, _ = await api.get(f"/v1/spaces/{other['id']}/change-requests/{cr['id']}")
    assert status == 404  # a change request belongs to its space


async def test_list_filters_ordering_and_paging(api: Api, emulator: RunningEmulator, org_id: str) -> None:
    space = await _fresh_space(api, org_id)
    base = f"/v1/spaces/{space['id']}/change-requests"
    ids = []
    for n in range(3):
        status, cr = await api.post(base, {"subject": f"CR {n}"})
        ids.append(cr["id"])
        await api.post("/_emulator/clock", {"advance_seconds": 1})  # timestamps have milliseconds: no two alike
    assert await api.all_items(base) == []  # new change requests are drafts; the default filter is open
    assert len(await api.all_items(base, status="draft")) == 3
    for cr_id in ids:
        await api.patch(f"{base}/{cr_id}", {"status": "open"})
    status, first = await api.get(base, limit=2)
    assert status == 200 and first["count"] == 3 and len(first["items"]) == 2 and first["next"]["page"]
    status, rest = await api.get(base, limit=2, page=first["next"]["page"])
    listed = [c["id"] for c in first["items"] + rest["items"]]
    assert sorted(listed) == sorted(ids) and "next" not in rest
    await api.post("/_emulator/clock", {"advance_seconds": 1})
    await api.patch(f"{base}/{ids[0]}", {"subject": "Touched last"})
    assert [c["id"] for c in await api.all_items(base)][0] == ids[0]  # most recently updated first
    assert [c["number"] for c in await api.all_items(base, orderBy="createdAt")] == [3, 2, 1]

    await api.patch(f"{base}/{ids[1]}", {"status": "archived"})
    assert [c["id"] for c in await api.all_items(base, status="archived")] == [ids[1]]
    status, data = await api.get(base, status="closed")
    assert status == 400 and "status" in data["error"]["message"]

    owner = emulator.store.tokens["org1-token"]  # another user than the test token's
    me = (await api.get(f"{base}/{ids[0]}"))[1]["createdBy"]["id"]
    assert len(await api.all_items(base, contributor=me)) == 2
    status, _ = await api.post(f"/_emulator/spaces/{space['id']}/change-requests/{ids[2]}/pages", {"title": "By someone", "user": owner})
    assert status == 201
    assert [c["id"] for c in await api.all_items(base, contributor=owner)] == [ids[2]]
    assert await api.all_items(base, creator=owner) == []


async def test_edit_then_merge_applies_to_space(api: Api, org_id: str) -> None:
    space = await _fresh_space(api, org_id)
    base = f"/v1/spaces/{space['id']}/change-requests"
    status, cr = await api.post(base, {"subject": "Add a page"})
    await api.post("/_emulator/clock", {"advance_seconds": 5})
    status, page = await api.post(f"/_emulator/spaces/{space['id']}/change-requests/{cr['number']}/pages", {"title": "New in CR", "markdown": "# New"})
    assert status == 201 and "/~/changes/1/" in page["urls"]["app"]
    status, edited = await api.get(f"{base}/{cr['id']}")
    assert edited["revision"] != cr["revision"] and edited["updatedAt"] != cr["updatedAt"]
    assert await _content_titles(api, f"{base}/{cr['id']}/content") == ["Intro", "Usage", "New in CR"]
    assert await _content_titles(api, f"/v1/spaces/{space['id']}/content") == ["Intro", "Usage"]
    status, unchanged = await api.get(f"/v1/spaces/{space['id']}")
    assert unchanged["revision"] == space["revision"]

    await api.patch(f"{base}/{cr['id']}", {"status": "open"})
    status, result = await api.post(f"{base}/{cr['id']}/merge")
    assert status == 200 and result["result"] == "merge"
    status, merged_space = await api.get(f"/v1/spaces/{space['id']}")
    assert merged_space["revision"] == result["revision"] != space["revision"]
    assert (merged_space["changeRequestsOpen"], merged_space["changeRequests"]) == (0, 1)
    assert await _content_titles(api, f"/v1/spaces/{space['id']}/content") == ["Intro", "Usage", "New in CR"]
    status, content = await api.get(f"/v1/spaces/{space['id']}/content")
    assert content["type"] == "merge" and content["mergedFrom"]["id"] == cr["id"]
    status, merged = await api.get(f"{base}/{cr['id']}")
    assert merged["status"] == "merged" and merged["revisionMerged"] == result["revision"] and merged["mergedBy"]
    assert [c["id"] for c in await api.all_items(base, status="merged")] == [cr["id"]]
    status, data = await api.post(f"{base}/{cr['id']}/merge")
    assert status == 400 and "merged" in data["error"]["message"]
    status, data = await api.post(f"{base}/{cr['id']}/update")
    assert status == 400
    status, data = await api.patch(f"{base}/{cr['id']}", {"status": "open"})
    assert status == 400


async def test_outdated_update_and_three_way_merge(api: Api, org_id: str) -> None:
    space = await _fresh_space(api, org_id)
    base = f"/v1/spaces/{space['id']}/change-requests"
    status, cr = await api.post(base, {"subject": "Edit usage"})
    pages = (await api.get(f"/v1/spaces/{space['id']}/content/pages"))[1]["pages"]
    intro, usage = pages[0]["id"], pages[1]["id"]
    admin_cr = f"/_emulator/spaces/{space['id']}/change-requests/{cr['id']}/pages"
    status, _ = await api.post(admin_cr, {"page": usage, "markdown": "# Usage\n\nFrom the change request.\n"})
    assert status == 200

    status, _ = await api.patch(f"/_emulator/spaces/{space['id']}/pages/{intro}", {"markdown": "# Intro\n\nEdited on main.\n"})
    status, _ = await api.post(f"/_emulator/spaces/{space['id']}/pages", {"title": "Main only", "markdown": "# Main"})
    status, behind = await api.get(f"{base}/{cr['id']}")
    assert behind["outdated"] is True

    status, result = await api.post(f"{base}/{cr['id']}/update")
    assert status == 200 and result["result"] == "update"
    status, updated = await api.get(f"{base}/{cr['id']}")
    main = (await api.get(f"/v1/spaces/{space['id']}"))[1]
    assert updated["revision"] == result["revision"] and updated["outdated"] is False
    assert updated["revisionMergedAncestor"] == main["revision"]
    cr_content = f"{base}/{cr['id']}/content"
    assert await _content_titles(api, cr_content) == ["Intro", "Usage", "Main only"]
    status, cr_intro = await api.get(f"{cr_content}/page/{intro}")
    status, cr_usage = await api.get(f"{cr_content}/page/{usage}")
    assert "Edited on main" in cr_intro["markdown"] and "From the change request" in cr_usage["markdown"]

    status, _ = await api.delete(f"/_emulator/spaces/{space['id']}/pages/{intro}")  # main moves on again
    status, result = await api.post(f"{base}/{cr['id']}/merge")
    assert status == 200
    assert await _content_titles(api, f"/v1/spaces/{space['id']}/content") == ["Usage", "Main only"]
    status, main_usage = await api.get(f"/v1/spaces/{space['id']}/content/page/{usage}")
    assert "From the change request" in main_usage["markdown"]


async def test_change_request_content_routes_and_import(api: Api, org_id: str) -> None:
    seeded = (await api.all_items(f"/v1/orgs/{org_id}/spaces"))[0]
    status, cr = await api.post(f"/v1/spaces/{seeded['id']}/change-requests", {"subject": "Content"})
    base = f"/v1/spaces/{seeded['id']}/change-requests/{cr['number']}/content"
    status, revision = await api.get(base)
    assert status == 200 and revision["object"] == "revision" and revision["id"] == cr["revision"]
    assert revision["urls"]["app"].endswith("/~/changes/%d/" % cr["number"])
    status, pages = await api.get(f"{base}/pages")
    assert pages["pages"] == revision["pages"]
    status, files = await api.get(f"{base}/files", limit=1)
    assert files["count"] == 2 and files["next"]["page"]
    file = files["items"][0]
    status, one = await api.get(f"{base}/files/{file['id']}")
    assert status == 200 and one == file
    refs = await api.all_items(f"{base}/files/{file['id']}/backlinks")
    assert all(r["versionContext"] == {"type": "changeRequest", "changeRequest": cr["id"]} for r in refs)
    page = revision["pages"][0]
    status, full = await api.get(f"{base}/page/{page['id']}")
    assert status == 200 and full["markdown"] and "/~/changes/" in full["urls"]["app"]
    status, links = await api.get(f"{base}/page/{page['id']}/links")
    assert status == 200 and links["stats"]["broken"]["changeRequest"] == links["stats"]["broken"]["total"]
    for missing in (f"{base}/page/nope", f"{base}/files/nope", f"{base}/page/nope/links"):
        status, _ = await api.get(missing)
        assert status == 404

    other = (await api.all_items(f"/v1/orgs/{org_id}/spaces"))[1]
    status, result = await api.post(f"{base}/import", {"url": other["urls"]["app"], "source": "website"})
    assert status == 200 and result["importedResources"] > 0
    status, after = await api.get(f"/v1/spaces/{seeded['id']}/change-requests/{cr['id']}")
    assert after["revision"] == result["revision"]
    assert await _content_titles(api, base) == await _content_titles(api, f"/v1/spaces/{other['id']}/content")
    status, space_after = await api.get(f"/v1/spaces/{seeded['id']}")
    assert space_after["revision"] == seeded["revision"]  # the space itself is untouched
    status, data = await api.post(f"{base}/import", {"url": "https://example.com/", "source": "website"})
    assert status == 400 and "not reachable" in data["error"]["message"]


async def test_pdf_url_serves_a_pdf(api: Api, org_id: str) -> None:
    space = await _fresh_space(api, org_id)
    status, cr = await api.post(f"/v1/spaces/{space['id']}/change-requests", {"subject": "Print me"})
    status, data = await api.get(f"/v1/spaces/{space['id']}/change-requests/{cr['id']}/pdf")
    assert status == 200 and data["url"].startswith(api.base)
    async with aiohttp.ClientSession() as anonymous, anonymous.get(data["url"]) as resp:
        body = await resp.read()
        assert resp.status == 200 and resp.content_type == "application/pdf" and body.startswith(b"%PDF") and b"Print me" in body
    status, data = await api.get(f"/v1/spaces/{space['id']}/change-requests/{cr['id']}/pdf", page="nope")
    assert status == 400 and "page" in data["error"]["message"]


async def test_seeded_change_requests(api: Api, emulator: RunningEmulator, org_id: str) -> None:
    spaces = await api.all_items(f"/v1/orgs/{org_id}/spaces")
    with_crs = [s for s in spaces if s["changeRequests"]]
    assert with_crs and len(with_crs) < len(spaces)
    statuses = set()
    for space in with_crs:
        for status_name in ("draft", "open", "archived", "merged"):
            items = await api.all_items(f"/v1/spaces/{space['id']}/change-requests", status=status_name)
            statuses.update(c["status"] for c in items)
            if status_name == "open":
                assert len(items) == space["changeRequestsOpen"]
    assert statuses
