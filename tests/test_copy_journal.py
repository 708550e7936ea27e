"""The write side's records in the state file: apply runs, the journal, the id map; written
through the StateStore's public transaction API."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from syncd.copy import journal as j
from syncd.copy.journal import Pair
from syncd.copy.ops import Expect, expect_from_json, expect_to_json
from syncd.state import StateStore, StateBusyError, StateError, Row, content_hash

PAIR = Pair("src", "org-a", "dst", "org-b")
EXPECT = Expect("/v1/orgs/org-b/spaces", parent_field="parent", parent="tc1")


@pytest.fixture
def mirror(state: Path | str) -> Iterator[StateStore]:  # a SQLite file, then the PostgreSQL state
    with StateStore(state) as m:
        yield m


def intend(mirror: StateStore, run: int, key: str = "create:space:s1", *, made: tuple[str, str] | None = ("space", "s1"), path: str = "/v1/orgs/org-b/spaces") -> int:
    intent = {"made": list(made), "expect": expect_to_json(EXPECT)} if made else {}
    return j.intend(mirror, run, PAIR, key=key, kind="space", source_id="s1", side="target", method="POST", path=path, body={"title": "Guide"}, intent=intent)


def state(mirror: StateStore, run: int, seq: int) -> tuple[str, str | None, int, str | None]:
    with mirror.reading() as db:
        row = db.execute("SELECT state, result_id, attempts, error FROM journal WHERE run = ? AND seq = ?", [run, seq]).fetchone()
    return tuple(row)  # type: ignore[return-value]


def test_an_apply_run_holds_the_writer_lock_and_keeps_its_pair(mirror: StateStore) -> None:
    run = j.begin(mirror, PAIR)
    row = mirror.run(run)
    assert row is not None and (row["job"], row["tenant"], row["status"]) == ("apply", "dst", "running")
    with StateStore(mirror.path, lock_wait=0) as other, pytest.raises(StateBusyError):
        j.begin(other, PAIR)
    j.finish(mirror, run, "partial", {"apply": {"writes": 3}}, "1 op failed")
    row = mirror.run(run)
    assert row is not None and row["status"] == "partial" and row["reason"] == "1 op failed" and row["finished_at"]
    assert row["stats"]["apply"] == {"writes": 3} and row["stats"]["pair"]["target_org"] == "org-b"
    with StateStore(mirror.path) as other:  # the lock was let go
        j.finish(other, j.begin(other, PAIR), "complete")
    with pytest.raises(StateError):
        j.finish(mirror, run, "complete")  # already ended
    with pytest.raises(StateError):
        j.finish(mirror, j.begin(mirror, PAIR), "running")


def test_an_intent_is_committed_before_the_call_and_done_with_its_ids_in_one_transaction(mirror: StateStore) -> None:
    run = j.begin(mirror, PAIR)
    seq = intend(mirror, run)
    assert seq == 1 and intend(mirror, run, "settle:tree:order", made=None, path="/v1/spaces/x/move") == 2
    assert state(mirror, run, seq) == ("sent", None, 1, None)
    row = j.intents(mirror, run)[0]
    assert (row["op_key"], row["kind"], row["source_id"], row["method"], row["body"]) == ("create:space:s1", "space", "s1", "POST", {"title": "Guide"})
    assert (row["source_tenant"], row["source_org"], row["target_tenant"], row["target_org"]) == ("src", "org-a", "dst", "org-b")
    assert row["intent"]["side"] == "target" and expect_from_json(row["intent"]["expect"]) == EXPECT

    # A mapping that cannot be written rolls the completion back: never "done" without its id.
    with pytest.raises((sqlite3.IntegrityError, psycopg.IntegrityError)):
        j.complete(mirror, run, seq, "t1", [("space", "s1", "t1", "bogus")])  # type: ignore[list-item]
    assert state(mirror, run, seq)[0] == "sent" and j.load_idmap(mirror, PAIR).entries == {}

    j.complete(mirror, run, seq, "t1", [("space", "s1", "t1", "created"), ("site-space", "ss1", "tss1", "created")])
    assert state(mirror, run, seq) == ("done", "t1", 1, None)
    idmap = j.load_idmap(mirror, PAIR)
    assert idmap.target("space", "s1") == "t1" and idmap.origin("space", "s1") == "created" and idmap.target("site-space", "ss1") == "tss1"
    seq3 = intend(mirror, run, "delete:space:s1", made=None, path="/v1/spaces/t1")
    j.complete(mirror, run, seq3, None, drops=[("space", "s1")])  # a delete's completion drops the mapping
    assert j.load_idmap(mirror, PAIR).target("space", "s1") is None
    j.finish(mirror, run, "complete")


def test_a_write_into_a_space_forgets_its_change_token(mirror: StateStore) -> None:
    crawl = mirror.start_run("sync", "dst", "dst:org-b")
    mirror.complete_scope(crawl, "dst", "space:t9", "rev-1")
    mirror.finish_run(crawl)
    assert mirror.scope_tokens("dst") == {"space:t9": "rev-1"}
    run = j.begin(mirror, PAIR)
    intend(mirror, run, "patch:space-custom-field-value:s9", made=None, path="/v1/spaces/t9/custom-fields")
    assert mirror.scope_tokens("dst") == {}  # the next read reads that space again
    j.finish(mirror, run, "complete")


def test_the_id_map_is_per_organization_pair(mirror: StateStore) -> None:
    run = j.begin(mirror, PAIR)
    j.record_mappings(mirror, run, PAIR, [("team", "a", "ta", "adopted")])
    other = Pair("src", "org-a", "dst", "org-c")
    j.record_mappings(mirror, run, other, [("team", "a", "tc", "created")])
    assert j.load_idmap(mirror, PAIR).target("team", "a") == "ta" and j.load_idmap(mirror, PAIR).origin("team", "a") == "adopted"
    assert j.load_idmap(mirror, other).target("team", "a") == "tc"
    assert j.load_idmap(mirror, Pair("src", "org-z", "dst", "org-b")).entries == {}
    j.finish(mirror, run, "complete")


def test_failures_that_may_have_applied_stay_open_for_the_next_run(mirror: StateStore) -> None:
    run = j.begin(mirror, PAIR)
    lost, refused, crashed, done = (intend(mirror, run, f"create:space:s{n}") for n in range(4))
    j.fail(mirror, run, lost, "dropped after sending", may_have_applied=True)
    j.fail(mirror, run, refused, "400 bad title", may_have_applied=False)
    j.resend(mirror, run, crashed)
    j.complete(mirror, run, done, "t4", [("space", "s4", "t4", "created")])
    assert state(mirror, run, lost) == ("sent", None, 1, "dropped after sending")
    assert state(mirror, run, refused) == ("failed", None, 1, "400 bad title")
    assert state(mirror, run, crashed) == ("sent", None, 2, None)
    assert j.open_intents(mirror, PAIR) == []  # the run's own intents are not "earlier" while it is open here
    j.finish(mirror, run, "failed", reason="killed")
    with StateStore(mirror.path) as later:
        intents = j.open_intents(later, PAIR)
        assert [(i["run"], i["seq"], i["op_key"]) for i in intents] == [(run, lost, "create:space:s0"), (run, crashed, "create:space:s2")]
        assert intents[0]["error"] == "dropped after sending" and intents[1]["attempts"] == 2
        assert j.open_intents(later, Pair("src", "org-a", "dst", "org-other")) == []
        settling = j.begin(later, PAIR)  # settling an earlier run's intent writes into that intent's own pair
        j.complete(later, run, lost, "t1", [("space", "s0", "t1", "created")])
        j.fail(later, run, crashed, "not applied", may_have_applied=False)
        assert j.open_intents(later, PAIR) == [] and j.load_idmap(later, PAIR).target("space", "s0") == "t1"
        j.finish(later, settling, "complete")


def test_journal_writes_need_an_open_run(mirror: StateStore) -> None:
    crawl = mirror.start_run("sync", "dst", "dst:org-b")
    mirror.abandon_run(crawl, "cancelled")
    with pytest.raises(StateError, match="not open"):
        intend(mirror, crawl)


def test_made_in_source_lists_the_duplicates_copies_made(mirror: StateStore) -> None:
    run = j.begin(mirror, PAIR)
    seq = j.intend(mirror, run, PAIR, key="create:space:s1:duplicate", kind="space-duplicate", source_id="s1", side="source",
                   method="POST", path="/v1/spaces/s1/duplicate", body=None, intent={"made": ["space-duplicate", "s1"], "expect": expect_to_json(EXPECT)})
    assert j.made_in_source(mirror, PAIR) == []
    j.complete(mirror, run, seq, "dup1", [("space-duplicate", "s1", "dup1", "created")])
    target_seq = intend(mirror, run)
    j.complete(mirror, run, target_seq, "t1", [("space", "s1", "t1", "created")])
    assert j.made_in_source(mirror, PAIR) == ["dup1"]  # made in the source, wherever it is now
    j.finish(mirror, run, "complete")


def test_seen_before_names_what_a_crawl_saw_before_a_run(mirror: StateStore) -> None:
    def crawl(ids: list[str]) -> int:
        run = mirror.start_run("sync", "dst", "dst:org-b")
        mirror.stage(run, [Row("dst", "space", i, "org-b", None, None, None, "spaces", None, {"id": i}, content_hash({"id": i})) for i in ids])
        mirror.finish_run(run)
        return run

    first = crawl(["old"])
    apply_run = j.begin(mirror, PAIR)
    j.finish(mirror, apply_run, "complete")
    crawl(["old", "new"])  # "new" first seen after the apply run began
    assert j.seen_before(mirror, "dst", ["old", "new", "never"], apply_run) == {"old"}
    assert j.seen_before(mirror, "dst", ["old"], first) == set()
    assert j.seen_before(mirror, "src", ["old"], apply_run) == set()  # per tenant
    assert j.seen_before(mirror, "dst", [], apply_run) == set()
