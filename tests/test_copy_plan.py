"""plan_copy: what it plans from what was read (organizations built through the emulator's
API and read by the crawler), and that odd data is a skip with its reason, never a crash."""

from __future__ import annotations

import json

from syncd.copy import ContentStrategy, IdMap, Ref, Snapshot, plan_copy
from syncd.copy.apply import dependencies
from syncd.copy.ops import op_from_json, op_to_json
from tests.copy_support import Blank, blank, keys, rich_source  # noqa: F401 - `blank` is a fixture


async def test_a_copy_into_an_empty_organization(blank: Blank) -> None:
    ids = await rich_source(blank.source)
    plan, _, _, _ = await blank.plan(with_access=True)  # SAML providers too
    deps = dependencies(plan)  # no repeated key, no cycle
    by_key = {op.key: op for op in plan.ops}
    creates = set(keys(plan, "create"))
    for name in ("guides", "inner", "Alpha", "Beta", "Gamma", "team", "field", "saml", "site", "section", "second", "group"):
        kind = {"guides": "collection", "inner": "collection", "team": "team", "field": "custom-field", "saml": "saml-provider", "site": "site",
                "section": "site-section", "second": "site-space", "group": "site-section-group"}.get(name, "space")
        assert f"create:{kind}:{ids[name]}" in creates, name
    # The section's first site-space is made with the section: no create of its own, mapped by that op.
    assert f"create:site-space:{ids['first']}" not in creates
    section = by_key[f"create:site-section:{ids['section']}"]
    assert section.recipe == "section" and section.makes == [("site-space", ids["first"])]
    assert section.body == {"spaceId": Ref("space", ids["Alpha"]), "title": "Start"}
    assert section.want == {"title": "Start", "icon": "book", "condition": None, "description": None}
    # References are Refs, and an op waits for what it names.
    saml = by_key[f"create:saml-provider:{ids['saml']}"]
    assert saml.body["defaultTeam"] == Ref("team", ids["team"]) and f"create:team:{ids['team']}" in deps[saml.key]
    second = by_key[f"create:site-space:{ids['second']}"]
    assert second.body == {"spaceId": Ref("space", ids["Beta"]), "sectionId": Ref("site-section", ids["section"])}
    assert second.want == {"condition": "visitor.claims.beta == true"}
    assert {section.key, f"create:space:{ids['Beta']}"} <= set(deps[second.key])
    # New spaces come by duplicate + transfer (one token), under a parent that is made first.
    beta = by_key[f"create:space:{ids['Beta']}"]
    assert beta.recipe == "duplicate-transfer" and beta.side == "source" and beta.path == f"/v1/spaces/{ids['Beta']}/duplicate"
    assert f"create:collection:{ids['inner']}" in deps[beta.key]
    # Creates under one parent run one at a time; order and layout are settle steps after them.
    assert by_key[f"create:collection:{ids['inner']}"].serial == f"tree:{ids['guides']}"
    settle = by_key["settle:tree:order"]
    assert settle.recipe == "settle-tree" and {f"create:space:{ids[t]}" for t in ("Alpha", "Beta", "Gamma")} <= set(deps[settle.key])
    assert by_key[f"settle:site:{ids['site']}"].spec["groups"] == [[Ref("site-section-group", ids["group"]), [Ref("site-section", ids["section"])]]]
    values = by_key[f"patch:space-custom-field-value:{ids['Alpha']}"]
    assert values.body == {"values": {"owner": {"value": "docs team"}}} and f"create:custom-field:{ids['field']}" in deps[values.key]
    # The plan is data: it round-trips through JSON.
    assert [op_from_json(json.loads(json.dumps(op_to_json(op)))) for op in plan.ops] == plan.ops


async def test_equivalent_objects_are_adopted_not_created(blank: Blank) -> None:
    ids = await rich_source(blank.source)
    guides = await blank.target.collection("Guides")
    await blank.target.team("Writers")
    plan, _, target, _ = await blank.plan()
    adopted = {op.key: op.target_id for op in plan.ops if op.action == "adopt"}
    assert adopted[f"adopt:collection:{ids['guides']}"] == guides and f"adopt:team:{ids['team']}" in adopted
    assert f"create:collection:{ids['guides']}" not in keys(plan)
    patch = next(op for op in plan.ops if op.key == f"patch:collection:{ids['guides']}")
    assert patch.path == f"/v1/collections/{guides}" and patch.body == {"description": "All the guides", "defaultLevel": "edit"}
    assert not [op for op in plan.ops if op.action == "adopt" and op.kind == "space"]  # the spaces are not there
    no_adopt = (await blank.plan(adopt=False))[0]
    assert not [op for op in no_adopt.ops if op.action == "adopt"]


async def test_after_a_copy_changes_plan_only_what_changed(blank: Blank) -> None:
    ids = await rich_source(blank.source)
    first = await blank.copy()
    assert first.equal, first.verification.counts()
    assert not (await blank.plan())[0].ops  # nothing left to do
    await blank.source.call("PATCH", f"/v1/spaces/{ids['Gamma']}", {"title": "Gamma renamed"})
    await blank.source.move("space", ids["Gamma"], before=None, parent=ids["guides"])
    plan, _, target, idmap = await blank.plan()
    assert sorted(keys(plan)) == sorted([f"patch:space:{ids['Gamma']}", "settle:tree:order"])
    settle = plan.ops[-1]
    assert any("move space 'Gamma'" in line for line in settle.preview), settle.preview
    assert plan.ops[0].body == {"title": "Gamma renamed"}


async def test_mirror_mode_deletes_only_what_syncd_made_and_refuses_beyond_the_cap(blank: Blank) -> None:
    ids = await rich_source(blank.source)
    doomed = await blank.source.collection("Doomed")
    assert (await blank.copy()).equal
    foreign = await blank.target.collection("Made by hand")
    await blank.source.call("DELETE", f"/v1/collections/{doomed}")
    await blank.source.call("DELETE", f"/v1/spaces/{ids['Gamma']}")
    copy_plan = (await blank.plan())[0]
    assert not [op for op in copy_plan.ops if op.action == "delete"]  # copy mode never deletes
    plan = (await blank.plan(mode="mirror", max_delete=5))[0]
    deletes = sorted(op.key for op in plan.ops if op.action == "delete")
    assert deletes == sorted([f"delete:collection:{doomed}", f"delete:space:{ids['Gamma']}"])
    assert all(op.target_id != foreign for op in plan.ops)
    refused = (await blank.plan(mode="mirror", max_delete=1))[0].refused
    assert refused is not None and "2 deletes exceed --max-delete 1" in refused


async def test_a_deleted_collection_that_holds_foreign_objects_is_kept(blank: Blank) -> None:
    ids = await rich_source(blank.source)
    assert (await blank.copy()).equal
    _, _, _, idmap = await blank.plan()
    await blank.target.space("Someone's space", idmap.target("collection", ids["inner"]))
    await blank.source.call("DELETE", f"/v1/collections/{ids['inner']}")
    plan = (await blank.plan(mode="mirror"))[0]
    assert f"delete:collection:{ids['inner']}" not in keys(plan)
    assert any("holds 1 object(s)" in s.reason for s in plan.skips)


async def test_a_mirror_of_a_source_that_looks_empty_is_refused(blank: Blank) -> None:
    ids = await rich_source(blank.source)
    assert (await blank.copy()).equal
    for name in ("Alpha", "Beta", "Gamma"):
        await blank.source.call("DELETE", f"/v1/spaces/{ids[name]}")
    await blank.source.call("DELETE", f"/v1/collections/{ids['guides']}")
    plan = (await blank.plan(mode="mirror", max_delete=100))[0]
    assert plan.refused and "looks empty" in plan.refused


async def test_content_by_import_when_the_tokens_differ(blank: Blank) -> None:
    ids = await rich_source(blank.source)
    await blank.source.call("PATCH", f"/v1/spaces/{ids['Beta']}", {"title": "Beta"})  # no visibility write: Beta stays as made
    spaces = {s["id"]: s for s in await blank.api.all_items(f"/v1/orgs/{blank.orgs[0]}/spaces")}
    plan = (await blank.plan(content=ContentStrategy(readable=False)))[0]
    alpha = next(op for op in plan.ops if op.key == f"create:space:{ids['Alpha']}")
    assert alpha.recipe == "call" and alpha.path == f"/v1/orgs/{blank.orgs[1]}/spaces" and alpha.body["emoji"] == "1f680"
    # Empty spaces need no content; a private one with content would be announced as a skip.
    assert not keys(plan, "content") and all(spaces[i]["visibility"] for i in spaces)


async def test_organization_identity_and_unwritable_fields_are_announced(blank: Blank) -> None:
    await rich_source(blank.source)
    await blank.source.call("PATCH", f"/v1/orgs/{blank.orgs[0]}", {"emailDomains": ["a.example.com"], "ai": True})
    plan = (await blank.plan())[0]
    skips = {(s.kind, s.reason.split(":")[0]) for s in plan.skips}
    assert ("organization", "title not copied") in skips
    assert ("organization", "emailDomains, SAML providers (1 in the source, 0 on the target) kept as the target has them") in skips
    patch = next(op for op in plan.ops if op.key == "patch:organization:" + blank.orgs[0])
    assert patch.body == {"ai": True}  # the access settings are the target's own
    plan = (await blank.plan(with_access=True))[0]
    access = next(op for op in plan.ops if op.key == "patch:organization:access")
    assert access.body == {"emailDomains": ["a.example.com"]} and not any(s.title == "access settings" for s in plan.skips)


def _row(kind: str, row_id: str, data: dict[str, object], parent: tuple[str, str] | None = None, position: int | None = None) -> dict[str, object]:
    return {"kind": kind, "id": row_id, "parent_kind": parent[0] if parent else None, "parent_id": parent[1] if parent else None, "position": position, "data": data}


def test_odd_data_is_a_skip_with_its_reason_never_a_crash() -> None:
    org = ("organization", "SORG")
    rows = [
        _row("organization", "SORG", {"emailDomains": "not a list", "defaultContent": "weird"}),
        _row("collection", "C1", {"title": "Orphan", "parent": "NOPE"}, ("collection", "NOPE"), 0),
        _row("collection", "C2", {"title": ["x"]}, org, 1),
        _row("space", "S1", {}, org, 0),
        _row("space", "S2", {"title": "Fine", "emoji": 5, "parent": 7, "urls": "x"}, org, 1),
        _row("site-space", "X1", {"path": "x", "space": {"id": "GONE"}}, ("site", "NOSITE"), 0),
        _row("site", "W1", {"title": "Site", "proxy": 5, "adaptiveContent": "yes"}, org),
        _row("site", "W2", {"title": None}, org),
        _row("site-space", "X2", {"path": "x", "space": None}, ("site", "W1"), 0),
        _row("site-section", "Y1", {"title": "Empty", "path": "e"}, ("site", "W1"), 0),
        _row("site-section", "Y2", {"title": None, "sectionGroup": {"id": "G"}}, ("site", "W1"), 1),
        _row("openapi-spec", "O1", {"slug": "text-unread"}, org),
        _row("team", "T1", {}, org),
        _row("saml-provider", "P1", {"label": "Okta", "defaultTeam": {"id": "NOTEAM"}}, org),
        _row("custom-field", "F", {"name": "f", "type": None, "options": "a"}, org),
        _row("page", "S2/P", {"title": None}, ("space", "S2"), 0),
    ]
    source = Snapshot.from_rows("src", "SORG", rows)
    plan = plan_copy(source, Snapshot("dst", "TORG"), IdMap(), "mirror", content=ContentStrategy(same_credentials=True), with_access=True)
    dependencies(plan)
    reasons = " / ".join(s.reason for s in plan.skips)
    for expected in (
        "parent collection is not in the source", "its title is missing or not text", "its space is not copied",
        "source text could not be read", "it has no title", "defaultTeam names a team that is not copied",
    ):
        assert expected in reasons, expected
    assert "create:space:S2" in keys(plan) and "create:site-section:Y1" in keys(plan)
    section = next(op for op in plan.ops if op.key == "create:site-section:Y1")
    assert section.makes == [] and section.body["spaceId"] == Ref("space", "S2")  # made with any copied space, its seed deleted


def test_a_stale_id_map_entry_is_replaced() -> None:
    rows = [_row("organization", "SORG", {}), _row("collection", "C1", {"title": "Guides"}, ("organization", "SORG"), 0)]
    idmap = IdMap()
    idmap.put("collection", "C1", "GONE", "created")
    plan = plan_copy(Snapshot.from_rows("src", "SORG", rows), Snapshot("dst", "TORG"), idmap)
    op = next(op for op in plan.ops if op.key == "create:collection:C1")
    assert op.target_id == "GONE" and "GONE" in op.note
