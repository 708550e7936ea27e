"""A crawl's rows, listings and scopes reach the mirror in batches (`syncd.read.staging_queue`,
`StateStore.write_staged`): few transactions, the order kept, all or nothing per batch, and a
mirror that fails mid-crawl ends the crawl with the previous snapshot current. Both backends."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from syncd import temp_dir
from syncd.api import TenantClient
from syncd.emulator.canonical import dump_org
from syncd.emulator.server import RunningEmulator
from syncd.read.crawl import Crawler
from syncd.files import StorageError
from syncd.state import Row, StateError, StateStore
from syncd.state.sqlite_file import compact_free_pages
from syncd.state.staging import Listed, ScopeCarried, ScopeRead
from tests.conftest import ALL_TOKEN
from tests.oracle import mirror_mismatches
from tests.state_support import count_rows
from tests.test_crawl import FAST_RETRY, crawl, current


class CountingStore(StateStore):
    """A real StateStore that counts its batches and can fail the `fail_at`-th one (a full
    disk, a lost server: what the writer meets in the field)."""

    batches = 0
    fail_at: int | None = None

    def write_staged(self, run: int, ops: Any) -> int:
        type(self).batches += 1
        if self.fail_at is not None and type(self).batches >= self.fail_at:
            raise StateError(f"{self.where}: the disk is full (batch {type(self).batches})")
        return super().write_staged(run, ops)


def row(tenant: str, kind: str, id: str, listing: str = "/list", scope: str | None = None, title: str = "x") -> Row:
    data = {"id": id, "title": title}
    return Row(tenant, kind, id, None, None, None, None, listing, scope, data, title)


async def test_a_crawl_stages_in_a_few_transactions_and_gives_the_exact_mirror(emulator: RunningEmulator, state: Path | str) -> None:
    org = emulator.generated.org_ids[0]
    CountingStore.batches = 0
    async with TenantClient("src", emulator.url, "org1-token", retry=FAST_RETRY) as client:
        with CountingStore(state) as mirror:
            result = await Crawler(client, mirror, "src").crawl(org)
    assert result.status == "complete"
    assert mirror_mismatches(state, "src", dump_org(emulator.store, org)) == []
    # Hundreds of listings and rows; before the queue, a transaction for every page and listing.
    assert result.stats.listings > 100
    assert 1 <= CountingStore.batches <= 3


async def test_a_mirror_failing_mid_crawl_ends_it_and_keeps_the_previous_snapshot(
    emulator: RunningEmulator, state: Path | str
) -> None:
    await crawl(emulator, state)
    before = current(state)
    CountingStore.batches, CountingStore.fail_at = 0, 1
    try:
        async with TenantClient("src", emulator.url, ALL_TOKEN, retry=FAST_RETRY) as client:
            with CountingStore(state) as mirror, pytest.raises(StateError, match="the disk is full"):
                await Crawler(client, mirror, "src").crawl()
    finally:
        CountingStore.fail_at = None
    with StateStore(state) as mirror:
        last = mirror.runs("src")[-1]
    assert last["status"] in ("failed", "cancelled") and "previous snapshot" in (last["reason"] or "")
    assert current(state) == before
    assert count_rows(state, "staged") == 0


def test_a_batch_is_one_transaction(state: Path | str) -> None:
    with StateStore(state) as mirror:
        run = mirror.start_run("sync", "t", "t")
        with pytest.raises(StateError, match="a row of 'u'"):
            mirror.write_staged(run, [row("t", "space", "s1"), Listed("/list", True), row("u", "space", "s2")])
        assert count_rows(state, "staged") == 0 and count_rows(state, "listings") == 0
        mirror.abandon_run(run)


def test_a_batch_keeps_the_order_of_what_was_read(state: Path | str) -> None:
    """A listing that failed stays failed when a later op says ok; a scope's rows staged
    before its carry win over the carried ones; a scope's token is staged with it."""
    with StateStore(state) as mirror:
        first = mirror.start_run("sync", "t", "t")
        mirror.write_staged(first, [row("t", "page", "p1", scope="space:s1", title="old"), row("t", "page", "p2", scope="space:s1"),
                                    Listed("/list", True), ScopeRead("space:s1", "rev1")])  # fmt: skip
        mirror.finish_run(first)
        second = mirror.start_run("sync", "t", "t")
        written = mirror.write_staged(second, [
            row("t", "page", "p1", scope="space:s1", title="new"), ScopeCarried("space:s1"),
            Listed("/list", False, "HTTP 503"), Listed("/list", True),
        ])  # fmt: skip
        assert written == 2  # p1 staged, p2 carried (p1's carry is a conflict: nothing)
        summary = mirror.finish_run(second)
        assert mirror.run(second)["status"] == "partial"  # the failed listing stays failed
        assert summary.get("page", "updated") == 1 and summary.by_op()["deleted"] == 0
        assert {r["id"]: r["data"]["title"] for r in mirror.current("t")} == {"p1": "new", "p2": "x"}
        assert mirror.scope_tokens("t") == {"space:s1": "rev1"}


def pragma(path: Path, name: str) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


def test_a_run_stages_outside_the_file(tmp_path: Path) -> None:
    """A file's writer stages in a TEMP table of its own connection: a first crawl no longer
    writes every object into the file twice (staged, then merged), nor leaves the file twice the
    mirror (its staging's pages free). In a file made before this syncd too."""
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(old)) as conn:
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("CREATE TABLE before_syncd (x)")  # an existing file: its auto_vacuum is fixed
    on_disk = lambda path: sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())  # noqa: E731
    for path in (new, old):
        with StateStore(path) as mirror:
            before = on_disk(path)
            run = mirror.start_run("sync", "t", "t")
            mirror.stage(run, [row("t", "page", f"p{n}", title="x" * 2000) for n in range(3000)])  # 6 MB of objects
            assert on_disk(path) - before < 1 << 20
            temp_pages = lambda: mirror.db.execute("PRAGMA temp.page_count").fetchone()[0]  # noqa: E731
            assert temp_pages() > 1500  # the staging: in the writer's temporary file
            mirror.record_listing(run, "t", "/list", True)
            mirror.record_listing(run, "t", "/other", False, "HTTP 503")
            mirror.finish_run(run)
            mirror.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            assert mirror.db.execute("SELECT count(*) FROM staged").fetchone()[0] == 0
            assert mirror.db.execute("PRAGMA temp.journal_mode").fetchone()[0] == "delete"  # emptied without one, then back
            assert temp_pages() < 50  # and its pages given back: a daemon's connection outlives the run
        assert pragma(path, "freelist_count") < pragma(path, "page_count") * 0.05
        with contextlib.closing(sqlite3.connect(path)) as conn:  # a failed listing outlives its run, in the file
            assert conn.execute("SELECT listing, status, error FROM listings").fetchall() == [("/other", "failed", "HTTP 503")]
    assert pragma(new, "auto_vacuum") == 2 and pragma(old, "auto_vacuum") == 0
    with StateStore(new) as mirror:
        assert len(list(mirror.current_keys("t"))) == 3000


def test_two_runs_open_on_one_store_keep_their_staging_apart(state: Path | str) -> None:
    """Two tenants' runs at once on one StateStore (a daemon's jobs): the first to finish takes
    only its own staged rows and listings with it; the other's merge finds all of its own."""
    with StateStore(state) as mirror:
        first, second = mirror.start_run("sync", "t", "t"), mirror.start_run("sync", "u", "u")
        mirror.write_staged(first, [row("t", "page", "p1"), Listed("/list", True), Listed("/gone", False, "HTTP 503")])
        mirror.write_staged(second, [row("u", "page", "q1"), row("u", "page", "q2"), Listed("/list", True), ScopeRead("space:s", "r1")])
        assert mirror.finish_run(first).counts == {"page": {"created": 1}}
        assert mirror.finish_run(second).counts == {"page": {"created": 2}}
        assert [r["id"] for r in mirror.current("u")] == ["q1", "q2"] and mirror.scope_tokens("u") == {"space:s": "r1"}
        assert mirror.run(first)["status"] == "partial" and mirror.run(second)["status"] == "complete"  # type: ignore[index]
        for table in ("staged", "staged_scopes", mirror.dialect.run_listings):
            left = mirror.db.execute(f"SELECT count(*) FROM {table} WHERE run IN (?, ?)", [first, second]).fetchone()[0]
            assert left == (1 if table == "listings" else 0), table  # the failed listing, kept
        assert mirror.db.execute("SELECT run, listing FROM listings").fetchall() == [(first, "/gone")]


def test_a_full_temporary_directory_is_named_in_the_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The staging lives in the temporary directory (`syncd.temp_dir`: `tmp` in the state
    directory): when it fills up (played here by a page limit on the TEMP database, the same
    SQLITE_FULL), the error names that place too."""
    monkeypatch.setattr(temp_dir, "_chosen", tmp_path / "tmp")  # as loading the settings chooses it
    with pytest.raises(StorageError) as raised:
        with StateStore(tmp_path / "state.db") as mirror:
            mirror.db.execute("PRAGMA temp.max_page_count = 40")
            run = mirror.start_run("sync", "t", "t")
            mirror.stage(run, [row("t", "page", f"p{n}", title="x" * 2000) for n in range(500)])
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / 'state.db'}: no space left on the device") and "\n" not in message
    assert f"(or free space in {tmp_path / 'tmp'}: the temporary directory, where a run stages what it reads" in message
    assert raised.value.exit_code == 1
    with StateStore(tmp_path / "state.db") as mirror:  # nothing of the run became current; the file is whole
        assert not list(mirror.current_keys("t"))


def test_an_abandoned_run_leaves_no_staging_and_gives_the_pages_back(tmp_path: Path) -> None:
    with StateStore(tmp_path / "state.db") as mirror:
        run = mirror.start_run("sync", "t", "t")
        mirror.stage(run, [row("t", "page", f"p{n}", title="x" * 2000) for n in range(3000)])
        mirror.record_listing(run, "t", "/list", False, "HTTP 503")
        mirror.abandon_run(run, "cancelled", "interrupted")
        assert mirror.db.execute("PRAGMA temp.page_count").fetchone()[0] < 50
        for table in ("staged", "staged_scopes", "run_listings", "main.listings"):
            assert mirror.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
        assert mirror.run(run)["status"] == "cancelled"  # type: ignore[index]
        again = mirror.start_run("sync", "t", "t")  # the next run stages and merges as ever
        mirror.write_staged(again, [row("t", "page", "p1"), Listed("/list", True)])
        assert mirror.finish_run(again).counts == {"page": {"created": 1}}


def test_compacting_gives_every_free_page_of_the_file_back(tmp_path: Path) -> None:
    """`PRAGMA incremental_vacuum` frees a page per step: run to its end on every supported
    Python (3.11's cursor stopped a statement without columns after one step: one page back)."""
    with StateStore(tmp_path / "state.db") as mirror:
        mirror.db.execute("CREATE TABLE lost (x)")  # what a retention prune leaves: many free pages
        with mirror.db.atomic():
            mirror.db.conn.executemany("INSERT INTO lost VALUES (zeroblob(2000))", [()] * 3000)
        mirror.db.execute("DROP TABLE lost")
        free = mirror.db.execute("PRAGMA freelist_count").fetchone()[0]
        assert free > 1500
        assert compact_free_pages(mirror.db) == free
        assert mirror.db.execute("PRAGMA freelist_count").fetchone()[0] == 0
