"""Applying: lost answers found by what appeared, never created twice; the source never left
changed; interrupted runs settled by the next; dry runs send nothing. In-process emulator over
loopback, both behaviour profiles where the service's choices matter. syncd's state (journal,
id map, mirror) in a SQLite file under both profiles, and in PostgreSQL under the default one:
the profile is the service's behaviour, the backend syncd's own (as in test_copy_e2e)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from syncd.api import TenantClient
from syncd.config import Settings, TargetRef
from syncd.copy import UnsettledError, copy_org, dry_run_lines, plan_org
from syncd.copy.journal import Pair, begin, finish, load_idmap, open_intents
from syncd.copy.ops import Expect
from syncd.copy.rules import ref_id
from syncd.copy.writer import CallFailed, Writer
from syncd.emulator.canonical import dump_org
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.read.sync import StateLocation
from syncd.state import StateStore
from tests.conftest import ALL_TOKEN, Api
from tests.copy_support import Org, assert_no_state_file, read, settings_at
from tests.oracle import copied_view

SPEC = "orgs=1,empty_orgs=2,collections=3,spaces=6,pages=2,files=1,sites=1,sections=2,members=1,teams=1,saml=0,openapi=1,translations=1,custom_fields=1,comments=0,change_requests=0,integrations=0"


@dataclass
class World:
    running: RunningEmulator
    api: Api
    orgs: list[str]
    settings: Settings
    db: StateLocation

    def dump(self, org: int) -> dict[str, Any]:
        return dump_org(self.running.store, self.orgs[org])

    def copied(self, org: int) -> dict[str, Any]:
        return copied_view(self.dump(org))

    def writes(self) -> int:
        routes = self.running.emulator.stats.as_dict()["routes"]
        return sum(r["count"] for r in routes if r["method"] in ("POST", "PUT", "PATCH", "DELETE"))

    def faults(self, **values: float) -> None:
        self.running.emulator.faults.__init__()  # type: ignore[misc]
        self.running.emulator.faults.update({k.replace("_", ""): v for k, v in values.items()})

    async def copy(self, target: int = 1, source: int = 0, **options: Any):  # type: ignore[no-untyped-def]
        return await copy_org(self.settings, TargetRef("src", self.orgs[source]), TargetRef("dst", self.orgs[target]), db=self.db, **options)


@pytest.fixture(params=[("default", "sqlite"), ("divergent", "sqlite"), ("default", "postgresql")], ids=["default-sqlite", "divergent-sqlite", "default-postgresql"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    """The emulator under a profile, syncd's state on a backend (a test's own PostgreSQL schema)."""
    profile, backend = request.param
    state_dir = tmp_path / "state"
    location: StateLocation = state_dir / "syncd.db" if backend == "sqlite" else str(request.getfixturevalue("pg_url"))
    store = Store(seed=5)
    generated = generate(store, parse_spec(SPEC), seed=5, all_token=ALL_TOKEN)
    async with serve_emulator(store, profile=profile, fault_seed=7) as running, aiohttp.ClientSession() as session:
        settings = settings_at(running.url, state_dir, location, src=ALL_TOKEN, dst=ALL_TOKEN)
        yield World(running, Api(session, running.url, ALL_TOKEN), generated.org_ids, settings, location)
    assert_no_state_file(location, state_dir)


def no_duplicates(dump: dict[str, Any]) -> bool:
    """No two siblings share a label (the dump numbers them `#2`), no service-made copy name."""
    rows = [row for rows in dump["kinds"].values() for row in rows]
    return not any("#" in row["path"] or "(copy)" in row["path"] for row in rows)


async def test_lost_answers_are_found_not_made_again(world: World) -> None:
    source_before = world.dump(0)
    world.faults(lost=0.3)
    report = await world.copy()
    world.faults()
    assert report.equal, report.verification.counts()
    reconciled = [key for r in report.rounds if r.apply for key in r.apply.reconciled]
    assert reconciled, "no answer was lost: the test proves nothing"
    assert world.copied(1) == world.copied(0) and no_duplicates(world.dump(1))
    assert world.dump(0) == source_before  # duplicates made for transfers are gone from the source


async def test_a_refused_transfer_leaves_no_duplicate_in_the_source(world: World) -> None:
    source_before = world.dump(0)
    world.running.emulator.forbidden[:] = [r"/transfer$"]
    report = await world.copy(max_rounds=1)
    world.running.emulator.forbidden[:] = []
    assert not report.equal
    failed = report.rounds[0].apply.failed  # type: ignore[union-attr]
    assert failed and all("transfer" in o.reason or "failed" in o.reason for o in failed if o.kind == "space")
    assert world.dump(0) == source_before and not report.residue
    with StateStore(world.db) as mirror:
        assert not load_idmap(mirror, Pair("src", world.orgs[0], "dst", world.orgs[1])).of_kind("space-duplicate")
    again = await world.copy()  # the next run copies what the refusals left out
    assert again.equal and world.dump(0) == source_before


async def test_an_interrupted_copy_is_finished_by_the_next_without_duplicates(world: World) -> None:
    source_before = world.dump(0)
    world.faults(latency=5)
    with anyio.CancelScope() as scope:

        def cut(progress: Any) -> None:
            if progress.done >= 12:
                scope.cancel()

        await world.copy(on_apply=cut)
    world.faults()
    assert scope.cancelled_caught
    report = await world.copy()
    assert report.equal, report.verification.counts()
    assert world.copied(1) == world.copied(0) and no_duplicates(world.dump(1)) and world.dump(0) == source_before
    before = world.writes()
    assert not (await world.copy()).rounds and world.writes() == before  # nothing left: no write at all


async def test_a_lost_create_that_cannot_be_looked_for_stops_the_next_run_until_it_can(world: World) -> None:
    source = Org(world.api, world.orgs[2])  # a small source: one collection
    target = (await world.api.get(f"/v1/orgs/{world.orgs[1]}"))[1]
    await source.call("PATCH", f"/v1/orgs/{source.id}", {"emailDomains": target["emailDomains"]})
    await source.collection("Lonely")
    world.faults(lost=1.0)
    world.running.emulator.forbidden[:] = [rf"^GET /v1/orgs/{world.orgs[1]}/collections$"]  # every answer lost, the listing refused
    first = await world.copy(source=2, max_rounds=1)
    world.faults()
    assert not first.equal
    assert any("cannot be looked for" in warning for warning in first.warnings)
    with StateStore(world.db) as mirror:
        open_ = open_intents(mirror, Pair("src", world.orgs[2], "dst", world.orgs[1]))
    assert [i["kind"] for i in open_] == ["collection"] and "left open" in open_[0]["error"]
    before = world.writes()
    with pytest.raises(UnsettledError, match="cannot be looked for"):
        await world.copy(source=2)
    assert world.writes() == before  # nothing was written
    world.running.emulator.forbidden[:] = []
    report = await world.copy(source=2)
    assert report.equal and any("was made" in line for line in report.settled), report.settled
    assert [row["path"] for row in world.dump(1)["kinds"]["collection"]] == ["collection:Lonely"]


async def test_a_dry_run_sends_nothing(world: World) -> None:
    before = world.writes()
    reading, plan = await plan_org(world.settings, TargetRef("src", world.orgs[0]), TargetRef("dst", world.orgs[1]), db=world.db)
    lines = dry_run_lines(plan, reading.idmap)
    assert world.writes() == before and len(lines) == len(plan.ops)
    assert any(line.startswith("+ create space '") and ": POST /v1/spaces/" in line and line.endswith("then POST /v1/spaces/<the duplicate>/transfer") for line in lines)
    assert any("<new collection " in line for line in lines) and any(line.startswith("↻ settle tree") for line in lines)


async def test_what_appeared_is_found_and_two_new_objects_are_told_apart_by_what_was_sent(world: World, tmp_path: Path) -> None:
    org = Org(world.api, world.orgs[2])
    await read(world.settings, TargetRef("dst", world.orgs[2]), world.db)  # what was there before
    pair = Pair("src", world.orgs[0], "dst", world.orgs[2])
    with StateStore(world.db) as mirror:
        run = begin(mirror, pair)
        async with TenantClient.from_settings(world.settings, "dst") as client:
            writer = Writer(store=mirror, pair=pair, run=run, idmap=load_idmap(mirror, pair), target=client, source=None)
            expect = Expect(f"/v1/orgs/{world.orgs[2]}/collections", parent_field="parent", parent=None)
            assert await writer.find_made(expect, ("collection", "S1"), run) is None
            one = await org.collection("One")
            found = await writer.find_made(expect, ("collection", "S1"), run)
            assert found is not None and found["id"] == one
            two = await org.collection("Two")
            assert (await writer.find_made(expect, ("collection", "S1"), run, {"title": "Two"}))["id"] == two
            with pytest.raises(CallFailed, match="2 new objects appeared"):
                await writer.find_made(expect, ("collection", "S1"), run, {"title": "Three"})
            writer.idmap.put("collection", "S0", one, "created")  # mapped to another source object: not a candidate
            assert (await writer.find_made(expect, ("collection", "S1"), run))["id"] == two
        finish(mirror, run, "complete")
    assert json.dumps(world.dump(2))  # the organization is still whole


async def test_an_open_intent_journaled_by_an_older_syncd_is_settled_too(world: World) -> None:
    source = Org(world.api, world.orgs[2])
    target = (await world.api.get(f"/v1/orgs/{world.orgs[1]}"))[1]
    await source.call("PATCH", f"/v1/orgs/{source.id}", {"emailDomains": target["emailDomains"]})
    legacy = await source.collection("Legacy")
    pair = Pair("src", world.orgs[2], "dst", world.orgs[1])
    with StateStore(world.db) as mirror:
        run = begin(mirror, pair)
        old_op = {  # the op as the previous write side journaled it
            "key": f"create:collection:{legacy}", "action": "create", "kind": "collection", "source_id": legacy, "target_id": None,
            "method": "POST", "path": f"/v1/orgs/{world.orgs[1]}/collections", "params": {}, "body": {"title": "Legacy"}, "after": [],
            "title": "Legacy", "produces": [], "client": "target", "result_id_field": "id", "note": "",
            "match": {"path": f"/v1/orgs/{world.orgs[1]}/collections", "params": {}, "field": "title", "value": "Legacy", "parent_field": "parent", "parent": None},
        }
        with mirror.transaction() as db:
            db.execute(
                "INSERT INTO journal (run, seq, source_tenant, source_org, target_tenant, target_org, op_key, kind, source_id, method, path, body, op, state, attempts) "
                "VALUES (?, 1, ?, ?, ?, ?, ?, 'collection', ?, 'POST', ?, ?, ?, 'sent', 1)",
                [run, *pair.values(), old_op["key"], legacy, old_op["path"], json.dumps(old_op["body"]), json.dumps(old_op)],
            )
        finish(mirror, run, "failed", reason="killed")
    made = await Org(world.api, world.orgs[1]).collection("Legacy")  # what the call made before its answer was lost
    report = await world.copy(source=2)
    assert report.equal and any(f"was made ({made})" in line for line in report.settled), report.settled
    assert [row["path"] for row in world.dump(1)["kinds"]["collection"]] == ["collection:Legacy"]  # not made twice


async def test_a_site_layout_changed_in_the_source_is_settled_from_the_target_as_listed(world: World) -> None:
    assert (await world.copy()).equal
    org, site = world.orgs[0], (await world.api.all_items(f"/v1/orgs/{world.orgs[0]}/sites"))[0]["id"]
    base = f"/v1/orgs/{org}/sites/{site}"
    source = Org(world.api, org)
    sections = await world.api.all_items(f"{base}/sections")
    spaces = [s["id"] for s in await world.api.all_items(f"/v1/orgs/{org}/spaces")]
    # a new section at the front, holding two site-spaces whose paths then swap, the second the default
    new, first_site_space = await source.section(site, spaces[0], "Brand new")
    second = await source.site_space(site, spaces[1], new)
    await source.move("site-section", new, site=site, before=sections[0]["id"])
    await source.call("PATCH", f"{base}/site-spaces/{first_site_space}", {"path": "swap-b"})
    await source.call("PATCH", f"{base}/site-spaces/{second}", {"path": "swap-a"})
    await source.call("PATCH", f"{base}/site-spaces/{first_site_space}", {"path": "second"})
    await source.call("PATCH", f"{base}/site-spaces/{second}", {"path": "first"})
    await source.call("PATCH", f"{base}/sections/{new}", {"defaultSiteSpace": second, "path": "brand-new"})
    group = await source.group(site, "Grouped")
    await source.call("POST", f"{base}/section-groups/{group}/sections", {"sectionId": sections[-1]["id"]})
    report = await world.copy()
    assert report.equal, report.verification.counts()
    assert world.copied(1) == world.copied(0) and no_duplicates(world.dump(1))
    before = world.writes()
    assert not (await world.copy()).rounds and world.writes() == before


async def test_creates_into_one_container_come_out_in_the_source_order_at_either_end(world: World) -> None:
    """Whether new objects land first or last (the profiles differ), a container's new spaces
    are created so that the settle step moves few of them: those created before the run saw
    where new objects land (two, where this container is where it looks), not all of them
    (seven of eight, landing reversed)."""
    source = Org(world.api, world.orgs[0])
    shelf = await source.collection("Shelf")
    for n in range(8):
        await source.space(f"Book {n}", shelf)

    async def books(org: str) -> dict[str, str]:
        collections = await world.api.all_items(f"/v1/orgs/{org}/collections")
        (container,) = [c["id"] for c in collections if c["title"] == "Shelf"]
        return {s["id"]: s["title"] for s in await world.api.all_items(f"/v1/orgs/{org}/spaces") if ref_id(s.get("parent")) == container}

    report = await world.copy()
    assert report.equal, report.verification.counts()
    copied = await books(world.orgs[1])
    assert list(copied.values()) == list((await books(world.orgs[0])).values())
    with StateStore(world.db) as mirror, mirror.reading() as db:
        moved = [row[0] for row in db.execute("SELECT path FROM journal WHERE op_key LIKE 'settle:tree:order:space:%'")]
    shelf_moves = [path for path in moved if path.split("/")[-2] in copied]
    assert len(shelf_moves) <= 3, shelf_moves
