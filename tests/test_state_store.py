"""The mirror: snapshots, deletions driven by listings, carry-forward, recovery, migrations.

Tests that take `state` run on both backends: a SQLite file, then PostgreSQL (issue 13)."""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlite_utils import Database

from syncd.pg import migrations as pg_migrations
from syncd.pg.connect import PgError
from syncd.state import (
    MIGRATIONS,
    ChangeSummary,
    StateStore,
    StateBusyError,
    StateError,
    NewerStateError,
    Row,
    applied_migrations,
    compose,
    content_hash,
    migrate,
    stored_hash,
    summarise,
)
from syncd.state.tables import RESOURCES, index_name
from tests.state_support import count_rows, is_pg

VOLATILE = {"updatedAt"}
ORGS = "/v1/orgs"


def spaces_of(org: str) -> str:
    return f"/v1/orgs/{org}/spaces"


def content_of(space: str) -> str:
    return f"/v1/spaces/{space}/content"


def row(
    kind: str,
    id: str,
    *,
    parent: tuple[str, str] | None = None,
    listing: str | None = None,
    scope: str | None = None,
    org: str = "o1",
    tenant: str = "t",
    position: int | None = 0,
    **data: Any,
) -> Row:
    data = {"id": id, **data}
    return Row(
        tenant=tenant, kind=kind, id=id, org=org,
        parent_kind=parent[0] if parent else None, parent_id=parent[1] if parent else None,
        position=position, listing=listing, scope=scope, data=data, hash=stored_hash(data, VOLATILE),
    )


def org(id: str = "o1", tenant: str = "t", **data: Any) -> Row:
    return row("org", id, listing=ORGS, org=id, tenant=tenant, title=f"Org {id}", **data)


def space(id: str, title: str, *, org_id: str = "o1", position: int = 0, tenant: str = "t", **data: Any) -> Row:
    return row("space", id, parent=("org", org_id), listing=spaces_of(org_id), org=org_id, tenant=tenant,
               position=position, title=title, **data)


def page(id: str, title: str, space_id: str, *, parent_page: str | None = None, position: int = 0,
         org_id: str = "o1") -> Row:
    parent = ("page", parent_page) if parent_page else ("space", space_id)
    return row("page", id, parent=parent, listing=content_of(space_id), scope=f"space:{space_id}",
               org=org_id, position=position, title=title)


def crawl(
    mirror: StateStore,
    rows: Iterable[Row],
    ok: Iterable[str] = (),
    failed: Iterable[str] = (),
    *,
    tenant: str = "t",
    scope_ref: str | None = None,
    status: str = "complete",
) -> tuple[int, ChangeSummary]:
    """One run as the crawler would drive it: stage, record listings, finish."""
    run = mirror.start_run("sync", tenant, scope_ref or tenant)
    mirror.stage(run, rows)
    for listing in ok:
        mirror.record_listing(run, tenant, listing, True)
    for listing in failed:
        mirror.record_listing(run, tenant, listing, False, "HTTP 503")
    return run, mirror.finish_run(run, status, {"requests": 1})


def ops(mirror: StateStore, run: int) -> set[tuple[str, str, str]]:
    return {(c["op"], c["kind"], c["id"]) for c in mirror.changes(run)}


def current_ids(mirror: StateStore, tenant: str = "t", kind: str | None = None) -> set[tuple[str, str]]:
    return {(r["kind"], r["id"]) for r in mirror.current(tenant, kind)}


BASE = [
    org(),
    space("s1", "Handbook", position=0),
    space("s2", "API", position=1),
    space("s3", "Blog", position=2),
    page("p1", "Intro", "s1", position=0),
    page("p2", "Setup", "s1", position=1),
    page("p3", "Deep", "s1", parent_page="p2", position=0),
    page("q1", "Auth", "s2", position=0),
]
BASE_OK = [ORGS, spaces_of("o1"), content_of("s1"), content_of("s2"), content_of("s3")]


@pytest.fixture
def mirror(state: Path | str) -> Iterator[StateStore]:
    with StateStore(state) as m:
        yield m


@pytest.fixture
def seeded(mirror: StateStore) -> tuple[StateStore, int]:
    run, _ = crawl(mirror, BASE, BASE_OK)
    return mirror, run


# -- snapshots and changes --------------------------------------------------------------------


def test_first_run_creates_everything(mirror: StateStore) -> None:
    run, summary = crawl(mirror, BASE, BASE_OK)

    assert summary.counts == {"org": {"created": 1}, "space": {"created": 3}, "page": {"created": 4}}
    assert summary.by_op() == {"created": 8, "updated": 0, "moved": 0, "deleted": 0}
    assert {c["op"] for c in mirror.changes(run)} == {"created"}
    assert {c["title"] for c in mirror.changes(run) if c["kind"] == "space"} == {"Handbook", "API", "Blog"}
    assert mirror.counts("t") == {"org": 1, "page": 4, "space": 3}
    info = mirror.run(run)
    assert info is not None and info["status"] == "complete" and info["finished_at"]
    assert info["stats"]["requests"] == 1 and info["stats"]["mirror"]["listings_ok"] == 5
    # Nothing of the run is left in staging; the state is browsable (a file in WAL mode).
    assert count_rows(mirror.path, "staged") == 0 and count_rows(mirror.path, "listings") == 0
    assert {"resources", "runs", "changes", "idmap", "journal"} <= set(mirror.db.table_names())
    assert count_rows(mirror.path, "current_resources") == 8
    if not is_pg(mirror.path):
        assert mirror.db.journal_mode == "wal" and "migrations" in mirror.db.table_names()


def test_current_is_ordered_and_filtered(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    assert [r["id"] for r in mirror.current("t", "space")] == ["s1", "s2", "s3"]
    assert [r["id"] for r in mirror.current("t", "page", parent_id="s1")] == ["p1", "p2"]
    assert [r["id"] for r in mirror.current("t", scope="space:s1")] == ["p3", "p1", "p2"]
    first = next(mirror.current("t", "page", parent_id="p2"))
    assert first["data"] == {"id": "p3", "title": "Deep"} and first["listing"] == content_of("s1")
    assert list(mirror.current("other")) == []
    assert mirror.current_value("t", "space", "s2") == {"id": "s2", "title": "API"}
    assert mirror.current_value("t", "space", "nope") is None


def test_no_parent_and_no_position_sort_first_and_moves_to_or_from_no_parent_count(mirror: StateStore) -> None:
    def item(id: str, parent: str | None, position: int | None) -> Row:
        return row("space", id, parent=("org", parent) if parent else None, listing="/l", position=position)

    crawl(mirror, [item("a", "o1", 1), item("b", None, None), item("c", "o1", None)], ["/l"])
    assert [r["id"] for r in mirror.current("t", "space")] == ["b", "c", "a"]  # NULLs first, as SQLite sorts
    run, _ = crawl(mirror, [item("a", None, 1), item("b", "o1", None), item("c", "o1", None)], ["/l"])
    assert ops(mirror, run) == {("moved", "space", "a"), ("moved", "space", "b")}


def test_ids_sort_byte_by_byte_as_sqlite_sorts_them(mirror: StateStore) -> None:
    crawl(mirror, [row("space", id, parent=("org", "o1"), listing="/l") for id in ("a", "B", "_c", "é", "Z9")], ["/l"])
    assert [r["id"] for r in mirror.current("t", "space")] == ["B", "Z9", "_c", "a", "é"]
    if is_pg(mirror.path):  # whatever the server's default collation (this one's may be C already)
        found = mirror.db.execute(
            "SELECT DISTINCT collation_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = 'resources' AND data_type = 'text'"
        ).fetchall()
        assert found == [("C",)]


def test_second_run_reports_exactly_rename_new_move_delete(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    second = [
        org(),
        space("s1", "Handbook (renamed)", position=0),  # renamed
        space("s2", "API", position=1, updatedAt="2024-05-01"),  # only a volatile field changed
        space("s3", "Blog", position=2),
        page("p1", "Intro", "s1", position=0),
        page("p2", "Setup", "s1", position=1),
        page("p3", "Deep", "s1", position=2),  # moved from under p2 to the top of s1
        page("p4", "New page", "s1", position=3),  # new
        # q1 is missing from a listing read cleanly: deleted
    ]
    run, summary = crawl(mirror, second, BASE_OK)

    assert ops(mirror, run) == {
        ("updated", "space", "s1"),
        ("created", "page", "p4"),
        ("moved", "page", "p3"),
        ("deleted", "page", "q1"),
    }
    assert summary.to_dict() == {
        "page": {"created": 1, "moved": 1, "deleted": 1},
        "space": {"updated": 1},
    }
    moved = next(c for c in mirror.changes(run) if c["op"] == "moved")
    assert (moved["old_parent_id"], moved["parent_id"], moved["position"]) == ("p2", "s1", 2)
    deleted = next(c for c in mirror.changes(run) if c["op"] == "deleted")
    assert deleted["title"] == "Auth" and deleted["old_hash"] and deleted["new_hash"] is None
    assert ("page", "q1") not in current_ids(mirror)
    assert mirror.current_value("t", "space", "s1") == {"id": "s1", "title": "Handbook (renamed)"}
    # the volatile field is stored (raw JSON kept whole) though it did not count as a change
    assert mirror.current_value("t", "space", "s2") == {"id": "s2", "title": "API", "updatedAt": "2024-05-01"}
    tomb = mirror.db.execute("SELECT deleted_run, first_seen_run FROM resources WHERE id = 'q1'").fetchone()
    assert tomb == (run, 1)


def test_unchanged_second_run_records_nothing(seeded: tuple[StateStore, int]) -> None:
    mirror, first = seeded
    run, summary = crawl(mirror, BASE, BASE_OK)
    assert not summary and summary.total == 0 and mirror.changes(run) == []
    assert {r["last_seen_run"] for r in mirror.current("t")} == {run}
    assert {r["first_seen_run"] for r in mirror.current("t")} == {first}


def test_a_deleted_row_that_comes_back_is_created_again(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    without_blog = [r for r in BASE if r.id != "s3"]
    run2, _ = crawl(mirror, without_blog, BASE_OK)
    assert ops(mirror, run2) == {("deleted", "space", "s3")}
    run3, _ = crawl(mirror, BASE, BASE_OK)
    assert ops(mirror, run3) == {("created", "space", "s3")}
    assert ("space", "s3") in current_ids(mirror)


# -- a failed listing is unknown, never deleted ------------------------------------------------


def test_missing_row_of_a_failed_listing_is_not_deleted(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    rows = [r for r in BASE if r.kind != "page" or r.id in ("p1",)]  # s1 content read partly, then failed
    ok = [ORGS, spaces_of("o1"), content_of("s2"), content_of("s3")]
    rows = [r for r in rows if r.id != "q1"] + [page("q1", "Auth", "s2")]
    run, summary = crawl(mirror, rows, ok, failed=[content_of("s1")])

    assert not summary  # p2 and p3 were not seen, but their listing failed
    assert {"p1", "p2", "p3", "q1"} <= {id for _, id in current_ids(mirror, kind="page")}
    info = mirror.run(run)
    assert info is not None and info["status"] == "partial"  # asked complete, a listing failed
    kept = mirror.db.execute("SELECT listing, status, error FROM listings WHERE run = ?", [run]).fetchall()
    assert kept == [(content_of("s1"), "failed", "HTTP 503")]


def test_a_listing_not_read_while_its_parent_exists_keeps_its_rows(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    rows = [r for r in BASE if r.kind != "page"]
    _, summary = crawl(mirror, rows, [ORGS, spaces_of("o1")])
    assert not summary
    assert len(list(mirror.current("t", "page"))) == 4


def test_a_listing_that_failed_once_in_a_run_stays_failed(mirror: StateStore) -> None:
    run = mirror.start_run("sync", "t", "t")
    mirror.record_listing(run, "t", ORGS, False, "timeout")
    mirror.record_listing(run, "t", ORGS, True)
    assert mirror.db.execute(f"SELECT status, error FROM {mirror.dialect.run_listings}").fetchall() == [("failed", "timeout")]
    mirror.finish_run(run)
    assert mirror.db.execute("SELECT status, error FROM listings").fetchall() == [("failed", "timeout")]  # kept


def test_children_of_a_deleted_parent_are_deleted_in_cascade(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    run0 = mirror.start_run("sync", "t", "t")
    mirror.stage(run0, BASE)
    mirror.complete_scope(run0, "t", "space:s1", "rev1")
    mirror.complete_scope(run0, "t", "space:s2", "rev7")
    for listing in BASE_OK:
        mirror.record_listing(run0, "t", listing, True)
    mirror.finish_run(run0)
    assert mirror.scope_tokens("t") == {"space:s1": "rev1", "space:s2": "rev7"}

    # s1 is gone from the org's spaces; its content listing answers 404 (failed) and s2's
    # content is not read at all: p1, p2 and p2's child p3 go with s1, q1 stays.
    rows = [r for r in BASE if r.kind in ("org", "space") and r.id != "s1"]
    run, summary = crawl(mirror, rows, [ORGS, spaces_of("o1")], failed=[content_of("s1")])

    assert ops(mirror, run) == {
        ("deleted", "space", "s1"), ("deleted", "page", "p1"), ("deleted", "page", "p2"), ("deleted", "page", "p3"),
    }
    assert summary.by_op()["deleted"] == 4
    assert current_ids(mirror, kind="page") == {("page", "q1")}
    # the deleted space's scope token is dropped (a restored space is read again), s2's stays
    assert mirror.scope_tokens("t") == {"space:s2": "rev7"}


# -- incremental carry-forward ------------------------------------------------------------------


def test_carry_scope_keeps_a_scope_without_reading_it(mirror: StateStore) -> None:
    run1 = mirror.start_run("sync", "t", "t")
    mirror.stage(run1, BASE)
    for listing in BASE_OK:
        mirror.record_listing(run1, "t", listing, True)
    mirror.complete_scope(run1, "t", "space:s1", "3")
    mirror.finish_run(run1)
    assert mirror.current_tokens("t", "space", "title") == {"s1": "Handbook", "s2": "API", "s3": "Blog"}
    assert mirror.scope_tokens("t", prefix="space:") == {"space:s1": "3"}

    # Run 2 reads the org's spaces (all content listings "ok" as the crawler walks them),
    # but carries s1's content instead of reading it: nothing of s1 is staged by the crawler.
    run2 = mirror.start_run("sync", "t", "t")
    mirror.stage(run2, [r for r in BASE if r.kind != "page"] + [page("q1", "Auth v2", "s2")])
    assert mirror.carry_scope(run2, "t", "space:s1") == 3
    for listing in BASE_OK:
        mirror.record_listing(run2, "t", listing, True)
    summary = mirror.finish_run(run2)

    assert ops(mirror, run2) == {("updated", "page", "q1")}
    assert summary.by_op()["deleted"] == 0
    s1_pages = list(mirror.current("t", scope="space:s1"))
    assert [r["id"] for r in s1_pages] == ["p3", "p1", "p2"]
    assert {r["last_seen_run"] for r in s1_pages} == {run2}  # counted as seen, unchanged
    assert mirror.scope_tokens("t") == {"space:s1": "3"}


def test_rows_staged_in_a_carried_scope_win_over_carried_ones(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    run = mirror.start_run("sync", "t", "t")
    mirror.stage(run, [page("p1", "Intro (new)", "s1")])
    mirror.carry_scope(run, "t", "space:s1")
    mirror.finish_run(run)
    assert ops(mirror, run) == {("updated", "page", "p1")}


def test_a_scope_token_becomes_current_only_with_a_complete_read(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    run = mirror.start_run("sync", "t", "t")
    mirror.complete_scope(run, "t", "space:s2", "rev2")
    mirror.abandon_run(run, "cancelled", "SIGTERM")
    assert mirror.scope_tokens("t") == {}
    # a run that lost a page of a scope without completing it forgets the old token
    run = mirror.start_run("sync", "t", "t")
    mirror.complete_scope(run, "t", "space:s2", "rev2")
    mirror.finish_run(run)
    _, _ = crawl(mirror, [r for r in BASE if r.id != "q1"], BASE_OK)
    assert mirror.scope_tokens("t") == {}


# -- runs that never finish ---------------------------------------------------------------------


def test_an_abandoned_run_leaves_the_previous_snapshot_current(seeded: tuple[StateStore, int]) -> None:
    mirror, first = seeded
    before = list(mirror.current("t"))
    run = mirror.start_run("sync", "t", "t")
    mirror.stage(run, [space("s1", "Half-read rename"), space("s9", "New")])
    mirror.record_listing(run, "t", spaces_of("o1"), True)  # would delete s2 and s3
    mirror.abandon_run(run, "cancelled", "cancelled by the user")

    assert list(mirror.current("t")) == before
    info = mirror.run(run)
    assert info is not None and (info["status"], info["reason"]) == ("cancelled", "cancelled by the user")
    assert count_rows(mirror.path, "staged") == 0 and count_rows(mirror.path, "listings") == 0
    assert mirror.changes(run) == []
    mirror.abandon_run(run)  # ending an ended run again is harmless

    run3, _ = crawl(mirror, BASE[:3] + BASE[4:], BASE_OK)  # the next run completes
    assert ops(mirror, run3) == {("deleted", "space", "s3")}
    assert mirror.last_complete_run("t")["id"] == run3  # type: ignore[index]
    assert [r["id"] for r in mirror.runs("t")] == [first, run, run3]


CRASH = """
import os, sys
from pathlib import Path
from syncd.state import StateStore, Row
m = StateStore(sys.argv[1] if sys.argv[2] == "url" else Path(sys.argv[1]))  # a str is a URL, a Path a file
run = m.start_run("sync", "t", "t")
m.stage(run, [Row("t", "space", "s1", "o1", "org", "o1", 0, "/v1/orgs/o1/spaces", None,
                  {"id": "s1", "title": "never current"}, "x")])
m.record_listing(run, "t", "/v1/orgs/o1/spaces", True)
print(run, flush=True)
os._exit(9)  # dies mid-crawl: no finish, no abandon, no close
"""


def test_a_crashed_process_leaves_the_previous_snapshot_and_is_recovered(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    before = list(mirror.current("t"))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CRASH), str(mirror.path), "url" if is_pg(mirror.path) else "file"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 9, done.stderr
    dead = int(done.stdout)

    with StateStore(mirror.path) as again:
        assert list(again.current("t")) == before
        assert again.run(dead)["status"] == "running"  # type: ignore[index]
        _, summary = crawl(again, BASE, BASE_OK)  # starting a run recovers the dead one
        assert not summary
        info = again.run(dead)
        assert info is not None and info["status"] == "failed" and "ended before it finished" in info["reason"]
        assert again.db.execute("SELECT count(*) FROM staged").fetchone() == (0,)
        assert again.recover() == []


def test_recover_without_a_run(seeded: tuple[StateStore, int], tmp_path: Path) -> None:
    mirror, _ = seeded
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(CRASH), str(mirror.path), "url" if is_pg(mirror.path) else "file"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert mirror.recover() == [int(done.stdout)]
    assert count_rows(mirror.path, "staged") == 0


def test_one_writer_process_at_a_time(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    mirror.lock_wait = 0  # PostgreSQL: one try, as SQLite (waiting: tests/test_state_pg_writers.py)
    run = mirror.start_run("sync", "t", "t")
    with StateStore(mirror.path, lock_wait=0) as other:
        assert list(other.current("t", "org"))  # reading is always fine
        with pytest.raises(StateBusyError, match="being written by another syncd process"):
            other.start_run("sync", "t", "t")
        if is_pg(mirror.path):  # one writer per tenant: the live writer's run is left alone
            assert other.recover() == [] and mirror.run(run)["status"] == "running"  # type: ignore[index]
        else:
            with pytest.raises(StateBusyError):
                other.recover()
        mirror.finish_run(run)
        lock = None if is_pg(mirror.path) else mirror.path.with_name(mirror.path.name + ".lock")  # type: ignore[union-attr]
        assert lock is None or not lock.exists()
        other_run = other.start_run("sync", "t", "t")  # the lock is free between runs
        assert lock is None or lock.exists()
        with pytest.raises(StateBusyError):
            mirror.start_run("sync", "t", "t")
        other.abandon_run(other_run)
    assert mirror.run(run)["status"] == "complete"  # type: ignore[index]


def test_closing_with_an_open_run_fails_it(state: Path | str) -> None:
    with StateStore(state) as mirror:
        crawl(mirror, BASE, BASE_OK)
        run = mirror.start_run("sync", "t", "t")
        mirror.stage(run, [space("s1", "x")])
    with StateStore(state) as mirror:
        info = mirror.run(run)
        assert info is not None and info["status"] == "failed" and "closed" in info["reason"]
        assert mirror.current_value("t", "space", "s1") == {"id": "s1", "title": "Handbook"}
        assert mirror.recover() == []


def test_misuse_is_a_clear_error(mirror: StateStore) -> None:
    with pytest.raises(StateError, match="not open"):
        mirror.stage(42, [org()])
    run = mirror.start_run("sync", "t", "t")
    with pytest.raises(StateError, match="tenant 't'"):
        mirror.stage(run, [org(tenant="u")])
    with pytest.raises(StateError, match="tenant 't'"):
        mirror.record_listing(run, "u", ORGS, True)
    with pytest.raises(StateError):
        mirror.finish_run(run, "failed")
    with pytest.raises(StateError):
        mirror.abandon_run(run, "complete")
    mirror.abandon_run(run, "failed", "boom")
    with pytest.raises(StateError, match="open read-only"), StateStore(mirror.path, readonly=True) as reader:
        reader.start_run("sync", "t", "t")
    if not is_pg(mirror.path):
        with pytest.raises(StateError, match="no state file"):
            StateStore(mirror.path.with_name("missing.db"), create=False)  # type: ignore[union-attr]


# -- partial runs ---------------------------------------------------------------------------------


def test_a_partial_run_merges_what_it_read_and_protects_the_rest(seeded: tuple[StateStore, int]) -> None:
    mirror, _ = seeded
    # The org's spaces were read (s3 gone, s2 renamed); s1's content was read cleanly (p1 gone);
    # s2's content got a 403 partway (q1 not seen): q1 is unknown and stays.
    rows = [org(), space("s1", "Handbook"), space("s2", "API v2", position=1),
            page("p2", "Setup", "s1", position=1), page("p3", "Deep", "s1", parent_page="p2"),
            page("p9", "Added", "s1", position=2)]
    run, _ = crawl(mirror, rows, [ORGS, spaces_of("o1"), content_of("s1")],
                   failed=[content_of("s2")], status="partial")

    assert ops(mirror, run) == {
        ("updated", "space", "s2"), ("created", "page", "p9"),
        ("deleted", "page", "p1"), ("deleted", "space", "s3"),
    }
    assert ("page", "q1") in current_ids(mirror)
    assert mirror.run(run)["status"] == "partial"  # type: ignore[index]
    assert mirror.last_complete_run("t")["id"] == run  # type: ignore[index]
    assert mirror.last_complete_run("t", include_partial=False)["id"] == 1  # type: ignore[index]


# -- several organizations and tenants in one file ----------------------------------------------


def test_two_orgs_in_one_file_do_not_delete_each_other(mirror: StateStore) -> None:
    o1 = [org("o1"), space("a1", "A1", org_id="o1"), space("a2", "A2", org_id="o1", position=1)]
    o2 = [org("o2"), space("b1", "B1", org_id="o2")]
    crawl(mirror, o1, [spaces_of("o1")], scope_ref="t:o1")
    run2, summary = crawl(mirror, o2, [spaces_of("o2")], scope_ref="t:o2")
    assert summary.by_op() == {"created": 2, "updated": 0, "moved": 0, "deleted": 0}
    assert mirror.counts("t") == {"org": 2, "space": 3}

    # A run over o1 alone, where a2 is gone, touches nothing of o2.
    run3, summary = crawl(mirror, o1[:2], [spaces_of("o1")], scope_ref="t:o1")
    assert ops(mirror, run3) == {("deleted", "space", "a2")}
    assert mirror.counts("t", org="o2") == {"org": 1, "space": 1}
    assert [r["id"] for r in mirror.current("t", org="o1")] == ["o1", "a1"]
    assert mirror.last_complete_run("t", "t:o2")["id"] == run2  # type: ignore[index]

    # Another tenant with the same ids lives beside them.
    crawl(mirror, [org("o1", tenant="u"), space("a1", "Other", tenant="u")], [spaces_of("o1")], tenant="u")
    assert mirror.current_value("u", "space", "a1") == {"id": "a1", "title": "Other"}
    assert mirror.current_value("t", "space", "a1") == {"id": "a1", "title": "A1"}
    assert [r["tenant"] for r in mirror.runs("u")] == ["u"]


# -- batching ------------------------------------------------------------------------------------


def test_staging_5000_rows_streams_in_batches(mirror: StateStore) -> None:
    run = mirror.start_run("sync", "t", "t")
    seen_mid_stream: list[int] = []

    def rows() -> Iterator[Row]:
        yield org()
        yield space("s1", "Big")
        for i in range(4998):
            if i == 2500:  # the batches written so far (a file's writer stages in a TEMP table of its own)
                seen_mid_stream.append(mirror.db.execute("SELECT count(*) FROM staged WHERE run = ?", [run]).fetchone()[0])
            yield page(f"p{i:04d}", f"Page {i}", "s1", position=i)

    assert mirror.stage(run, rows()) == 5000
    assert seen_mid_stream == [2000]
    mirror.record_listing(run, "t", content_of("s1"), True)
    summary = mirror.finish_run(run)
    assert summary.counts == {"org": {"created": 1}, "space": {"created": 1}, "page": {"created": 4998}}
    pages = [r["id"] for r in mirror.current("t", "page", parent_id="s1")]
    assert len(pages) == 4998 and pages[:2] == ["p0000", "p0001"] and pages[-1] == "p4997"

    # staging the same id twice in one run keeps the last version
    run2 = mirror.start_run("sync", "t", "t")
    mirror.stage(run2, [page("p0000", "First", "s1"), page("p0000", "Second", "s1")])
    mirror.finish_run(run2)
    assert mirror.current_value("t", "page", "p0000") == {"id": "p0000", "title": "Second"}


# -- migrations ----------------------------------------------------------------------------------


def test_an_older_file_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Database(path) as db:
        assert migrate(db, MIGRATIONS[:1]) == ["0001_snapshots"]
        db.execute("INSERT INTO runs (job, tenant, scope_ref, started_at, status) "
                   "VALUES ('sync', 't', 't', '2024-01-01T00:00:00+00:00', 'complete')")
        db.execute("INSERT INTO resources (tenant, kind, id, data, hash, first_seen_run, last_seen_run) "
                   "VALUES ('t', 'org', 'o1', '{\"id\": \"o1\"}', 'h', 1, 1)")
        assert "idmap" not in db.table_names()

    with StateStore(path) as mirror:
        assert applied_migrations(mirror.db) == [m.name for m in MIGRATIONS]
        assert {"idmap", "journal"} <= set(mirror.db.table_names())
        assert mirror.current_value("t", "org", "o1") == {"id": "o1"}
        assert mirror.last_complete_run("t")["id"] == 1  # type: ignore[index]
        assert migrate(mirror.db) == []  # nothing left to do


def test_a_failing_migration_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    def broken(db: Database) -> None:
        db.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("boom")

    with Database(tmp_path / "f.db") as db:
        migrate(db, MIGRATIONS[:1])
        with pytest.raises(RuntimeError):
            migrate(db, [*MIGRATIONS[:1], type(MIGRATIONS[0])("0002_broken", broken)])
        assert "half_done" not in db.table_names()
        assert applied_migrations(db) == ["0001_snapshots"]


def test_a_file_from_a_newer_syncd_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    StateStore(path).close()
    with Database(path) as db:
        db.execute("INSERT INTO migrations (name, applied_at) VALUES ('0099_from_the_future', 'x')")
    with pytest.raises(NewerStateError, match="written by a newer syncd") as caught:
        StateStore(path)
    assert caught.value.exit_code == 2


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("this is not sqlite " * 100)
    with pytest.raises(StateError, match="not a usable syncd state file"):
        StateStore(path)


def test_the_postgresql_state_is_migrated_once_and_a_newer_one_refused(pg_url: str) -> None:
    with pytest.raises(StateError, match="holds no syncd mirror"):
        StateStore(pg_url, readonly=True)  # nothing is created by a reader
    StateStore(pg_url).close()
    with StateStore(pg_url) as mirror:
        assert pg_migrations.applied_migrations(mirror.db.conn) == ["mirror-0001", "mirror-0002", "mirror-0003"]  # the store makes its own tables
        assert crawl(mirror, BASE, BASE_OK)[1].total == 8
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO fleet_migrations (name) VALUES ('9999-from-the-future')")
    with pytest.raises(PgError, match="newer syncd"):
        StateStore(pg_url)
    with pytest.raises(NewerStateError, match="newer syncd"):
        StateStore(pg_url, readonly=True)


def test_a_reader_sees_one_snapshot_while_a_writer_finishes_runs(state: Path | str) -> None:
    with StateStore(state) as writer:
        crawl(writer, BASE, BASE_OK)
        with StateStore(state, readonly=True) as reader:
            assert len(list(reader.current("t"))) == 8
            run, _ = crawl(writer, [r for r in BASE if r.id != "s3"], BASE_OK)
            assert len(list(reader.current("t"))) == 8 and reader.run(run) is None
        with StateStore(state, readonly=True) as reader:
            assert len(list(reader.current("t"))) == 7 and reader.run(run)["status"] == "complete"  # type: ignore[index]


# -- diff and helpers ---------------------------------------------------------------------------


def _change(op: str, id: str = "x", old: str | None = None, new: str | None = None,
            old_parent: str | None = None, parent: str | None = None, kind: str = "page") -> dict[str, Any]:
    return {"tenant": "t", "kind": kind, "id": id, "op": op, "old_hash": old, "new_hash": new,
            "old_parent_id": old_parent, "parent_id": parent, "old_position": 0 if op != "created" else None,
            "position": 0, "title": id}


def test_compose_nets_changes_out() -> None:
    assert compose([_change("created", new="h1", parent="s"), _change("deleted", old="h1", old_parent="s",
                                                                      parent="s")]) == []
    twice = compose([_change("updated", old="h1", new="h2", old_parent="s", parent="s"),
                     _change("updated", old="h2", new="h3", old_parent="s", parent="s")])
    assert [(c["op"], c["old_hash"], c["new_hash"]) for c in twice] == [("updated", "h1", "h3")]
    reverted = [_change("updated", old="h1", new="h2", old_parent="s", parent="s"),
                _change("updated", old="h2", new="h1", old_parent="s", parent="s")]
    assert compose(reverted) == []
    there_and_back = [_change("moved", old="h", new="h", old_parent="a", parent="b"),
                      _change("moved", old="h", new="h", old_parent="b", parent="a")]
    assert compose(there_and_back) == []
    reborn = compose([_change("deleted", old="h1", old_parent="s", parent="s"),
                      _change("created", new="h2", parent="s")])
    assert [c["op"] for c in reborn] == ["updated"]
    both = compose([_change("updated", old="h1", new="h2", old_parent="a", parent="a"),
                    _change("moved", old="h2", new="h2", old_parent="a", parent="b")])
    assert [c["op"] for c in both] == ["updated", "moved"]
    created_then_updated = compose([_change("created", new="h1", parent="s"),
                                    _change("updated", old="h1", new="h2", old_parent="s", parent="s")])
    assert [(c["op"], c["new_hash"]) for c in created_then_updated] == [("created", "h2")]


def test_summarise_counts_per_kind_and_op() -> None:
    summary = summarise([_change("created", "a"), _change("created", "b"), _change("deleted", "c", kind="space")])
    assert summary.counts == {"page": {"created": 2}, "space": {"deleted": 1}}
    assert summary.rows() == [("page", 2, 0, 0, 0), ("space", 0, 0, 0, 1)]
    assert summary.get("page", "created") == 2 and summary.get("site", "moved") == 0
    assert summary.total == 3 and summary and not summarise([])


def test_diff_between_two_runs(seeded: tuple[StateStore, int]) -> None:
    mirror, run1 = seeded
    run2, _ = crawl(mirror, BASE + [page("p9", "Temp", "s1", position=5)], BASE_OK)
    run3, _ = crawl(mirror, [r for r in BASE if r.id != "s3"] + [space("s2", "API 2", position=1)], BASE_OK)
    run4, _ = crawl(mirror, [r for r in BASE if r.id != "s3"] + [space("s2", "API 3", position=1)], BASE_OK)

    net = mirror.diff(run1, run4)
    assert {(c["op"], c["id"]) for c in net} == {("updated", "s2"), ("deleted", "s3")}
    updated = next(c for c in net if c["op"] == "updated")
    assert updated["title"] == "API 3"
    assert {(c["op"], c["id"]) for c in mirror.diff(run2, run3)} == {
        ("updated", "s2"), ("deleted", "s3"), ("deleted", "p9")}
    assert len(mirror.changes(run4, run1)) == 5  # created+deleted p9, s2 twice, s3

    with pytest.raises(StateError, match="older"):
        mirror.diff(run4, run1)
    cancelled = mirror.start_run("sync", "t", "t")
    mirror.abandon_run(cancelled)
    with pytest.raises(StateError, match="cancelled"):
        mirror.diff(run1, cancelled)
    with pytest.raises(StateError, match="no run"):
        mirror.diff(run1, 999)


def test_content_hash_ignores_volatile_fields_and_key_order() -> None:
    a = {"title": "x", "updatedAt": "1", "nested": {"b": 1, "a": 2}}
    b = {"nested": {"a": 2, "b": 1}, "updatedAt": "2", "title": "x"}
    assert content_hash(a, {"updatedAt"}) == content_hash(b, {"updatedAt"})
    assert content_hash(a) != content_hash(b)
    assert content_hash({"title": "é"}) == content_hash({"title": "é"}, set())
    assert len(content_hash({})) == 64
    assert stored_hash(a, {"updatedAt"}) == stored_hash(b, {"updatedAt"}) != stored_hash(a)
    assert len(stored_hash({})) == 22 and stored_hash({}) == base64.urlsafe_b64encode(bytes.fromhex(content_hash({}))[:16]).decode().rstrip("=")


# -- a first crawl's merge builds resources' indexes after its rows (issue 44) ------------------


def _file_contents(path: Path) -> tuple[list[Any], list[Any], list[Any]]:
    conn = Database(path).conn
    rows = conn.execute("SELECT * FROM resources ORDER BY tenant, kind, id").fetchall()
    changes = conn.execute("SELECT run, tenant, kind, id, op, new_hash, position, title FROM changes ORDER BY seq").fetchall()
    indexes = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'resources' ORDER BY name").fetchall()
    return rows, changes, indexes


def test_a_first_merge_builds_the_indexes_after_and_gives_what_a_merge_into_them_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same runs into two files, one merged the bulk way (its first run staged more rows
    than the file held: the indexes dropped, then built again), one with its indexes kept:
    the same rows, changes and index definitions; a second run (fewer rows than the file holds)
    keeps them in place. Then a later sync deletes what a listing lost, through the rebuilt
    `resources_current_by_listing` and the cascade's `resources_current_by_parent`."""
    from syncd.state import merge

    built: list[bool] = []
    mostly_new = merge._mostly_new
    monkeypatch.setattr(merge, "_mostly_new", lambda db, staged: built.append(mostly_new(db, staged)) or built[-1])
    with StateStore(tmp_path / "bulk.db") as bulk:
        crawl(bulk, BASE, BASE_OK)
        crawl(bulk, [*BASE[:3], page("p1", "Intro", "s1")], [ORGS, spaces_of("o1"), content_of("s1")])
    assert built == [True, False]
    monkeypatch.setattr(merge, "_mostly_new", lambda db, staged: False)
    with StateStore(tmp_path / "kept.db") as kept:
        crawl(kept, BASE, BASE_OK)
        crawl(kept, [*BASE[:3], page("p1", "Intro", "s1")], [ORGS, spaces_of("o1"), content_of("s1")])
    bulk_file, kept_file = _file_contents(tmp_path / "bulk.db"), _file_contents(tmp_path / "kept.db")
    assert bulk_file == kept_file
    rows, changes, indexes = bulk_file
    assert [name for name, _ in indexes] == sorted(["sqlite_autoindex_resources_1", *(index_name(i) for i in RESOURCES.current_indexes)])
    deleted = {(r[1], r[2]) for r in rows if r[-1] is not None}
    assert deleted == {("space", "s3"), ("page", "p2"), ("page", "p3")}  # s3 and p2 left their listings, p3 went with p2


def test_a_first_merge_that_fails_keeps_the_indexes_and_the_previous_file(tmp_path: Path) -> None:
    """The drop of the indexes is in the merge's transaction: a merge that fails after it takes
    the drop back with everything else, and the run can be abandoned, then crawled again."""
    with StateStore(tmp_path / "m.db") as mirror:
        mirror.db.execute(
            "CREATE TEMP TRIGGER refuse AFTER INSERT ON main.resources WHEN new.id = 'q1' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        run = mirror.start_run("sync", "t", "t")
        mirror.stage(run, BASE)
        with pytest.raises(Exception, match="refused"):
            mirror.finish_run(run)
        mirror.abandon_run(run, "failed", "refused")
        rows, changes, indexes = _file_contents(tmp_path / "m.db")
        assert rows == [] and changes == []
        assert len(indexes) == 1 + len(RESOURCES.current_indexes)
        mirror.db.execute("DROP TRIGGER temp.refuse")
        crawl(mirror, BASE, BASE_OK)
        assert current_ids(mirror) == {(r.kind, r.id) for r in BASE}
