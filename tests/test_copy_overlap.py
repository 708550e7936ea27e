"""Creates into one listing that overlap (`syncd.copy.overlap`): which may, decided from the
plan alone; over loopback, that they really are in flight together, that the order the
service then keeps (or not) is settled afterwards, and that a lost answer never makes an
object twice, under every emulator profile's answer to where new objects land."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from syncd.api import TenantClient
from syncd.cli import main
from syncd.config import RetryConfig, Settings, TargetRef
from syncd.copy import UnsettledError, copy_org
from syncd.copy.journal import Pair as JPair
from syncd.copy.journal import begin, finish, intend, load_idmap
from syncd.copy.ops import Expect, Op, expect_to_json
from syncd.copy.overlap import Names, group_names, names_to_json, normal_name, overlap_width, placement_settled, told_apart
from syncd.copy.placement import Placement, Turnstile
from syncd.copy.site_layout import Change, lane
from syncd.copy.writer import Unexplained, Writer
from syncd.emulator.canonical import dump_org
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.state import StateStore
from tests.conftest import ALL_TOKEN, Api
from tests.copy_support import Org, read, settings_for
from tests.oracle import copied_view
from tests.test_copy_e2e import FAULTS, Emulator, emulator, emulators, env, kill_apply_after  # noqa: F401 - the end-to-end fixtures
from tests.test_copy_e2e import no_duplicates as e2e_no_duplicates
from tests.test_copy_e2e import nothing_twice as e2e_nothing_twice

PROFILES = ["default", "divergent", "mixed:3", "mixed:8"]


def _create(key: str, title: Any, kind: str = "collection", recipe: str = "call") -> Op:
    return Op(key=key, action="create", kind=kind, source_id=key, recipe=recipe, method="POST", path="/x", body={"title": title}, serial="tree:")  # type: ignore[arg-type]


# -- the decision, from the plan alone ------------------------------------------------------------


def test_distinct_titles_overlap_once_the_placement_is_known() -> None:
    ops = [_create("a", "Alpha"), _create("b", "Beta"), _create("c", "Gamma", kind="space")]
    apart = told_apart(ops)
    assert set(apart) == {"a", "b", "c"}
    assert overlap_width(True, placement_settled("collection", wanted=False), 16) == 16
    assert overlap_width(True, placement_settled("collection", wanted=True), 16) == 1  # placement not observed yet
    assert placement_settled("team", wanted=True)  # no positions: where it lands does not matter
    assert group_names(ops)["a"].others == {"beta"}  # the other collections' names, not the space's


def test_siblings_of_one_name_stay_one_after_another() -> None:
    ops = [_create("a", "Guide"), _create("b", "  guide "), _create("c", "Other"), _create("d", "Guide", kind="space")]
    apart = told_apart(ops)
    assert set(apart) == {"c", "d"}  # a and b differ only in case and spaces; d is of another listing
    assert overlap_width("a" in apart, True, 16) == 1


def test_creates_without_a_name_they_send_stay_alone() -> None:
    ops = [_create("a", None), _create("b", ""), _create("c", "Copy", recipe="duplicate-transfer"), _create("d", "Fine")]
    assert set(told_apart(ops)) == {"d"}


async def test_the_turn_is_shared_by_creates_told_apart_and_kept_by_one_that_is_not() -> None:
    placement = Placement()
    placement.look("collection", "a", "b", ["a", "b"])  # settled: new objects land last
    turnstile, inside, most = Turnstile(placement, wide=4), set(), []

    async def op(index: int, distinct: bool) -> None:
        await turnstile.acquire(index, "collection", distinct)
        inside.add(index)
        most.append((index, set(inside)))
        await anyio.sleep(0.02)
        inside.discard(index)
        turnstile.release(index)

    async with anyio.create_task_group() as tg:
        for index, distinct in enumerate([True, True, True, False, True, True]):
            tg.start_soon(op, index, distinct)
            await anyio.sleep(0)
    assert turnstile.peak > 1 and not turnstile.held
    alone = next(seen for index, seen in most if index == 3)
    assert alone == {3}, "the create that cannot be told apart had company"
    assert max(len(seen) for index, seen in most if index < 3) > 1


async def test_an_unknown_placement_keeps_creates_one_after_another() -> None:
    turnstile = Turnstile(Placement(), wide=4)
    assert await turnstile.acquire(0, "collection", True) is False  # alone: nobody may join
    entered: list[int] = []

    async def second() -> None:
        await turnstile.acquire(1, "collection", True)
        entered.append(1)
        turnstile.release(1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(second)
        await anyio.sleep(0.02)
        assert entered == [] and turnstile.waiting == 1
        turnstile.release(0)
    assert entered == [1] and turnstile.peak == 1


def test_a_site_settle_patches_no_object_from_two_lanes_at_once() -> None:
    """Changes of different lanes go side by side: a section's path and its default site-space
    (both patch the section) share one; each container's site-space paths and moves have
    their own; the navigation's moves (top level and inside groups) are one lane."""
    section_path = Change("path", "site-section", "s1", value="a")
    section_default = Change("default-site-space", "site-space", "ss1", container="s1")
    site_default = Change("default-section", "site-section", "s2")
    assert lane(section_path) == lane(section_default) == lane(site_default)
    in_s1, in_s2 = Change("path", "site-space", "ss1", value="x", container="s1"), Change("path", "site-space", "ss2", value="x", container="s2")
    assert len({lane(in_s1), lane(in_s2), lane(section_path)}) == 3
    top, in_group = Change("move", "site-section-group", "g1", ("after", "s1")), Change("move", "site-section", "s3", ("after", "s2"))
    assert lane(top) == lane(in_group) != lane(Change("move", "site-space", "ss1", None, container="s1"))


# -- over loopback --------------------------------------------------------------------------------


@dataclass
class Pair:
    running: RunningEmulator
    source: Org
    target: str
    settings: Settings
    db: Path

    def faults(self, **values: float) -> None:
        self.running.emulator.faults.__init__()  # type: ignore[misc]
        self.running.emulator.faults.update(values)

    async def copy(self, **options: Any):  # type: ignore[no-untyped-def]
        return await copy_org(self.settings, TargetRef("src", self.source.id), TargetRef("dst", self.target), db=self.db, **options)

    def writes(self) -> int:
        routes = self.running.emulator.stats.as_dict()["routes"]
        return sum(r["count"] for r in routes if r["method"] in ("POST", "PUT", "PATCH", "DELETE"))

    def copied(self, org: str) -> dict[str, Any]:
        return copied_view(dump_org(self.running.store, org))

    def twice(self, org: str) -> list[str]:
        """Paths of siblings that share a label (the dump numbers them `#2`) or a copy's name."""
        rows = [row for rows in dump_org(self.running.store, org)["kinds"].values() for row in rows]
        return sorted(row["path"] for row in rows if "#" in row["path"] or "(copy)" in row["path"])

    def nothing_twice(self) -> bool:
        """The target holds no object twice but what the source does (its two `Same`)."""
        return self.twice(self.target) == self.twice(self.source.id)


@pytest.fixture(params=PROFILES)
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pair]:
    """Two organizations, each seen by its own token (spaces are then plain creates)."""
    store = Store(seed=13)
    generated = generate(store, parse_spec("orgs=0,empty_orgs=2"), seed=13, all_token=ALL_TOKEN)
    async with serve_emulator(store, profile=request.param, fault_seed=5) as running, aiohttp.ClientSession() as session:
        settings = settings_for(running.url, tmp_path / "state", src="org1-token", dst="org2-token")
        # Faults are retried after short waits: the same calls, less sleep (54 s -> a few under `divergent`).
        settings = settings.model_copy(update={"retry": RetryConfig(initial_wait=0.02, max_wait=0.1)})
        api = Api(session, running.url, ALL_TOKEN)
        yield Pair(running, Org(api, generated.org_ids[0]), generated.org_ids[1], settings, tmp_path / "state" / "syncd.db")


async def wide_source(org: Org) -> dict[str, str]:
    """Siblings told apart under the root and in `Shelf`; two of one title in `Twins`."""
    ids = {"shelf": await org.collection("Shelf"), "twins": await org.collection("Twins")}
    for n in range(8):
        await org.collection(f"Root {n}")
        await org.space(f"Space {n}", ids["shelf"])
    for n in range(2):
        await org.collection("Same", ids["twins"])
    await org.space("Lone", ids["twins"])
    for name in ("alpha", "beta", "gamma", "delta"):
        await org.custom_field(name)
    return ids


def _peaks(report: Any) -> dict[str, int]:
    peaks: dict[str, int] = {}
    for round_ in report.rounds:
        for serial, peak in round_.apply.overlap_peaks.items():
            peaks[serial] = max(peaks.get(serial, 0), peak)
    return peaks


async def test_creates_under_one_parent_overlap_and_the_copy_is_equal(pair: Pair) -> None:
    ids = await wide_source(pair.source)
    pair.faults(latency=10, jitter=10)  # creates in flight together land in any order
    report = await pair.copy()
    pair.faults()
    assert report.equal, report.verification.counts()
    assert pair.copied(pair.target) == pair.copied(pair.source.id) and pair.nothing_twice()
    peaks = _peaks(report)
    assert peaks["tree:"] > 1 and peaks[f"tree:{ids['shelf']}"] > 1, peaks  # really in flight together
    assert peaks["list:custom-field"] > 1, peaks
    assert peaks[f"tree:{ids['twins']}"] == 1, peaks  # "Same" twice: one after another
    again = await pair.copy()
    assert not again.rounds, "a second copy found something to do"


async def test_lost_answers_under_overlap_make_nothing_twice(pair: Pair) -> None:
    ids = await wide_source(pair.source)
    pair.faults(lost=0.3, error_5xx=0.1, latency=10, jitter=10)  # 5xx: sent, not made; its siblings' objects are new
    report = await pair.copy()
    pair.faults()
    reconciled = [key for r in report.rounds if r.apply for key in r.apply.reconciled]
    assert reconciled, "no answer was lost: the test proves nothing"
    assert report.equal, report.verification.counts()
    assert pair.copied(pair.target) == pair.copied(pair.source.id) and pair.nothing_twice()
    assert _peaks(report)[f"tree:{ids['shelf']}"] > 1


async def test_titles_a_service_tidies_are_still_told_apart_and_copied_as_sent(pair: Pair) -> None:
    """Row create-keeps-name: a service may tidy the title a create sends (white space). The
    creates overlap, their lost answers are settled by the title sent, and what the service
    kept otherwise is patched to the source's: equal, nothing twice, under both answers.
    28 creates, so that some answer is lost whatever order the calls come in (12 were once
    all answered)."""
    padded = ["  Padded  One ", "Padded\tTwo", " padded three", "Four  ", "Five\t\tfive", " six  6 ", *(f" Tidy  {n} " for n in range(7, 15))]
    for n, title in enumerate(padded):  # made then renamed: a PATCH keeps the title as sent
        for kind in ("collections", "spaces"):
            _, made = await pair.source.api.call("POST", f"/v1/orgs/{pair.source.id}/{kind}", {"title": f"made {n}"})
            await pair.source.api.call("PATCH", f"/v1/{kind}/{made['id']}", {"title": title})
    pair.faults(lost=0.3, latency=10, jitter=10)
    report = await pair.copy()
    pair.faults()
    assert [key for r in report.rounds if r.apply for key in r.apply.reconciled], "no answer was lost: the test proves nothing"
    assert report.equal, report.verification.counts()
    assert pair.copied(pair.target) == pair.copied(pair.source.id) and pair.nothing_twice()
    assert _peaks(report)["tree:"] > 1
    titles = sorted(c["title"] for c in pair.running.store.where("collection", org=pair.target))
    assert titles == sorted(padded), titles
    again = await pair.copy()
    assert not again.rounds, "a second copy found something to do"


# -- what a lost answer takes, beside its siblings ------------------------------------------------


async def test_a_create_sent_beside_its_siblings_takes_only_a_new_object_of_its_own_name(pair: Pair) -> None:
    target = Org(pair.source.api, pair.target)
    await read(pair.settings, TargetRef("dst", pair.target), pair.db)  # what was there before
    ids = JPair("src", pair.source.id, "dst", pair.target)
    with StateStore(pair.db) as mirror:
        run = begin(mirror, ids)
        async with TenantClient.from_settings(pair.settings, "dst") as client:
            writer = Writer(store=mirror, pair=ids, run=run, idmap=load_idmap(mirror, ids), target=client, source=None)
            expect = Expect(f"/v1/orgs/{pair.target}/collections", parent_field="parent", parent=None)
            alpha = Names("title", "alpha", frozenset({"beta", "gamma"}))
            beta = await target.collection("Beta")  # a sibling's, its answer not back yet
            assert (await writer.find_made(expect, ("collection", "S1"), run))["id"] == beta  # alone, it would be taken
            assert await writer.find_made(expect, ("collection", "S1"), run, {"title": "Alpha"}, alpha) is None  # beside: sent again
            own = await target.collection("ALPHA ")
            assert (await writer.find_made(expect, ("collection", "S1"), run, {"title": "Alpha"}, alpha))["id"] == own
            await target.collection("Not one of ours")
            with pytest.raises(Unexplained, match="named as none of its siblings"):
                await writer.find_made(expect, ("collection", "S3"), run, {"title": "Gamma"}, Names("title", "gamma", frozenset({"alpha", "beta"})))
        finish(mirror, run, "complete")


async def _killed_beside(pair: Pair, sources: dict[str, str]) -> None:
    """A run that sent one create per source collection beside each other and died unanswered."""
    ids = JPair("src", pair.source.id, "dst", pair.target)
    path = f"/v1/orgs/{pair.target}/collections"
    expect = expect_to_json(Expect(path, parent_field="parent", parent=None))
    everyone = {normal_name(title) for title in sources}
    with StateStore(pair.db) as mirror:
        run = begin(mirror, ids)
        for title, source_id in sources.items():
            names = Names("title", normal_name(title), frozenset(everyone - {normal_name(title)}))
            intent = {"made": ["collection", source_id], "expect": expect, "names": names_to_json(names)}
            intend(mirror, run, ids, key=f"create:collection:{source_id}", kind="collection", source_id=source_id, side="target",
                   method="POST", path=path, body={"title": title}, intent=intent)
        finish(mirror, run, "failed", reason="killed")


@pytest.mark.parametrize("made", [["Alpha"], ["Alpha", "Gamma, renamed by the service"]], ids=["one-not-applied", "one-renamed"])
async def test_the_next_run_settles_creates_killed_beside_each_other_without_duplicates(pair: Pair, made: list[str]) -> None:
    titles = ("Alpha", "Beta") if len(made) == 1 else ("Alpha", "Gamma")
    sources = {title: await pair.source.collection(title) for title in titles}
    await _killed_beside(pair, sources)
    target = Org(pair.source.api, pair.target)
    found = [await target.collection(title) for title in made]  # what arrived before the run died
    report = await pair.copy()
    settled = "\n".join(report.settled)
    assert all(f"its collection was made ({made_id})" in settled for made_id in found), settled
    assert ("not applied" in settled) == (len(made) == 1), settled  # Beta never arrived: made by this run
    assert report.equal and pair.nothing_twice(), report.settled


async def test_two_creates_killed_beside_each_other_that_cannot_be_told_apart_stop_the_next_run(pair: Pair) -> None:
    sources = {title: await pair.source.collection(title) for title in ("Alpha", "Beta")}
    await _killed_beside(pair, sources)
    await Org(pair.source.api, pair.target).collection("Neither")
    before = pair.writes()
    with pytest.raises(UnsettledError, match="several creates sent side by side"):
        await pair.copy()
    assert pair.writes() == before  # nothing was written


# -- killed mid-apply, creates in flight together -------------------------------------------------


@pytest.mark.parametrize(("profile", "backend"), [("divergent", "sqlite"), ("mixed:3", "sqlite")], ids=["divergent", "mixed-3"])
def test_applies_killed_while_creates_overlap_are_finished_without_duplicates(emulator: Emulator, env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[1]
    before = emulator.raw_dump(src)
    for writes in (4, 16, 40):
        kill_apply_after(emulator, env, src, dst, writes, tenants=("one", "two"))  # spaces: plain creates that overlap
        assert e2e_nothing_twice(emulator.dump(dst))
    emulator.faults(latency=5, jitter=5, **FAULTS)
    code = main(["mirror", "apply", f"one:{src}", f"two:{dst}"])
    lost = emulator.lost_answers()
    emulator.faults()
    assert code == 0, capsys.readouterr().out
    assert lost > 0
    target = emulator.dump(dst)
    assert target == emulator.dump(src) and e2e_no_duplicates(target)
    assert emulator.raw_dump(src) == before
    writes = emulator.writes()
    assert main(["mirror", "apply", f"one:{src}", f"two:{dst}"]) == 0
    assert emulator.writes() == writes  # a second apply sends nothing
