"""Each index of the state file earns its place (issue 44): a named query's plan uses it, and
the hot paths do not walk a tenant's rows.

The real code runs against the emulator: a first crawl, a sync of a few changes (a rename, a
move, a site deleted with what hangs under it), a no-change re-sync, then the reads of the
daemon (counts), of `syncd diff` (changes, where things moved), of an export and of a copy
(a snapshot's tree). Every statement they run on `resources` and `changes` is traced as SQLite
runs it (`sqlite3.connect` wrapped to set a trace callback: the statements, values bound),
then SQLite says how it runs each (`EXPLAIN QUERY PLAN` on the file the runs made; the file
has no statistics, so a plan is the one every run gets).

A walk is a plan step that reads every row of a tenant in `resources` or `changes`: a SCAN of
the table, or a SEARCH constrained by the tenant alone. The only one a hot path may take is a
count of the tenant's objects, through a partial index of current rows (its entries are all it
reads), never through the primary key (whose entries lead to every row).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from sqlite_utils import Database

from syncd.api import TenantClient
from syncd.commands.change_lines import change_lines
from syncd.config import RetryConfig
from syncd.state import packing
from syncd.copy.model import Snapshot
from syncd.copy.scoped import ScopedRows
from syncd.emulator.server import RunningEmulator
from syncd.read.crawl import Crawler
from syncd.read.export import export_mirror
from syncd.state import StateStore
from syncd.state.merge import FIELDS_FUNCTION
from syncd.state.sqlite_file import stage_apart
from syncd.state.tables import CHANGES, RESOURCES, index_name
from tests.conftest import ALL_TOKEN, Api

TENANT = "src"
HOT = ("first crawl", "sync with changes", "no-change re-sync", "reads")

USES: dict[str, tuple[tuple[str, str], ...]] = {
    "sqlite_autoindex_resources_1": (
        ("sync with changes", "JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id"),  # the merge's joins
        ("reads", "AND kind = ? AND id = ? AND deleted_run IS NULL"),  # an object by key (export, copy)
        ("no-change re-sync", "WHERE tenant = ? AND deleted_run IS NULL AND kind = ? ORDER BY"),  # a kind's objects (the organizations)
        ("reads", "WITH RECURSIVE k(kind)"),  # a tenant's kinds, then a parent by key (`syncd diff`'s `location`)
    ),
    "resources_current_by_listing": (("sync with changes", "FROM run_listings l"),),  # the merge's deletions
    "resources_current_by_parent": (
        ("sync with changes", "CROSS JOIN resources c ON c.tenant = p.tenant"),  # the cascade to children
        ("no-change re-sync", "AND kind = ? AND parent_id = ?"),  # the change requests of an unchanged space
        ("reads", "AND kind = ? AND parent_kind = ? AND parent_id = ?"),  # the copy's children of a parent
    ),
    "resources_current_by_org": (
        ("reads", "GROUP BY org, kind"),  # counts (the daemon after a run, export, copy)
        ("reads", "AND kind = ? AND org = ?"),  # an organization's objects of a kind (export, copy)
    ),
    "resources_current_in_scope": (("reads", "AND scope = ?"),),  # a space's objects (export)
    "resources_deleted": (
        ("sync with changes", "hash, NULL, parent_id, parent_id, position, position"),  # the changes of the rows it deleted
        ("sync with changes", "FROM resources p CROSS JOIN"),  # what the cascade starts from
    ),
    "changes_of_run": (
        ("sync with changes", "FROM changes WHERE run = ? GROUP BY"),  # a run's totals
        ("reads", "FROM changes WHERE tenant = ? AND run > ?"),  # `syncd diff` over runs
    ),
}
"""Index -> the queries (phase, a piece of their SQL, values as ?) whose plans must use it."""

_LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+\b")
_TABLES = re.compile(r"\b(?:FROM|JOIN|UPDATE|INTO)\s+(resources|changes)\b(?:\s+(?!WHERE\b|ON\b|SET\b|CROSS\b|JOIN\b|LEFT\b|ORDER\b|GROUP\b)(\w+))?", re.I)
_STEP = re.compile(r"^(SCAN|SEARCH) (\w+)(?: USING (?:COVERING )?INDEX (\w+))?(?: \((.*)\))?")


@dataclass
class Traced:
    """One statement as a phase ran it (`sql`), its shape (`shape`: literals as ?), its plan."""

    phase: str
    sql: str
    shape: str
    plan: tuple[str, ...] = ()

    def indexes(self) -> set[str]:
        return {name for step in self.plan if (found := re.search(r"USING (?:COVERING )?INDEX (\w+)", step)) for name in [found.group(1)]}

    def walks(self) -> list[str]:
        """The steps of the plan that read all of a tenant's rows of `resources` or `changes`."""
        names = {alias or table: table for table, alias in _TABLES.findall(self.shape)}
        names.update({table: table for table in names.values()})
        found = []
        for step in self.plan:
            parsed = _STEP.match(step)
            if parsed is None or parsed.group(2) not in names:
                continue
            how, _, index, constraint = parsed.groups()
            if how == "SCAN" or constraint == "tenant=?":
                found.append(step)
        return found


def _shape(sql: str) -> str:
    return " ".join(_LITERAL.sub("?", sql).split())


@contextlib.contextmanager
def traced_connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[Traced], list[str]]]:
    """Every statement on `resources`/`changes` of every SQLite connection opened meanwhile,
    under the phase named last in the list yielded."""
    seen: list[Traced] = []
    phase = ["setup"]
    connect = sqlite3.connect

    def trace(sql: str) -> None:
        shape = _shape(sql)
        if "resources_text" in shape:
            return  # migration 0006's rebuild of a new file's (empty) table: no query of a run
        if _TABLES.search(shape) and shape.split(" ", 1)[0].upper() in ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH"):
            seen.append(Traced(phase[-1], sql, shape))

    def traced(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)  # type: ignore[arg-type]
        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    try:
        yield seen, phase
    finally:
        monkeypatch.setattr(sqlite3, "connect", connect)


def explained(db: Path, statements: list[Traced]) -> list[Traced]:
    """`statements`, one of each shape and phase, with their plans on the file `db`."""
    conn = packing.connect(db)  # syncd's SQL functions (`syncd_json`), as every connection of syncd's
    try:
        stage_apart(Database(conn, execute_plugins=False))  # the writer's TEMP tables the merge reads
        conn.create_function(FIELDS_FUNCTION, 3, lambda *_: None)
        unique = {(t.phase, t.shape): t for t in statements}
        for item in unique.values():
            item.plan = tuple(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + item.sql))
        return list(unique.values())
    finally:
        conn.close()


async def _crawl(running: RunningEmulator, db: Path) -> int:
    retry = RetryConfig(max_attempts=12, initial_wait=0.01, max_wait=0.3)
    async with TenantClient(TENANT, running.url, ALL_TOKEN, concurrency=4, retry=retry) as client:
        with StateStore(db) as mirror:
            result = await Crawler(client, mirror, TENANT, workers=4).crawl(running.generated.org_ids[0])
    assert result.status == "complete", result.stats.errors
    return result.run


@pytest.fixture
async def plans(emulator: RunningEmulator, api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Traced]:
    """The traced statements of every phase, with their plans."""
    org = emulator.generated.org_ids[0]
    db = tmp_path / "state" / "syncd.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    StateStore(db).close()  # the new file's migrations (0006 counts a table it just made), before any phase
    with traced_connections(monkeypatch) as (seen, phase):
        phase.append("first crawl")
        first = await _crawl(emulator, db)
        spaces = await api.all_items(f"/v1/orgs/{org}/spaces")
        collections = await api.all_items(f"/v1/orgs/{org}/collections")
        moved = next(s for s in spaces if s.get("parent"))
        await api.patch(f"/v1/spaces/{spaces[0]['id']}", {"title": "Renamed space"})
        await api.post(f"/v1/spaces/{moved['id']}/move", {"parent": next(c["id"] for c in collections if c["id"] != moved["parent"])})
        site = (await api.all_items(f"/v1/orgs/{org}/sites"))[0]
        assert (await api.delete(f"/v1/orgs/{org}/sites/{site['id']}"))[0] == 204
        phase.append("sync with changes")
        changed = await _crawl(emulator, db)
        phase.append("no-change re-sync")
        await _crawl(emulator, db)

        phase.append("reads")
        with StateStore(db, readonly=True) as store:
            store.counts(TENANT)  # the daemon, after each run
            changes = store.diff(first, changed)
            assert any(c["op"] == "moved" for c in changes) and any(c["op"] == "deleted" for c in changes)
            assert "Renamed space" in "\n".join(change_lines(changes, store.location, every=True))
        export_mirror(db, tmp_path / "export", records=True)
        rows = ScopedRows(db, TENANT, org, readonly=True)
        with StateStore(db, readonly=True) as store:
            snapshot = Snapshot.from_mirror(store, TENANT, org, rows)
        try:
            space = snapshot.of_kind("space")[0]
            page = snapshot.children("page", ("space", space.id))[0]
            assert snapshot.get("page", page.id) is not None and rows.data("page", page.id)
            assert snapshot.of_kind("page-link") is not None and rows.counts()
        finally:
            snapshot.release()
    return explained(db, seen)


def test_each_index_is_used_by_the_queries_named_for_it(plans: list[Traced], tmp_path: Path) -> None:
    with contextlib.closing(sqlite3.connect(tmp_path / "state" / "syncd.db")) as conn:
        there = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('resources', 'changes')")}
    assert there == set(USES)  # an index without a query named for it has no place; nor a query without its index
    assert there == {"sqlite_autoindex_resources_1"} | {index_name(i) for i in (*RESOURCES.current_indexes, *CHANGES.current_indexes)}
    for index, uses in USES.items():
        for phase, piece in uses:
            matching = [t for t in plans if t.phase == phase and piece in t.shape]
            assert matching, f"no statement of the {phase} holds {piece!r}"
            assert all(index in t.indexes() for t in matching), (index, [(t.shape[:160], t.plan) for t in matching])


def test_the_hot_paths_walk_no_tenant(plans: list[Traced]) -> None:
    walks = []
    for t in plans:
        if t.phase not in HOT:
            continue
        steps = t.walks()
        counted = t.shape.startswith("SELECT kind, count(*) FROM resources")
        if counted and all(_STEP.match(s).group(3) not in (None, "sqlite_autoindex_resources_1") for s in steps):  # type: ignore[union-attr]
            continue  # a count reads every entry of a partial index of current rows: that is what it counts
        if steps:
            walks.append((t.phase, t.shape[:200], steps))
    assert walks == []
    assert {t.phase for t in plans} >= set(HOT)
