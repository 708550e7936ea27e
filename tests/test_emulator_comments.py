"""Contract tests of comments, replies and reactions on spaces and change requests."""

from __future__ import annotations

from typing import Any

import pytest

from syncd.emulator import revisions
from syncd.emulator.routes.space_model import set_space_content
from syncd.emulator.server import RunningEmulator
from syncd.emulator.store import Record
from tests.conftest import ALL_TOKEN, Api


def _assert_error(status: int, data: Any, code: int) -> None:
    assert status == code, data
    assert data["error"]["code"] == code and data["error"]["message"]


@pytest.fixture
async def space(api: Api, org_id: str, emulator: RunningEmulator) -> dict[str, Any]:
    """A fresh space of organization 1 whose content has a page with a child page."""
    status, created = await api.post(f"/v1/orgs/{org_id}/spaces", {"title": "Commented"})
    assert status == 201
    store = emulator.store
    child = revisions.new_page(store, "Install", "Run the installer.")
    top = revisions.new_page(store, "Getting started", "Hello.", pages=[child])
    set_space_content(store, store.tables["space"][created["id"]], revisions.commit(store, [top], [])["id"])
    return {"id": created["id"], "page": top["id"], "child": child["id"]}


def _change_request(emulator: RunningEmulator, space_id: str) -> Record:
    """A minimal change request of the space: comments only need its id, space, number, revision."""
    store = emulator.store
    space = store.tables["space"][space_id]
    record = {"org": space["org"], "space": space_id, "number": 1, "revision": space["revision"], "status": "open"}
    return store.add("change-request", record)


def _me(emulator: RunningEmulator, token: str = ALL_TOKEN) -> str:
    return emulator.store.tokens[token]


async def _space_comment_count(api: Api, space_id: str) -> int:
    return (await api.get(f"/v1/spaces/{space_id}"))[1]["comments"]


async def test_post_get_and_list_comments(api: Api, space: dict[str, Any], emulator: RunningEmulator) -> None:
    base = f"/v1/spaces/{space['id']}/comments"
    status, comment = await api.post(base, {"body": {"markdown": "First!"}, "page": space["child"], "node": "n1"})
    assert status == 200 and comment["object"] == "comment"
    assert comment["status"] == "open" and comment["replies"] == 0 and comment["reactions"] == []
    assert comment["body"] == {"markdown": "First!"}
    assert comment["postedBy"]["id"] == _me(emulator) and comment["postedBy"]["object"] == "user"
    target = comment["target"]
    assert target["space"] == space["id"] and target["revision"] and target["node"] == {"id": "n1"}
    assert target["page"]["id"] == space["child"] and target["page"]["path"] == "getting-started/install"
    assert target["page"]["outdated"] is False
    assert comment["urls"]["location"].endswith(f"{base}/{comment['id']}")
    assert await _space_comment_count(api, space["id"]) == 1

    for i in range(2):
        assert (await api.post(base, {"body": {"markdown": f"Note {i}"}}))[0] == 200
    assert await _space_comment_count(api, space["id"]) == 3

    status, first = await api.get(base, limit=1)
    assert status == 200 and first["count"] == 3 and len(first["items"]) == 1 and first["next"]["page"]
    desc = await api.all_items(base, limit=1)
    assert [c["body"]["markdown"] for c in desc] == ["Note 1", "Note 0", "First!"]
    asc = await api.all_items(base, order="asc")
    assert [c["id"] for c in asc] == [c["id"] for c in reversed(desc)]
    on_page = await api.all_items(base, targetPage=space["child"])
    assert [c["id"] for c in on_page] == [comment["id"]]

    status, got = await api.get(f"{base}/{comment['id']}")
    assert status == 200 and got == comment
    status, doc = await api.get(f"{base}/{comment['id']}", format="document")
    assert doc["body"]["document"]["object"] == "document"
    assert doc["body"]["document"]["nodes"][0]["nodes"][0]["leaves"][0]["text"] == "First!"


async def test_comment_validation(api: Api, space: dict[str, Any]) -> None:
    base = f"/v1/spaces/{space['id']}/comments"
    _assert_error(*await api.post(base, {"body": {"markdown": ""}}), 400)
    _assert_error(*await api.post(base, {"body": {"markdown": "   "}}), 400)
    _assert_error(*await api.post(base, {"body": "text"}), 400)
    _assert_error(*await api.post(base, {}), 400)
    _assert_error(*await api.post(base, {"body": {"markdown": "x"}, "page": "no-such-page"}), 400)
    _assert_error(*await api.get(base, status="closed"), 400)
    _assert_error(*await api.get(base, order="newest"), 400)
    _assert_error(*await api.get(base, format="html"), 400)
    _assert_error(*await api.get(base, limit=0), 400)
    status, comment = await api.post(base, {"body": {"markdown": "ok"}})
    assert status == 200
    _assert_error(*await api.put(f"{base}/{comment['id']}", {"resolved": "yes"}), 400)
    _assert_error(*await api.put(f"{base}/{comment['id']}", {"addedReactions": "👍"}), 400)
    _assert_error(*await api.put(f"{base}/{comment['id']}", {"body": {"markdown": ""}}), 400)
    _assert_error(*await api.post(f"{base}/{comment['id']}/replies", {"body": {}}), 400)
    _assert_error(*await api.get(f"{base}/nope"), 404)
    assert await _space_comment_count(api, space["id"]) == 1


async def test_resolve_changes_space_count(api: Api, space: dict[str, Any], emulator: RunningEmulator) -> None:
    base = f"/v1/spaces/{space['id']}/comments"
    ids = [(await api.post(base, {"body": {"markdown": f"c{i}"}}))[1]["id"] for i in range(3)]
    assert await _space_comment_count(api, space["id"]) == 3

    status, resolved = await api.put(f"{base}/{ids[0]}", {"resolved": True})
    assert status == 200 and resolved["status"] == "resolved"
    assert resolved["resolvedBy"]["id"] == _me(emulator) and resolved["resolvedAt"]
    assert await _space_comment_count(api, space["id"]) == 2
    assert (await api.put(f"{base}/{ids[0]}", {"resolved": True}))[0] == 200  # idempotent
    assert await _space_comment_count(api, space["id"]) == 2

    assert [c["id"] for c in await api.all_items(base, status="resolved")] == [ids[0]]
    assert {c["id"] for c in await api.all_items(base, status="open")} == set(ids[1:])
    assert len(await api.all_items(base, status="all")) == 3

    status, reopened = await api.put(f"{base}/{ids[0]}", {"resolved": False})
    assert reopened["status"] == "open" and "resolvedAt" not in reopened and "resolvedBy" not in reopened
    assert await _space_comment_count(api, space["id"]) == 3

    status, data = await api.delete(f"{base}/{ids[1]}")
    assert status == 204 and data is None
    _assert_error(*await api.get(f"{base}/{ids[1]}"), 404)
    assert await _space_comment_count(api, space["id"]) == 2
    await api.put(f"{base}/{ids[2]}", {"resolved": True})
    assert (await api.delete(f"{base}/{ids[2]}"))[0] == 204  # a resolved one was not counted
    assert await _space_comment_count(api, space["id"]) == 1


async def test_reactions_and_edits(api: Api, space: dict[str, Any], emulator: RunningEmulator) -> None:
    base = f"/v1/spaces/{space['id']}/comments"
    _, comment = await api.post(base, {"body": {"markdown": "React to me"}})
    path = f"{base}/{comment['id']}"
    status, data = await api.put(path, {"addedReactions": ["👍", "🎉"]})
    assert status == 200
    assert [(r["emoji"], r["count"]) for r in data["reactions"]] == [("👍", 1), ("🎉", 1)]
    assert data["reactions"][0]["users"][0]["user"]["id"] == _me(emulator)
    assert data["reactions"][0]["users"][0]["reactedAt"]
    _, data = await api.put(path, {"addedReactions": ["👍"]})  # same user twice counts once
    assert data["reactions"][0]["count"] == 1

    owner = api.as_token("org1-token")
    _, data = await owner.put(path, {"addedReactions": ["👍"]})
    assert data["reactions"][0]["count"] == 2
    assert {u["user"]["id"] for u in data["reactions"][0]["users"]} == {_me(emulator), _me(emulator, "org1-token")}
    _, data = await api.put(path, {"removedReactions": ["👍", "🎉"]})
    assert [(r["emoji"], r["count"]) for r in data["reactions"]] == [("👍", 1)]

    assert "editedAt" not in data
    status, edited = await api.put(path, {"body": {"markdown": "Edited text"}})
    assert status == 200 and edited["body"]["markdown"] == "Edited text" and edited["editedAt"]
    _assert_error(*await owner.put(path, {"body": {"markdown": "Hijack"}}), 403)
    assert (await api.get(path))[1]["body"]["markdown"] == "Edited text"


async def test_replies(api: Api, space: dict[str, Any], emulator: RunningEmulator) -> None:
    base = f"/v1/spaces/{space['id']}/comments"
    _, comment = await api.post(base, {"body": {"markdown": "Thread"}})
    replies = f"{base}/{comment['id']}/replies"
    posted = []
    for i in range(3):
        status, reply = await api.post(replies, {"body": {"markdown": f"reply {i}"}})
        assert status == 200 and reply["object"] == "comment-reply"
        assert "status" not in reply and "replies" not in reply and "target" not in reply
        posted.append(reply)
    status, data = await api.get(f"{base}/{comment['id']}")
    assert data["replies"] == 3 and data["repliers"][0]["count"] == 3
    listed = await api.all_items(replies, limit=1)
    assert [r["id"] for r in listed] == [r["id"] for r in posted]  # chronological

    reply_path = f"{replies}/{posted[1]['id']}"
    status, got = await api.get(reply_path)
    assert status == 200 and got == posted[1]
    status, edited = await api.put(reply_path, {"body": {"markdown": "changed"}, "addedReactions": ["👀"]})
    assert status == 200 and edited["body"]["markdown"] == "changed" and edited["reactions"][0]["count"] == 1
    assert edited["editedAt"]

    status, data = await api.delete(reply_path)
    assert status == 204 and data is None
    _assert_error(*await api.get(reply_path), 404)
    assert (await api.get(f"{base}/{comment['id']}"))[1]["replies"] == 2

    assert (await api.delete(f"{base}/{comment['id']}"))[0] == 204
    _assert_error(*await api.get(f"{replies}/{posted[0]['id']}"), 404)
    assert all(r["comment"] != comment["id"] for r in emulator.store.tables["comment-reply"].values())


async def test_change_request_comments(api: Api, space: dict[str, Any], emulator: RunningEmulator) -> None:
    change_request = _change_request(emulator, space["id"])
    by_id = f"/v1/spaces/{space['id']}/change-requests/{change_request['id']}/comments"
    by_number = f"/v1/spaces/{space['id']}/change-requests/{change_request['number']}/comments"
    status, comment = await api.post(by_number, {"body": {"markdown": "On the CR"}, "page": space["page"]})
    assert status == 200 and comment["target"]["changeRequest"] == change_request["id"]
    assert comment["urls"]["location"].endswith(f"{by_id}/{comment['id']}")
    assert await _space_comment_count(api, space["id"]) == 0  # change-request comments are not counted
    assert [c["id"] for c in await api.all_items(by_id)] == [comment["id"]]
    assert await api.all_items(f"/v1/spaces/{space['id']}/comments") == []
    _assert_error(*await api.get(f"/v1/spaces/{space['id']}/comments/{comment['id']}"), 404)

    status, reply = await api.post(f"{by_id}/{comment['id']}/replies", {"body": {"markdown": "ack"}}, format="markdown")
    assert status == 200
    status, _ = await api.put(f"{by_id}/{comment['id']}/replies/{reply['id']}", {"resolved": True})
    assert status == 200
    assert (await api.get(f"{by_id}/{comment['id']}"))[1]["status"] == "resolved"
    _assert_error(*await api.put(f"{by_id}/{comment['id']}/replies/{reply['id']}", {"resolved": 1}), 400)
    assert (await api.delete(f"{by_id}/{comment['id']}/replies/{reply['id']}"))[0] == 204
    assert (await api.delete(f"{by_number}/{comment['id']}"))[0] == 204
    _assert_error(*await api.get(f"/v1/spaces/{space['id']}/change-requests/999/comments"), 404)
    _assert_error(*await api.post(f"/v1/spaces/{space['id']}/change-requests/nope/comments", {"body": {"markdown": "x"}}), 404)


async def test_access(api: Api, space: dict[str, Any], generated: Any) -> None:
    base = f"/v1/spaces/{space['id']}/comments"
    _, comment = await api.post(base, {"body": {"markdown": "private"}})
    other = api.as_token("org2-token")
    _assert_error(*await other.get(base), 404)
    _assert_error(*await other.get(f"{base}/{comment['id']}"), 404)
    _assert_error(*await other.post(base, {"body": {"markdown": "x"}}), 404)
    _assert_error(*await api.as_token(None).get(base), 401)
    assert (await api.as_token("org1-token").get(base))[0] == 200
    org2_space = (await api.all_items(f"/v1/orgs/{generated.org_ids[1]}/spaces"))[0]
    _assert_error(*await api.get(f"/v1/spaces/{org2_space['id']}/comments/{comment['id']}"), 404)
    assert (await api.delete(f"/v1/spaces/{space['id']}"))[0] == 204
    _assert_error(*await api.get(base), 404)


async def test_seeded_comments(api: Api, org_id: str, emulator: RunningEmulator) -> None:
    spaces = await api.all_items(f"/v1/orgs/{org_id}/spaces")
    total = 0
    for space in spaces:
        comments = await api.all_items(f"/v1/spaces/{space['id']}/comments")
        total += len(comments)
        assert space["comments"] == sum(1 for c in comments if c["status"] == "open")
        for comment in comments:
            replies = await api.all_items(f"/v1/spaces/{space['id']}/comments/{comment['id']}/replies")
            assert len(replies) == comment["replies"] <= 2
            if "page" in comment["target"]:
                assert comment["target"]["page"]["title"] and comment["target"]["page"]["outdated"] is False
    assert total > 0


def test_dump_kinds(emulator: RunningEmulator) -> None:
    from syncd.emulator.canonical import dump_org

    dump = dump_org(emulator.store, emulator.generated.org_ids[0])
    comments = dump["kinds"]["comment"]
    assert comments
    for row in comments:
        data = row["data"]
        assert set(data) <= {"object", "replies", "body", "target", "status"}
        assert row["path"].split("/")[-1].startswith("comment:" + data["body"]["markdown"][:40])
        page = data["target"].get("page")
        assert page is None or isinstance(page, str)
    replies = dump["kinds"]["comment-reply"]
    assert sum(row["data"]["replies"] for row in comments) == len(replies)
    assert all("/comment:" in row["path"] and set(row["data"]) == {"object", "body"} for row in replies)
