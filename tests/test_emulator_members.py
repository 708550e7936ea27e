"""Contract tests of the emulator's members, teams and link invites, over loopback HTTP."""

from __future__ import annotations

from typing import Any

from syncd.emulator.routes.members import new_invite
from syncd.emulator.server import RunningEmulator
from tests.conftest import ALL_TOKEN, Api


def _caller(emulator: RunningEmulator, token: str = ALL_TOKEN) -> str:
    return emulator.store.tokens[token]


def _assert_error(status: int, data: Any, code: int) -> None:
    assert status == code, data
    assert data["error"]["code"] == code and data["error"]["message"]


# ----- members ----------------------------------------------------------------------------


async def test_members_list_pages_and_shapes(api: Api, org_id: str, emulator: RunningEmulator) -> None:
    status, first = await api.get(f"/v1/orgs/{org_id}/members", limit=1)
    assert status == 200
    # owner + the all-organizations admin + `members=4` seeded people
    assert first["count"] == 6 and len(first["items"]) == 1 and "page" in first["next"]
    items = await api.all_items(f"/v1/orgs/{org_id}/members", limit=1)
    assert len(items) == 6 and len({m["id"] for m in items}) == 6
    member = items[0]
    assert member["object"] == "member" and member["user"]["object"] == "user"
    assert member["user"]["id"] == member["id"] and member["user"]["urls"]["location"]
    for field in ("role", "disabled", "joinedAt", "lastSeenAt", "sso", "spaces", "teams"):
        assert field in member
    domain_emails = [m["user"]["email"] for m in items if m["user"]["email"].endswith("@org1.example.com")]
    assert len(domain_emails) == 5  # the seeded people are on the organization's domain


async def test_members_order_sort_and_filters(api: Api, org_id: str) -> None:
    path = f"/v1/orgs/{org_id}/members"
    desc = await api.all_items(path)
    asc = await api.all_items(path, order="asc")
    assert [m["id"] for m in asc] == [m["id"] for m in reversed(desc)]
    joined = [m["joinedAt"] for m in asc]
    assert joined == sorted(joined)
    by_name = await api.all_items(path, sort="name", order="asc")
    names = [m["user"]["displayName"].casefold() for m in by_name]
    assert names == sorted(names)

    admins = await api.all_items(path, role="admin")
    assert admins and all(m["role"] == "admin" for m in admins)
    guests = await api.all_items(path, role="guest")
    assert all(m["role"] is None for m in guests)
    assert len(guests) == sum(1 for m in desc if m["role"] is None)

    target = next(m for m in desc if m["user"]["email"].startswith("owner@"))
    found = await api.all_items(path, search="OWNER@org1")
    assert [m["id"] for m in found] == [target["id"]]
    found = await api.all_items(path, search=target["user"]["displayName"].lower())
    assert target["id"] in {m["id"] for m in found}

    for bad in ({"order": "up"}, {"sort": "email"}, {"role": "owner"}, {"limit": 1001}):
        status, data = await api.get(path, **bad)
        _assert_error(status, data, 400)


async def test_ping_makes_member_active(api: Api, org_id: str, emulator: RunningEmulator) -> None:
    path = f"/v1/orgs/{org_id}/members"
    assert await api.all_items(path, sort="lastSeenAt") == []  # seeded activity is months old
    status, data = await api.post(f"/v1/orgs/{org_id}/ping")
    assert status == 200 and isinstance(data["serviceVisitorClaims"], str) and data["serviceVisitorClaims"]
    active = await api.all_items(path, sort="lastSeenAt")
    assert [m["id"] for m in active] == [_caller(emulator)]


async def test_member_get_patch_sso(api: Api, org_id: str, emulator: RunningEmulator) -> None:
    members = await api.all_items(f"/v1/orgs/{org_id}/members")
    someone = next(m for m in members if m["id"] != _caller(emulator) and not m["user"]["email"].startswith("owner@"))
    path = f"/v1/orgs/{org_id}/members/{someone['id']}"
    status, data = await api.get(path)
    assert status == 200 and data == someone

    status, data = await api.patch(path, json={"role": "review"})
    assert status == 200 and data["role"] == "review"
    status, data = await api.patch(path, json={"role": None})
    assert status == 200 and data["role"] is None
    assert (await api.get(path))[1]["role"] is None
    _assert_error(*await api.patch(path, json={"role": "owner"}), 400)
    _assert_error(*await api.patch(path, json={}), 400)

    status, data = await api.post(f"{path}/sso")
    assert status == 200 and data["object"] == "member" and data["sso"] is True
    _assert_error(*await api.get(f"/v1/orgs/{org_id}/members/nobody"), 404)


async def test_delete_member_and_last_admin(api: Api, org_id: str, emulator: RunningEmulator) -> None:
    path = f"/v1/orgs/{org_id}/members"
    me = _caller(emulator)
    others = [m for m in await api.all_items(path) if m["id"] != me]
    status, data = await api.delete(f"{path}/{others[0]['id']}")
    assert status == 204 and data is None
    _assert_error(*await api.get(f"{path}/{others[0]['id']}"), 404)
    assert (await api.get(path))[1]["count"] == 5

    for admin in await api.all_items(path, role="admin"):
        if admin["id"] != me:
            assert (await api.patch(f"{path}/{admin['id']}", json={"role": "edit"}))[0] == 200
    assert [m["id"] for m in await api.all_items(path, role="admin")] == [me]
    _assert_error(*await api.patch(f"{path}/{me}", json={"role": "read"}), 400)
    _assert_error(*await api.delete(f"{path}/{me}"), 400)


async def test_member_spaces_and_teams(api: Api, org_id: str, emulator: RunningEmulator) -> None:
    me = _caller(emulator)
    spaces = await api.all_items(f"/v1/orgs/{org_id}/spaces")
    status, first = await api.get(f"/v1/orgs/{org_id}/members/{me}/spaces", limit=2)
    assert status == 200 and first["count"] == len(spaces) and len(first["items"]) == 2
    listed = await api.all_items(f"/v1/orgs/{org_id}/members/{me}/spaces", limit=3, order="asc")
    assert {i["space"]["id"] for i in listed} == {s["id"] for s in spaces}
    assert all(i["permission"] == "admin" and i["space"]["object"] == "space" for i in listed)
    assert (await api.get(f"/v1/orgs/{org_id}/members/{me}"))[1]["spaces"] == len(spaces)

    status, team = await api.put(f"/v1/orgs/{org_id}/teams", json={"title": "Writers Guild", "members": [me]})
    assert status == 201
    teams = await api.all_items(f"/v1/orgs/{org_id}/members/{me}/teams")
    mine = [t for t in teams if t["team"]["id"] == team["id"]]
    assert mine and mine[0]["member"] == {"role": "member"} and mine[0]["team"]["object"] == "team"
    filtered = await api.all_items(f"/v1/orgs/{org_id}/members/{me}/teams", title="GUILD")
    assert [t["team"]["id"] for t in filtered] == [team["id"]]
    member = (await api.get(f"/v1/orgs/{org_id}/members/{me}"))[1]
    assert member["teams"] == len(teams)


# ----- teams ------------------------------------------------------------------------------


async def test_teams_crud_and_validation(api: Api, org_id: str, emulator: RunningEmulator) -> None:
    path = f"/v1/orgs/{org_id}/teams"
    before = await api.all_items(path)
    assert len(before) == 2 and all(t["object"] == "team" for t in before)  # `teams=2`
    members = [m["id"] for m in await api.all_items(f"/v1/orgs/{org_id}/members")][:3]

    status, team = await api.put(path, json={"title": "Docs Crew", "members": members})
    assert status == 201
    assert team["title"] == "Docs Crew" and team["members"] == 3 and team["spaces"] == 0
    assert team["permissions"] == {"admin": True, "view": True} and team["createdAt"]
    status, got = await api.get(f"{path}/{team['id']}")
    assert status == 200 and got == team

    _assert_error(*await api.put(path, json={"title": "x" * 65}), 400)
    _assert_error(*await api.put(path, json={"title": ""}), 400)
    _assert_error(*await api.put(path, json={"members": members}), 400)
    _assert_error(*await api.put(path, json={"title": "Ghosts", "members": ["not-a-member"]}), 400)
    assert (await api.put(path, json={"title": "x" * 64}))[0] == 201

    status, patched = await api.patch(f"{path}/{team['id']}", json={"title": "Docs Team"})
    assert status == 200 and patched["title"] == "Docs Team"
    _assert_error(*await api.patch(f"{path}/{team['id']}", json={"title": "y" * 65}), 400)
    _assert_error(*await api.patch(f"{path}/{team['id']}", json={}), 400)

    found = await api.all_items(path, title="docs T")
    assert [t["id"] for t in found] == [team["id"]]
    all_teams = await api.all_items(path, limit=1)
    assert len(all_teams) == 4 and all_teams[-2]["id"] == team["id"]  # creation order

    status, data = await api.delete(f"{path}/{team['id']}")
    assert status == 204 and data is None
    _assert_error(*await api.get(f"{path}/{team['id']}"), 404)
    _assert_error(*await api.delete(f"{path}/{team['id']}"), 404)


async def test_team_owner_filter(api: Api, org_id: str, emulator: RunningEmulator) -> None:
    path = f"/v1/orgs/{org_id}/teams"
    members = await api.all_items(f"/v1/orgs/{org_id}/members")
    plain = next(m for m in members if m["role"] != "admin")
    status, team = await api.put(path, json={"title": "Owned", "members": [plain["id"]]})
    assert status == 201
    seeded = {t["id"] for t in await api.all_items(path, owner=plain["id"])}  # teams seeded as owned
    assert team["id"] not in seeded
    emulator.store.tables["team"][team["id"]]["owners"].append(plain["id"])
    assert {t["id"] for t in await api.all_items(path, owner=plain["id"])} == seeded | {team["id"]}
    teams = await api.all_items(f"/v1/orgs/{org_id}/members/{plain['id']}/teams")
    assert {"team": (await api.get(f"{path}/{team['id']}"))[1], "member": {"role": "owner"}} in teams
    # an admin manages every team
    assert len(await api.all_items(path, owner=_caller(emulator))) == len(await api.all_items(path))


# ----- access -----------------------------------------------------------------------------


async def test_other_organization_is_invisible(api: Api, generated: Any, emulator: RunningEmulator) -> None:
    org1, org2 = generated.org_ids
    org1_api = api.as_token("org1-token")
    assert (await org1_api.get(f"/v1/orgs/{org1}/members"))[0] == 200
    _assert_error(*await org1_api.get(f"/v1/orgs/{org2}/members"), 404)
    _assert_error(*await org1_api.get(f"/v1/orgs/{org2}/teams"), 404)
    _assert_error(*await org1_api.put(f"/v1/orgs/{org2}/teams", json={"title": "Intruders"}), 404)
    team2 = (await api.all_items(f"/v1/orgs/{org2}/teams"))[0]
    _assert_error(*await org1_api.get(f"/v1/orgs/{org2}/teams/{team2['id']}"), 404)
    _assert_error(*await api.get(f"/v1/orgs/{org1}/teams/{team2['id']}"), 404)  # wrong org in path
    owner2 = emulator.store.tokens["org2-token"]
    _assert_error(*await org1_api.get(f"/v1/orgs/{org1}/members/{owner2}"), 404)
    _assert_error(*await api.as_token(None).get(f"/v1/orgs/{org1}/members"), 401)
    _assert_error(*await api.as_token("wrong").get(f"/v1/orgs/{org1}/teams"), 401)


async def test_non_admin_cannot_manage(api: Api, org_id: str, emulator: RunningEmulator) -> None:
    store = emulator.store
    reader = store.add_user("Rita Reader", "rita@org1.example.com", "reader-token")
    store.add_member(org_id, reader["id"], "read")
    reader_api = api.as_token("reader-token")
    me = _caller(emulator)
    assert (await reader_api.get(f"/v1/orgs/{org_id}/members"))[0] == 200
    _assert_error(*await reader_api.patch(f"/v1/orgs/{org_id}/members/{me}", json={"role": "read"}), 403)
    _assert_error(*await reader_api.delete(f"/v1/orgs/{org_id}/members/{me}"), 403)
    _assert_error(*await reader_api.put(f"/v1/orgs/{org_id}/teams", json={"title": "Mine"}), 403)
    assert (await reader_api.delete(f"/v1/orgs/{org_id}/members/{reader['id']}"))[0] == 204  # leaving is allowed
    _assert_error(*await reader_api.get(f"/v1/orgs/{org_id}/members"), 404)


# ----- link invites -----------------------------------------------------------------------


async def test_link_invites(api: Api, generated: Any, emulator: RunningEmulator) -> None:
    org1, org2 = generated.org_ids
    store = emulator.store
    invites = [r for r in store.tables["invite"].values() if r["org"] == org1]
    assert len(invites) == 2
    invite = invites[0]
    path = f"/v1/orgs/{org1}/link-invites/{invite['id']}"
    status, data = await api.get(path)
    assert status == 200 and data == {"object": "invite", "id": invite["id"], "role": "read", "redundant": False}

    status, data = await api.patch(path, json={"role": "edit"})
    assert status == 200 and data["role"] == "edit"
    status, data = await api.patch(path, json={"role": None})
    assert status == 200 and data["role"] is None
    _assert_error(*await api.patch(path, json={"role": "owner"}), 400)
    _assert_error(*await api.patch(path, json={"level": "read"}), 400)
    _assert_error(*await api.patch(path, json={"role": "read", "level": "read"}), 400)
    _assert_error(*await api.patch(path, json={}), 400)

    space = (await api.all_items(f"/v1/orgs/{org1}/spaces"))[0]
    content = new_invite(store, org1, None, level="read", space=space["id"])
    content_path = f"/v1/orgs/{org1}/link-invites/{content['id']}"
    status, data = await api.patch(content_path, json={"level": "comment"})
    assert status == 200 and data["level"] == "comment" and data["space"]["id"] == space["id"]
    _assert_error(*await api.patch(content_path, json={"role": "read"}), 400)

    _assert_error(*await api.get(f"/v1/orgs/{org2}/link-invites/{invite['id']}"), 404)
    _assert_error(*await api.as_token("org1-token").get(f"/v1/orgs/{org2}/link-invites/x"), 404)
    status, data = await api.delete(path)
    assert status == 204 and data is None
    _assert_error(*await api.get(path), 404)


def test_dump_kinds(emulator: RunningEmulator) -> None:
    from syncd.emulator.canonical import dump_org

    org_id = emulator.generated.org_ids[0]
    dump = dump_org(emulator.store, org_id)
    members = dump["kinds"]["member"]
    assert {row["path"] for row in members} >= {"member:owner@org1.example.com", "member:admin@emulator.test"}
    assert all(set(row["data"]) == {"object", "role"} for row in members)
    teams = dump["kinds"]["team"]
    assert len(teams) == 2
    for row in teams:
        assert row["path"] == f"team:{row['data']['title']}"
        assert len(row["data"]["memberEmails"]) == row["data"]["members"]
    assert "invite" not in dump["kinds"]
