"""Applying hand-built plans to an empty organization of the emulator over loopback:
order, the journal and the id map, lost answers, a killed process, dry runs, concurrency."""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from syncd.api import ApiResponse, TenantClient
from syncd.config import RetryConfig
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.routes.spaces import org_collections, org_spaces
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.mirror import Mirror, Row, content_hash
from syncd.mirror import replication as rep
from syncd.replay.apply import (
    ApplyProgress,
    ApplyRefused,
    ApplyResult,
    apply_plan,
    reconcile_intents,
)
from syncd.replay.ops import Match, Op, Plan, Ref, op_to_json, path_ref
from tests.conftest import ALL_TOKEN, Api

SPEC = "orgs=1,collections=2,spaces=2,pages=1,files=0,sites=0,sections=0,members=1,teams=1,saml=0,openapi=0,translations=0,custom_fields=1,comments=0,change_requests=0,integrations=0,empty_orgs=1"
SOURCE_TENANT, TARGET_TENANT = "src", "dst"
FAST_RETRY = RetryConfig(max_attempts=3, initial_wait=0.01, max_wait=0.05)


@pytest.fixture
async def emu() -> AsyncIterator[RunningEmulator]:
    """A source organization and an empty target organization."""
    store = Store(seed=11)
    generated = generate(store, parse_spec(SPEC), seed=11, all_token=ALL_TOKEN)
    async with serve_emulator(store) as running:
        running.generated = generated
        yield running


@pytest.fixture
def source_org(emu: RunningEmulator) -> str:
    return emu.generated.org_ids[0]


@pytest.fixture
def target_org(emu: RunningEmulator) -> str:
    return emu.generated.org_ids[-1]


@pytest.fixture
async def api(emu: RunningEmulator) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, emu.url, ALL_TOKEN)


@pytest.fixture
async def client(emu: RunningEmulator) -> AsyncIterator[TenantClient]:
    async with TenantClient(TARGET_TENANT, emu.url, ALL_TOKEN, concurrency=8, retry=FAST_RETRY) as c:
        yield c


@pytest.fixture
def mirror(tmp_path: Path) -> Any:
    with Mirror(tmp_path / "state.db") as m:
        yield m


# -- plans built by hand -------------------------------------------------------------------


def create_collection(org: str, source_id: str, title: str, parent: str | None = None) -> Op:
    path = f"/v1/orgs/{org}/collections"
    parent_ref = Ref("collection", parent) if parent else None
    return Op(
        key=f"create:collection:{source_id}", action="create", kind="collection", source_id=source_id, target_id=None,
        method="POST", path=path, body={"title": title, "parent": parent_ref}, title=title,
        match=Match(path, {}, "title", title, "parent", parent_ref),
    )


def create_space(org: str, source_id: str, title: str, parent: str | None = None) -> Op:
    path = f"/v1/orgs/{org}/spaces"
    parent_ref = Ref("collection", parent) if parent else None
    body: dict[str, Any] = {"title": title}
    if parent_ref is not None:
        body["parent"] = parent_ref
    return Op(
        key=f"create:space:{source_id}", action="create", kind="space", source_id=source_id, target_id=None,
        method="POST", path=path, body=body, title=title, match=Match(path, {}, "title", title, "parent", parent_ref),
    )


def move_space(source_id: str, parent: str) -> Op:
    return Op(
        key=f"move:space:{source_id}", action="move", kind="space", source_id=source_id, target_id=None, method="POST",
        path=f"/v1/spaces/{path_ref('space', source_id)}/move", body={"parent": Ref("collection", parent)},
    )


def create_team(org: str, source_id: str, title: str) -> Op:
    path = f"/v1/orgs/{org}/teams"
    return Op(
        key=f"create:team:{source_id}", action="create", kind="team", source_id=source_id, target_id=None,
        method="PUT", path=path, body={"title": title}, title=title, match=Match(path, {}, "title", title),
    )


def create_field(org: str, source_id: str, name: str, field_type: str = "text") -> Op:
    path = f"/v1/orgs/{org}/custom-fields"
    return Op(
        key=f"create:custom-field:{source_id}", action="create", kind="custom-field", source_id=source_id, target_id=None,
        method="POST", path=path, body={"name": name, "type": field_type, "title": name.title()}, title=name,
        match=Match(path, {}, "name", name),
    )


def handbook_plan(org: str) -> Plan:
    """A collection, a space in it (Ref in the body), a root space moved into it later
    ({ref:...} in the move's path), a team (created by PUT) and a custom field."""
    return Plan([
        move_space("s2", "c1"),  # listed first: it must still wait for what it names
        create_space(org, "s1", "Guide", parent="c1"),
        create_collection(org, "c1", "Handbook"),
        create_space(org, "s2", "Notes"),
        create_team(org, "t1", "Writers"),
        create_field(org, "f1", "tier"),
    ])


async def run_apply(plan: Plan, client: TenantClient, mirror: Mirror, source_org: str, target_org: str, **options: Any) -> ApplyResult:
    return await apply_plan(
        plan, target=client, source=None, mirror=mirror, source_tenant=SOURCE_TENANT, source_org=source_org,
        target_tenant=TARGET_TENANT, target_org=target_org, **options,
    )


async def faults(api: Api, **values: float) -> None:
    status, _ = await api.put("/_emulator/faults", json={"reset": True, **values})
    assert status == 200


async def write_calls(api: Api) -> Counter[tuple[str, str]]:
    _, stats = await api.get("/_emulator/stats")
    return Counter({(r["method"], r["route"]): r["count"] for r in stats["routes"] if r["method"] != "GET"})


def journal_states(mirror: Mirror, run: int | None = None) -> Counter[str]:
    sql, params = "SELECT state, count(*) FROM journal", []
    if run is not None:
        sql, params = sql + " WHERE run = ?", [run]
    return Counter(dict(mirror.db.execute(sql + " GROUP BY state", params).fetchall()))


def idmap(mirror: Mirror, source_org: str, target_org: str) -> Any:
    return rep.load_idmap(mirror, SOURCE_TENANT, source_org, TARGET_TENANT, target_org)


# -- tests ---------------------------------------------------------------------------------


async def test_a_plan_makes_the_objects_with_their_parents_and_maps_them(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    seen: list[ApplyProgress] = []
    result = await run_apply(handbook_plan(target_org), client, mirror, source_org, target_org, on_progress=seen.append)
    assert result.ok, result.summary()
    assert Counter(o.status for o in result.outcomes.values()) == {"done": 6}
    assert result.writes == 6 and result.reads == 0 and not result.reconciled
    assert seen[-1] == ApplyProgress(done=6, total=6, writes=6, failures=0, reads=0)

    ids = idmap(mirror, source_org, target_org)
    collections = await api.all_items(f"/v1/orgs/{target_org}/collections")
    spaces = {s["title"]: s for s in await api.all_items(f"/v1/orgs/{target_org}/spaces")}
    assert [(c["id"], c["title"]) for c in collections] == [(ids.target("collection", "c1"), "Handbook")]
    assert spaces["Guide"]["id"] == ids.target("space", "s1") and spaces["Notes"]["id"] == ids.target("space", "s2")
    assert spaces["Guide"]["parent"] == spaces["Notes"]["parent"] == ids.target("collection", "c1")
    teams = await api.all_items(f"/v1/orgs/{target_org}/teams")
    assert [(t["id"], t["title"]) for t in teams] == [(ids.target("team", "t1"), "Writers")]
    fields = await api.all_items(f"/v1/orgs/{target_org}/custom-fields")
    assert [(f["id"], f["name"]) for f in fields] == [(ids.target("custom-field", "f1"), "tier")]
    assert {ids.origin(k, s) for k, s in ids.entries} == {"created"}

    assert journal_states(mirror, result.run) == {"done": 6}
    rows = rep.journal(mirror, result.run or 0)
    created = {r["op_key"]: r for r in rows}
    assert created["create:space:s1"]["body"] == {"title": "Guide", "parent": ids.target("collection", "c1")}
    assert created["move:space:s2"]["path"] == f"/v1/spaces/{ids.target('space', 's2')}/move"
    # Dependencies: what a later op names was journaled (and sent) before it.
    seq = {r["op_key"]: r["seq"] for r in rows}
    assert seq["create:collection:c1"] < seq["create:space:s1"]
    assert max(seq["create:collection:c1"], seq["create:space:s2"]) < seq["move:space:s2"]
    run = mirror.run(result.run or 0)
    assert run is not None and run["status"] == "complete" and run["stats"]["apply"]["writes"] == 6


async def test_applying_again_creates_nothing_twice(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    plan = handbook_plan(target_org)
    assert (await run_apply(plan, client, mirror, source_org, target_org)).ok
    await api.delete("/_emulator/stats")
    again = await run_apply(plan, client, mirror, source_org, target_org)
    assert again.ok, again.summary()
    assert {o.key for o in again.already_done} == {op.key for op in plan if op.action == "create"}
    assert again.outcomes["move:space:s2"].status == "done"  # a move is idempotent: sent again, harmless
    assert await write_calls(api) == {("POST", "/v1/spaces/{spaceId}/move"): 1}
    assert len(await api.all_items(f"/v1/orgs/{target_org}/spaces")) == 2
    assert len(await api.all_items(f"/v1/orgs/{target_org}/teams")) == 1


async def test_a_create_that_replaces_a_vanished_object_is_sent(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    """The planner puts the stale target id of a mapped object that is gone in `target_id`."""
    op = create_team(target_org, "t1", "Phoenix")
    first = await run_apply(Plan([op]), client, mirror, source_org, target_org)
    old = first.outcomes[op.key].result_id
    assert old is not None
    status, _ = await api.delete(f"/v1/orgs/{target_org}/teams/{old}")
    assert status == 204
    op.target_id = old
    second = await run_apply(Plan([op]), client, mirror, source_org, target_org)
    assert second.outcomes[op.key].status == "done"
    new = idmap(mirror, source_org, target_org).target("team", "t1")
    assert new not in (None, old)
    assert [t["id"] for t in await api.all_items(f"/v1/orgs/{target_org}/teams")] == [new]
    third = await run_apply(Plan([op]), client, mirror, source_org, target_org)  # mapped anew: done
    assert third.outcomes[op.key].status == "already-done" and third.writes == 0


async def test_a_lost_answer_is_found_on_the_target_not_created_again(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    await faults(api, lost=1.0)  # every write takes effect, and its answer is lost
    plan = Plan([create_collection(target_org, "c1", "Lost and found"), create_space(target_org, "s1", "Inside", "c1"),
                 create_team(target_org, "t1", "Night shift")])
    result = await run_apply(plan, client, mirror, source_org, target_org)
    await faults(api)
    assert result.ok, result.summary()
    assert sorted(result.reconciled) == sorted(op.key for op in plan)
    assert result.writes == 3 and result.reads >= 3
    collections = await api.all_items(f"/v1/orgs/{target_org}/collections")
    spaces = await api.all_items(f"/v1/orgs/{target_org}/spaces")
    teams = await api.all_items(f"/v1/orgs/{target_org}/teams")
    assert [c["title"] for c in collections] == ["Lost and found"]
    assert [(s["title"], s["parent"]) for s in spaces] == [("Inside", collections[0]["id"])]
    assert [t["title"] for t in teams] == ["Night shift"]  # a PUT that creates is not retried blindly
    ids = idmap(mirror, source_org, target_org)
    assert ids.target("collection", "c1") == collections[0]["id"] and ids.origin("collection", "c1") == "created"
    assert ids.target("space", "s1") == spaces[0]["id"] and ids.target("team", "t1") == teams[0]["id"]
    assert journal_states(mirror) == {"done": 3}


async def test_many_creates_with_lost_answers_make_each_object_once(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    ops = [create_collection(target_org, f"c{i}", f"Shelf {i}") for i in range(10)]
    ops += [create_space(target_org, f"s{i}-{j}", f"Book {i}.{j}", f"c{i}") for i in range(10) for j in range(2)]
    await faults(api, lost=0.3)
    result = await run_apply(Plan(ops), client, mirror, source_org, target_org)
    await faults(api)
    assert result.ok, result.summary()
    assert result.reconciled, "with 30 writes at 30% some answers are lost"
    collections = await api.all_items(f"/v1/orgs/{target_org}/collections")
    spaces = await api.all_items(f"/v1/orgs/{target_org}/spaces")
    assert Counter(c["title"] for c in collections) == {f"Shelf {i}": 1 for i in range(10)}
    assert Counter(s["title"] for s in spaces) == {f"Book {i}.{j}": 1 for i in range(10) for j in range(2)}
    ids = idmap(mirror, source_org, target_org)
    assert {ids.target("collection", f"c{i}") for i in range(10)} == {c["id"] for c in collections}
    by_id = {s["id"]: s for s in spaces}
    for i in range(10):
        for j in range(2):
            assert by_id[ids.target("space", f"s{i}-{j}")]["parent"] == ids.target("collection", f"c{i}")
    assert journal_states(mirror) == {"done": 30}


def crawled(mirror: Mirror, tenant: str, org: str, spaces: list[dict[str, Any]]) -> None:
    """Record objects in the mirror as a crawl of `tenant` would (only what apply consults)."""
    run = mirror.start_run("sync", tenant, f"{tenant}:{org}")
    mirror.stage(run, [
        Row(tenant, "space", s["id"], org, "organization", org, i, f"spaces:{org}", None, s, content_hash(s))
        for i, s in enumerate(spaces)
    ])
    mirror.finish_run(run)


async def test_a_lost_duplicate_is_told_apart_from_a_same_titled_original(
    emu: RunningEmulator, api: Api, mirror: Mirror, source_org: str, target_org: str
) -> None:
    """Duplicating a space puts the copy right after its original, before any same-titled
    sibling. After a lost answer, neither the original nor a sibling a crawl already saw may
    be taken for the copy (a transfer would then carry a real source space away)."""
    spaces = f"/v1/orgs/{source_org}/spaces"
    _, original = await api.post(spaces, json={"title": "Echo"})
    _, sibling = await api.post(spaces, json={"title": "Echo"})
    crawled(mirror, SOURCE_TENANT, source_org, [original, sibling])
    dup = Op(
        key=f"content:space-duplicate:{original['id']}:duplicate", action="content", kind="space-duplicate",
        source_id=original["id"], target_id=None, method="POST", path=f"/v1/spaces/{original['id']}/duplicate",
        title="Echo", client="source", match=Match(spaces, {}, "title", "Echo", "parent", None),
    )
    await faults(api, lost=1.0)
    async with TenantClient(SOURCE_TENANT, emu.url, ALL_TOKEN, retry=FAST_RETRY) as source, \
            TenantClient(TARGET_TENANT, emu.url, ALL_TOKEN, retry=FAST_RETRY) as target:
        result = await apply_plan(
            Plan([dup]), target=target, source=source, mirror=mirror, source_tenant=SOURCE_TENANT,
            source_org=source_org, target_tenant=TARGET_TENANT, target_org=target_org,
        )
    await faults(api)
    assert result.ok and result.reconciled == [dup.key], result.summary()
    echoes = [s for s in await api.all_items(spaces) if s["title"] == "Echo"]
    assert [s["id"] for s in echoes] == [original["id"], echoes[1]["id"], sibling["id"]]  # the copy sits between
    (copy,) = [s["id"] for s in echoes if s["id"] not in (original["id"], sibling["id"])]
    assert idmap(mirror, source_org, target_org).target("space-duplicate", original["id"]) == copy


async def test_server_errors_on_creates_are_checked_then_sent_again(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    """A 5xx on a POST may or may not have taken effect: look, and send again when absent."""
    ops = [create_collection(target_org, f"c{i}", f"Drawer {i}") for i in range(12)]
    await faults(api, **{"5xx": 0.5})
    first = await run_apply(Plan(ops), client, mirror, source_org, target_org)
    await faults(api)
    assert first.reads >= 1 and first.writes > 12
    assert all(o.status in ("done", "failed") for o in first.outcomes.values())
    # Each failure says why: checked and absent twice, or the check itself failed (the
    # listings get 5xx too): then the intent stays open for the next run.
    assert all("not made after 2 attempts" in o.reason or "left open" in o.reason for o in first.failed)
    second = await run_apply(Plan(ops), client, mirror, source_org, target_org)
    assert second.ok, second.summary()
    titles = Counter(c["title"] for c in await api.all_items(f"/v1/orgs/{target_org}/collections"))
    assert titles == {f"Drawer {i}": 1 for i in range(12)}


async def test_intents_left_open_by_an_earlier_run_are_reconciled_first(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    """A crash between sending and recording (made by hand): one call took effect, the other
    never left. The next apply adopts the first and sends the second, once each."""
    sent_op = create_collection(target_org, "c1", "Sent before the crash")
    unsent_op = create_collection(target_org, "c2", "Never sent")
    run = rep.begin_apply(mirror, SOURCE_TENANT, source_org, TARGET_TENANT, target_org)
    rep.intend(mirror, run, sent_op, {"title": "Sent before the crash"}, sent_op.path)
    status, made = await api.post(sent_op.path, json={"title": "Sent before the crash"})
    assert status == 201
    rep.intend(mirror, run, unsent_op, {"title": "Never sent"}, unsent_op.path)
    rep.finish_apply(mirror, run, "failed", reason="killed")
    assert len(rep.open_intents(mirror, TARGET_TENANT, target_org)) == 2

    result = await run_apply(Plan([sent_op, unsent_op]), client, mirror, source_org, target_org)
    assert result.ok, result.summary()
    assert result.reconciled == ["create:collection:c1"]
    assert result.outcomes["create:collection:c1"].status == "already-done"
    assert result.outcomes["create:collection:c2"].status == "done"
    titles = Counter(c["title"] for c in await api.all_items(f"/v1/orgs/{target_org}/collections"))
    assert titles == {"Sent before the crash": 1, "Never sent": 1}
    assert idmap(mirror, source_org, target_org).target("collection", "c1") == made["id"]
    assert rep.open_intents(mirror, TARGET_TENANT, target_org) == []
    old = {r["op_key"]: r for r in rep.journal(mirror, run)}
    assert old["create:collection:c1"]["state"] == "done" and old["create:collection:c1"]["result_id"] == made["id"]
    assert old["create:collection:c2"]["state"] == "failed" and "not applied" in old["create:collection:c2"]["error"]


async def test_open_intents_can_be_settled_before_planning(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    pair = {"source_tenant": SOURCE_TENANT, "source_org": source_org, "target_tenant": TARGET_TENANT, "target_org": target_org}
    assert await reconcile_intents(target=client, source=None, mirror=mirror, **pair) is None
    assert mirror.runs() == []  # nothing open: no run
    op = create_team(target_org, "t1", "Made before the crash")
    run = rep.begin_apply(mirror, SOURCE_TENANT, source_org, TARGET_TENANT, target_org)
    rep.intend(mirror, run, op, op.body, op.path)
    status, made = await api.put(op.path, json=op.body)
    assert status == 201
    rep.finish_apply(mirror, run, "failed")
    settled = await reconcile_intents(target=client, source=None, mirror=mirror, **pair)
    assert settled is not None and settled.reconciled == [op.key] and settled.writes == 0
    assert idmap(mirror, source_org, target_org).target("team", "t1") == made["id"]
    assert [r["status"] for r in mirror.runs()] == ["failed", "complete"]


async def test_an_open_intent_that_cannot_be_checked_is_not_sent_again(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    op = create_collection(target_org, "c1", "Unknown")
    run = rep.begin_apply(mirror, SOURCE_TENANT, source_org, TARGET_TENANT, target_org)
    rep.intend(mirror, run, op, {"title": "Unknown"}, op.path)
    rep.finish_apply(mirror, run, "failed")
    await api.put("/_emulator/forbidden", json={"patterns": ["/collections$"]})
    result = await run_apply(Plan([op, create_space(target_org, "s1", "Child", "c1")]), client, mirror, source_org, target_org)
    await api.put("/_emulator/forbidden", json={"patterns": []})
    assert result.outcomes["create:collection:c1"].status == "failed"
    assert "could not be checked" in result.outcomes["create:collection:c1"].reason
    assert result.outcomes["create:space:s1"].status == "skipped"
    assert result.writes == 0
    assert len(rep.open_intents(mirror, TARGET_TENANT, target_org)) == 1  # still open for a later run
    assert mirror.run(result.run or 0)["status"] == "partial"  # type: ignore[index]


async def test_a_missing_reference_fails_the_op_and_skips_its_dependents(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    orphan = create_space(target_org, "s1", "Orphan", parent="ghost")
    after_orphan = create_team(target_org, "t1", "Waits for the orphan")
    after_orphan.after = [orphan.key]
    bad_field = create_field(target_org, "f1", "level", field_type="no-such-type")
    plan = Plan([orphan, move_space("s1", "c1"), create_collection(target_org, "c1", "Fine"), after_orphan, bad_field,
                 create_space(target_org, "s2", "Needs the bad field")])
    plan.ops[-1].after = [bad_field.key]
    result = await run_apply(plan, client, mirror, source_org, target_org)
    outcomes = result.outcomes
    assert outcomes["create:space:s1"].status == "failed"
    assert "collection ghost is not on the target" in outcomes["create:space:s1"].reason
    assert outcomes["move:space:s1"].status == "skipped" and "ghost" in outcomes["move:space:s1"].reason
    assert outcomes["create:team:t1"].status == "skipped" and "ghost" in outcomes["create:team:t1"].reason
    assert outcomes["create:collection:c1"].status == "done"
    assert outcomes["create:custom-field:f1"].status == "failed" and "400" in outcomes["create:custom-field:f1"].reason
    assert outcomes["create:space:s2"].status == "skipped" and "create:custom-field:f1 failed" in outcomes["create:space:s2"].reason
    assert not result.ok and "failed" in result.summary() and "ghost" in result.summary()
    assert journal_states(mirror, result.run) == {"done": 1, "failed": 1}  # nothing journaled for unresolvable ops
    assert mirror.run(result.run or 0)["status"] == "partial"  # type: ignore[index]


async def test_a_dry_run_sends_no_write_and_journals_nothing(
    api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    await api.delete("/_emulator/stats")
    printed: list[str] = []
    result = await run_apply(handbook_plan(target_org), client, mirror, source_org, target_org, dry_run=True, echo=printed.append)
    assert await write_calls(api) == {}
    assert result.dry_run and result.run is None and result.writes == 0
    assert printed == result.would_send and len(printed) == 6
    assert f'POST /v1/orgs/{target_org}/spaces {{"parent": "<new collection c1>", "title": "Guide"}}' in printed
    assert "POST /v1/spaces/<new space s2>/move" in " ".join(printed)
    assert mirror.runs() == [] and journal_states(mirror) == {} and idmap(mirror, source_org, target_org).entries == {}
    assert "dry run: 6 calls" in result.summary()


async def test_refused_and_broken_plans_send_nothing(client: TenantClient, mirror: Mirror, source_org: str, target_org: str) -> None:
    with pytest.raises(ApplyRefused, match="max-delete"):
        await run_apply(Plan([create_team(target_org, "t1", "x")], refused="12 deletes beyond --max-delete 10"), client, mirror, source_org, target_org)
    a, b = create_team(target_org, "t1", "a"), create_team(target_org, "t2", "b")
    a.after, b.after = [b.key], [a.key]
    with pytest.raises(ValueError, match="cycle"):
        await run_apply(Plan([a, b]), client, mirror, source_org, target_org)
    with pytest.raises(ValueError, match="two ops"):
        await run_apply(Plan([a, a]), client, mirror, source_org, target_org)
    assert mirror.runs() == []


class Recording(TenantClient):
    """Counts write calls in flight (the emulator's latency makes them overlap when allowed)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = 0
        self.max_in_flight = 0
        self.events: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
        if method == "GET":
            return await super().request(method, path, **kwargs)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.events.append(("start", str((kwargs.get("json") or {}).get("title"))))
        try:
            return await super().request(method, path, **kwargs)
        finally:
            self.in_flight -= 1
            self.events.append(("end", str((kwargs.get("json") or {}).get("title"))))


async def test_independent_ops_overlap_and_dependent_ones_wait(
    emu: RunningEmulator, api: Api, mirror: Mirror, source_org: str, target_org: str
) -> None:
    ops = [create_collection(target_org, f"c{i}", f"Parallel {i}") for i in range(8)]
    ops.append(create_space(target_org, "s1", "Child", parent="c0"))
    ops.append(create_collection(target_org, "n1", "Nested", parent="c0"))
    await faults(api, latency=40)
    async with Recording(TARGET_TENANT, emu.url, ALL_TOKEN, concurrency=16, retry=FAST_RETRY) as recording:
        result = await run_apply(Plan(ops), recording, mirror, source_org, target_org, concurrency=4)
    await faults(api)
    assert result.ok, result.summary()
    assert 2 <= recording.max_in_flight <= 4
    order = recording.events
    for child in ("Child", "Nested"):
        assert order.index(("end", "Parallel 0")) < order.index(("start", child))


async def test_cancelling_leaves_journal_and_id_map_consistent(
    emu: RunningEmulator, api: Api, client: TenantClient, mirror: Mirror, source_org: str, target_org: str
) -> None:
    ops = [create_collection(target_org, f"c{i}", f"Box {i}") for i in range(12)]
    await faults(api, latency=20)
    with anyio.CancelScope() as scope:

        def stop_after_three(progress: ApplyProgress) -> None:
            if progress.done >= 3:
                scope.cancel()

        await run_apply(Plan(ops), client, mirror, source_org, target_org, concurrency=3, on_progress=stop_after_three)
    await faults(api)
    assert scope.cancelled_caught
    runs = mirror.runs()
    assert [r["status"] for r in runs] == ["cancelled"]
    ids = idmap(mirror, source_org, target_org)
    done = [r for r in rep.journal(mirror, runs[0]["id"]) if r["state"] == "done"]
    assert len(done) >= 3 and all(ids.target("collection", r["source_id"]) == r["result_id"] for r in done)

    result = await run_apply(Plan(ops), client, mirror, source_org, target_org)
    assert result.ok, result.summary()
    titles = Counter(c["title"] for c in await api.all_items(f"/v1/orgs/{target_org}/collections"))
    assert titles == {f"Box {i}": 1 for i in range(12)}
    assert len(idmap(mirror, source_org, target_org).entries) == 12
    assert rep.open_intents(mirror, TARGET_TENANT, target_org) == []


_CHILD = textwrap.dedent(
    """
    import json, sys
    import anyio
    from syncd.api import TenantClient
    from syncd.config import RetryConfig
    from syncd.mirror import Mirror, Row, content_hash
    from syncd.replay.apply import apply_plan
    from syncd.replay.ops import Plan, op_from_json

    url, token, db, plan_file, source_org, target_org = sys.argv[1:7]

    async def main() -> None:
        plan = Plan([op_from_json(op) for op in json.loads(open(plan_file).read())])
        retry = RetryConfig(max_attempts=3, initial_wait=0.01, max_wait=0.05)
        with Mirror(db) as mirror:
            async with TenantClient("dst", url, token, retry=retry) as client:
                await apply_plan(plan, target=client, source=None, mirror=mirror, source_tenant="src",
                                 source_org=source_org, target_tenant="dst", target_org=target_org, concurrency=3)

    anyio.run(main)
    """
)


def made_on_target(emu: RunningEmulator, org: str) -> set[str]:
    """Titles of the collections and spaces the emulator holds in `org` (read in-process)."""
    return {r["title"] for r in org_collections(emu.store, org) + org_spaces(emu.store, org)}


@pytest.mark.parametrize("moment", ["calls in flight", "effect made, answer not recorded"])
async def test_a_killed_apply_is_finished_by_the_next_one_without_duplicates(
    moment: str, emu: RunningEmulator, api: Api, client: TenantClient, tmp_path: Path, source_org: str, target_org: str
) -> None:
    """SIGKILL a real apply process, then apply again: each object exists once and is mapped.

    "calls in flight": killed while requests wait in the emulator's latency (they never take
    effect). "effect made": every answer is lost, so after each create the child lists the
    target to look for it; it is killed while an intent is open whose object already exists.
    """
    ops = [create_collection(target_org, f"c{i}", f"Crate {i}") for i in range(6)]
    ops += [create_space(target_org, f"s{i}", f"Item {i}", f"c{i % 6}") for i in range(12)]
    plan_file, script, db = tmp_path / "plan.json", tmp_path / "child.py", tmp_path / "state.db"
    plan_file.write_text(json.dumps([op_to_json(op) for op in ops]))
    script.write_text(_CHILD)
    with Mirror(db):
        pass  # the schema exists before the child and the poller open it
    applied = moment.startswith("effect")
    await faults(api, latency=100, **({"lost": 1.0} if applied else {}))
    log = (tmp_path / "child.log").open("wb")
    proc = await anyio.open_process(
        [sys.executable, str(script), emu.url, ALL_TOKEN, str(db), str(plan_file), source_org, target_org],
        cwd=Path(__file__).resolve().parents[1], stdout=log, stderr=log,
    )
    reader = sqlite3.connect(db, timeout=5)

    def open_titles() -> set[str]:
        rows = reader.execute("SELECT body FROM journal WHERE state = 'sent'").fetchall()
        return {json.loads(body)["title"] for (body,) in rows}

    try:
        with anyio.fail_after(15):
            while True:
                await anyio.sleep(0.01)
                assert proc.returncode is None, (tmp_path / "child.log").read_text()
                done = reader.execute("SELECT count(*) FROM journal WHERE state = 'done'").fetchone()[0]
                sent = open_titles()
                if done >= 3 and (sent & made_on_target(emu, target_org) if applied else sent):
                    proc.kill()  # SIGKILL: no cleanup of any kind
                    break
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        await proc.aclose()
        log.close()
    await faults(api)
    left_open = open_titles()
    reader.close()
    assert left_open
    if applied:
        assert left_open & made_on_target(emu, target_org)

    with Mirror(db) as mirror:
        result = await run_apply(Plan(ops), client, mirror, source_org, target_org)
        assert result.ok, result.summary()
        runs = mirror.runs()
        if applied:
            assert result.reconciled  # found, not created again
        assert [r["status"] for r in runs] == ["failed", "complete"]  # the killed run was recovered
        assert rep.open_intents(mirror, TARGET_TENANT, target_org) == []
        ids = idmap(mirror, source_org, target_org)
    collections = await api.all_items(f"/v1/orgs/{target_org}/collections")
    spaces = await api.all_items(f"/v1/orgs/{target_org}/spaces")
    assert Counter(c["title"] for c in collections) == {f"Crate {i}": 1 for i in range(6)}
    assert Counter(s["title"] for s in spaces) == {f"Item {i}": 1 for i in range(12)}
    assert {ids.target("collection", f"c{i}") for i in range(6)} == {c["id"] for c in collections}
    assert {ids.target("space", f"s{i}") for i in range(12)} == {s["id"] for s in spaces}
    parents = {s["id"]: s["parent"] for s in spaces}
    assert all(parents[ids.target("space", f"s{i}")] == ids.target("collection", f"c{i % 6}") for i in range(12))
