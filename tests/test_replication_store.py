"""The write side's records in the state file: apply runs, the journal, the id map."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from syncd.mirror import Mirror, MirrorBusyError, MirrorError, Row, content_hash
from syncd.mirror import replication as rep
from syncd.replay.ops import Match, Op, Ref, op_from_json, path_ref

PAIR = ("src", "org-a", "dst", "org-b")


def create_space(source_id: str = "s1", title: str = "Guide") -> Op:
    return Op(
        key=f"create:space:{source_id}", action="create", kind="space", source_id=source_id, target_id=None,
        method="POST", path="/v1/orgs/org-b/spaces", body={"title": title, "parent": Ref("collection", "c1")},
        title=title, match=Match("/v1/orgs/org-b/spaces", {}, "title", title, "parent", Ref("collection", "c1")),
    )


def move_space(source_id: str = "s1") -> Op:
    return Op(
        key=f"move:space:{source_id}", action="move", kind="space", source_id=source_id, target_id=None,
        method="POST", path=f"/v1/spaces/{path_ref('space', source_id)}/move", body={"parent": None},
    )


@pytest.fixture
def mirror(tmp_path: Path):
    with Mirror(tmp_path / "state.db") as m:
        yield m


def state(mirror: Mirror, run: int, seq: int) -> tuple[str, str | None, int, str | None]:
    row = mirror.db.execute("SELECT state, result_id, attempts, error FROM journal WHERE run = ? AND seq = ?", [run, seq]).fetchone()
    return tuple(row)  # type: ignore[return-value]


def test_an_apply_run_holds_the_writer_lock_and_keeps_its_pair(tmp_path: Path, mirror: Mirror) -> None:
    run = rep.begin_apply(mirror, *PAIR)
    row = mirror.run(run)
    assert row is not None
    assert (row["job"], row["tenant"], row["status"]) == ("apply", "dst", "running")
    with Mirror(tmp_path / "state.db") as other, pytest.raises(MirrorBusyError):
        rep.begin_apply(other, *PAIR)
    rep.finish_apply(mirror, run, "partial", {"apply": {"writes": 3}}, "1 op failed")
    row = mirror.run(run)
    assert row is not None
    assert row["status"] == "partial" and row["reason"] == "1 op failed" and row["finished_at"]
    assert row["stats"]["apply"] == {"writes": 3}
    assert row["stats"]["pair"]["target_org"] == "org-b"
    with Mirror(tmp_path / "state.db") as other:  # the lock was let go
        rep.finish_apply(other, rep.begin_apply(other, *PAIR), "complete")
    with pytest.raises(MirrorError):
        rep.finish_apply(mirror, run, "complete")  # already ended
    with pytest.raises(MirrorError):
        rep.finish_apply(mirror, rep.begin_apply(mirror, *PAIR), "running")


def test_an_intent_is_sent_before_the_call_and_done_with_its_ids_in_one_transaction(mirror: Mirror) -> None:
    run = rep.begin_apply(mirror, *PAIR)
    op = create_space()
    seq = rep.intend(mirror, run, op, {"title": "Guide", "parent": "tc1"}, "/v1/orgs/org-b/spaces")
    assert seq == 1 and rep.intend(mirror, run, move_space(), None, "/v1/spaces/x/move") == 2
    assert state(mirror, run, seq) == ("sent", None, 1, None)
    row = rep.journal(mirror, run)[0]
    assert (row["op_key"], row["kind"], row["source_id"], row["method"]) == ("create:space:s1", "space", "s1", "POST")
    assert (row["source_tenant"], row["source_org"], row["target_tenant"], row["target_org"]) == PAIR
    assert row["body"] == {"title": "Guide", "parent": "tc1"}
    assert op_from_json(row["op"]) == op  # the whole op, Refs included, round-trips

    # A mapping that cannot be written rolls the completion back: never "done" without its id.
    with pytest.raises(sqlite3.IntegrityError):
        rep.complete(mirror, run, seq, "t1", [("space", "s1", "t1", "bogus")])  # type: ignore[list-item]
    assert state(mirror, run, seq)[0] == "sent"
    assert rep.load_idmap(mirror, *PAIR).entries == {}

    rep.complete(mirror, run, seq, "t1", [("space", "s1", "t1", "created"), ("site-space", "ss1", "tss1", "created")])
    assert state(mirror, run, seq) == ("done", "t1", 1, None)
    idmap = rep.load_idmap(mirror, *PAIR)
    assert idmap.target("space", "s1") == "t1" and idmap.origin("space", "s1") == "created"
    assert idmap.target("site-space", "ss1") == "tss1"
    assert mirror.db.execute("SELECT run FROM idmap WHERE source_id = 's1'").fetchone()[0] == run

    # A delete's completion drops the mapping.
    seq3 = rep.intend(mirror, run, move_space(), None, "/v1/spaces/t1")
    rep.complete(mirror, run, seq3, None, drops=[("space", "s1")])
    assert rep.load_idmap(mirror, *PAIR).target("space", "s1") is None
    rep.finish_apply(mirror, run, "complete")


def test_the_id_map_is_per_organization_pair(mirror: Mirror) -> None:
    run = rep.begin_apply(mirror, *PAIR)
    rep.record_mappings(mirror, run, [("team", "a", "ta", "adopted")])
    other = rep.begin_apply(mirror, "src", "org-a", "dst", "org-c")
    rep.record_mappings(mirror, other, [("team", "a", "tc", "created")])
    assert rep.load_idmap(mirror, *PAIR).target("team", "a") == "ta"
    assert rep.load_idmap(mirror, *PAIR).origin("team", "a") == "adopted"
    assert rep.load_idmap(mirror, "src", "org-a", "dst", "org-c").target("team", "a") == "tc"
    assert rep.load_idmap(mirror, "src", "org-z", "dst", "org-b").entries == {}
    rep.finish_apply(mirror, run, "complete")
    rep.finish_apply(mirror, other, "complete")


def test_failures_that_may_have_applied_stay_open_for_the_next_run(tmp_path: Path, mirror: Mirror) -> None:
    run = rep.begin_apply(mirror, *PAIR)
    lost = rep.intend(mirror, run, create_space("s1", "Lost"), {}, "/p")
    refused = rep.intend(mirror, run, create_space("s2", "Refused"), {}, "/p")
    crashed = rep.intend(mirror, run, create_space("s3", "Crashed"), {}, "/p")
    done = rep.intend(mirror, run, create_space("s4", "Done"), {}, "/p")
    rep.fail(mirror, run, lost, "dropped after sending", may_have_applied=True)
    rep.fail(mirror, run, refused, "400 bad title", may_have_applied=False)
    rep.resend(mirror, run, crashed)
    rep.complete(mirror, run, done, "t4", [("space", "s4", "t4", "created")])
    assert state(mirror, run, lost) == ("sent", None, 1, "dropped after sending")
    assert state(mirror, run, refused) == ("failed", None, 1, "400 bad title")
    assert state(mirror, run, crashed) == ("sent", None, 2, None)
    # The run's own intents are not "earlier" while it is open in this Mirror.
    assert rep.open_intents(mirror, "dst", "org-b") == []
    rep.finish_apply(mirror, run, "failed", reason="killed")

    with Mirror(tmp_path / "state.db") as later:
        intents = rep.open_intents(later, "dst", "org-b")
        assert [(i["run"], i["seq"], i["op_key"]) for i in intents] == [(run, lost, "create:space:s1"), (run, crashed, "create:space:s3")]
        assert intents[0]["error"] == "dropped after sending" and intents[1]["attempts"] == 2
        assert op_from_json(intents[0]["op"]).match == create_space("s1", "Lost").match
        assert rep.open_intents(later, "dst", "org-other") == []
        # Settling an earlier run's intent from a new run writes into that intent's own pair.
        new_run = rep.begin_apply(later, *PAIR)
        rep.complete(later, run, lost, "t1", [("space", "s1", "t1", "created")])
        rep.fail(later, run, crashed, "not applied", may_have_applied=False)
        assert rep.open_intents(later, "dst", "org-b") == []
        assert rep.load_idmap(later, *PAIR).target("space", "s1") == "t1"
        rep.finish_apply(later, new_run, "complete")


def test_journal_functions_need_an_open_apply_run(mirror: Mirror) -> None:
    crawl = mirror.start_run("sync", "dst", "dst:org-b")
    with pytest.raises(MirrorError, match="not an apply run"):
        rep.intend(mirror, crawl, create_space(), None, "/p")
    mirror.abandon_run(crawl, "cancelled")
    with pytest.raises(MirrorError, match="not open"):
        rep.intend(mirror, crawl, create_space(), None, "/p")


def test_seen_before_names_what_a_crawl_saw_before_a_run(mirror: Mirror) -> None:
    def crawl(ids: list[str]) -> int:
        run = mirror.start_run("sync", "dst", "dst:org-b")
        mirror.stage(run, [Row("dst", "space", i, "org-b", None, None, None, "spaces", None, {"id": i}, content_hash({"id": i})) for i in ids])
        mirror.finish_run(run)
        return run

    first = crawl(["old"])
    apply_run = rep.begin_apply(mirror, *PAIR)
    rep.finish_apply(mirror, apply_run, "complete")
    crawl(["old", "new"])  # "new" first seen after the apply run began
    assert rep.seen_before(mirror, "dst", ["old", "new", "never"], apply_run) == {"old"}
    assert rep.seen_before(mirror, "dst", ["old"], first) == set()
    assert rep.seen_before(mirror, "src", ["old"], apply_run) == set()  # per tenant
    assert rep.seen_before(mirror, "dst", [], apply_run) == set()
