"""Copies of large organizations in bounded memory (issue 46): a snapshot holds the
organization-level graph, never a space's pages, links, files or comments; those are read from
the state (a live side's mirror, or the backup file of a restore) one parent, one object at a
time, and at most a bounded number are held decoded at once; so do a restore and a daemon's
mirror job (the same `copy_org`). Counted through the loader (`syncd.copy.scoped.ScopedRows`),
not by memory or time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from syncd.config import JobConfig, TargetRef
from syncd.copy import copy_org, scoped, sides
from syncd.copy.scoped import SCOPED_KINDS, ScopedRows
from syncd.copy.sides import BackupSource
from syncd.daemon.jobs import execute_job
from syncd.daemon.metrics import DaemonMetrics
from syncd.emulator.generate import Generated, generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.read.backup import backup
from syncd.read.sync import StateLocation
from tests.conftest import ALL_TOKEN
from tests.copy_support import assert_no_state_file, settings_at
from tests.state_support import state  # noqa: F401 - a fixture

SPACES, PAGES = 12, 6
HELD = 8


@pytest.fixture
async def emulator() -> AsyncIterator[tuple[RunningEmulator, Generated]]:
    store = Store(seed=46)
    generated = generate(store, parse_spec(f"orgs=1,empty_orgs=2,spaces={SPACES},pages={PAGES},files=1,comments=1,sites=2"), seed=46, all_token=ALL_TOKEN)
    async with serve_emulator(store) as running:
        yield running, generated


@pytest.fixture
def loaders(monkeypatch: pytest.MonkeyPatch) -> list[ScopedRows]:
    """Every loader a run makes, each holding at most HELD objects decoded (and few lists)."""
    made: list[ScopedRows] = []

    class Counted(ScopedRows):
        def __init__(self, *args: Any, **options: Any) -> None:
            super().__init__(*args, **options)
            self.held_lists = 2
            made.append(self)

    monkeypatch.setattr(scoped, "DEFAULT_HELD", HELD)
    monkeypatch.setattr(sides, "ScopedRows", Counted)
    return made


@pytest.fixture
def read_sides(monkeypatch: pytest.MonkeyPatch) -> list[sides.Side]:
    """Every side a run read (its snapshots are looked at after the run)."""
    seen: list[sides.Side] = []
    read = sides.read_sides

    async def recorded(*args: Any, **options: Any) -> tuple[sides.Side, sides.Side]:
        source, target = await read(*args, **options)
        seen.extend((source, target))
        return source, target

    monkeypatch.setattr("syncd.copy.engine.read_sides", recorded)
    return seen


def held_scoped(side: sides.Side) -> list[tuple[str, str]]:
    return [key for key in side.snapshot.nodes if key[0] in SCOPED_KINDS]


async def test_a_copy_holds_no_space_content_and_a_bounded_number_of_objects_at_once(
    emulator: tuple[RunningEmulator, Generated], state: StateLocation, tmp_path: Path, loaders: list[ScopedRows], read_sides: list[sides.Side]
) -> None:
    running, generated = emulator
    settings = settings_at(running.url, tmp_path / "state", state, src=ALL_TOKEN, dst=ALL_TOKEN)
    report = await copy_org(settings, TargetRef("src", generated.org_ids[0]), TargetRef("dst", generated.org_ids[1]), db=state)
    assert report.equal, report.verification.counts()
    assert read_sides and all(not held_scoped(side) for side in read_sides)
    source = read_sides[-2].snapshot
    assert source.count("page") == SPACES * PAGES  # read from the state, not held
    assert source.count("site-space") > 0  # references between spaces and sites: through the id map, verified equal
    spaces = source.of_kind("space")
    assert len(spaces) == SPACES and all(source.children("page", ("space", s.id)) for s in spaces)
    assert loaders and sum(rows.loads for rows in loaders) > SPACES  # the planner read page data through them
    assert max(rows.peak for rows in loaders) <= HELD
    again = await copy_org(settings, TargetRef("src", generated.org_ids[0]), TargetRef("dst", generated.org_ids[1]), db=state)
    assert again.equal and not again.rounds  # nothing left to write
    assert_no_state_file(state, tmp_path / "state")


async def test_a_restore_reads_the_backups_space_content_from_the_file_when_asked(
    emulator: tuple[RunningEmulator, Generated], tmp_path: Path, loaders: list[ScopedRows], read_sides: list[sides.Side]
) -> None:
    running, generated = emulator
    db = tmp_path / "state" / "syncd.db"
    settings = settings_at(running.url, tmp_path / "state", db, src=ALL_TOKEN, dst=ALL_TOKEN)
    file = tmp_path / "backup.db"
    await backup(settings, TargetRef("src", generated.org_ids[0]), file)
    report = await copy_org(settings, BackupSource(file), TargetRef("dst", generated.org_ids[2]), db=db)
    assert report.equal, report.verification.counts()
    from_file = [rows for rows in loaders if rows.location == file]
    assert from_file and all(rows.readonly for rows in from_file)
    assert sum(rows.loads for rows in from_file) > SPACES and max(rows.peak for rows in from_file) <= HELD
    assert all(not held_scoped(side) for side in read_sides)


async def test_a_daemon_mirror_job_reads_space_content_the_same_bounded_way(
    emulator: tuple[RunningEmulator, Generated], tmp_path: Path, loaders: list[ScopedRows], read_sides: list[sides.Side]
) -> None:
    running, generated = emulator
    settings = settings_at(running.url, tmp_path / "state", tmp_path / "state" / "syncd.db", src=ALL_TOKEN, dst=ALL_TOKEN)
    job = TypeAdapter(JobConfig).validate_python(
        {"name": "big", "kind": "mirror", "source": f"src:{generated.org_ids[0]}", "target": f"dst:{generated.org_ids[1]}"}
    )
    result = await execute_job(settings, job, DaemonMetrics())
    assert result.outcome == "succeeded", result.summary
    assert read_sides and all(not held_scoped(side) for side in read_sides)
    assert loaders and sum(rows.loads for rows in loaders) > SPACES and max(rows.peak for rows in loaders) <= HELD
