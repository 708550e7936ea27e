"""A mirror and a backup written by the previous release are read, synced into and backed up by
this syncd, which answers about them, and about files it makes now of the same organization, as
the previous release did (issue 44's acceptance).

The files and the answers are in tests/fixtures/old_release/, made by
tests/fixtures/make_old_files.py with the old release (never with later code);
tests/old_files.py says how each answer is obtained and what is normalised. The real CLI, in
this process, against the seeded emulator on a loopback port (a new one for each test: the
restores need an empty organization, and the fresh mirror changes the source).

The committed files are never handed to syncd: copies are, so that a syncd that wrote into a
file it should only read fails here instead of rewriting the fixture.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import old_files as old
from tests.thread_emulator import ThreadEmulator

REVERSED = {"created": "deleted", "deleted": "created", "updated": "updated", "moved": "moved"}


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own: no configuration file of the checkout is read."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def emulator(work: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadEmulator]:
    """The seeded organization of the old files, and tenant SRC pointing at it."""
    with old.seeded_emulator() as running:
        use(running, work, monkeypatch)
        yield running


def use(emulator: ThreadEmulator, work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in old.tenant_env(emulator, work / "state").items():
        monkeypatch.setenv(name, value)


def copy_of_backup(into: Path) -> Path:
    shutil.copy2(old.BACKUP, into / old.BACKUP.name)
    shutil.copytree(old.blobs_of(old.BACKUP), old.blobs_of(into / old.BACKUP.name))
    return into / old.BACKUP.name


def folder_state(folder: Path) -> dict[str, str]:
    """Every file in `folder` and below -> sha256: what reading must leave as it was (no
    byte changed, nothing written beside the file)."""
    return old.file_digests(*sorted(folder.iterdir()))


def changed_only_by_origin(change: dict[str, Any]) -> bool:
    """An update whose every field differs only by the emulator's origin (its port: a new one
    on each start), once `old_files.diff_result` has shown every origin alike (a value the diff
    cut short is compared as far as it is kept). An update that names no field is not one."""
    fields = change.get("fields") or []
    return change["op"] == "updated" and bool(fields) and all(f["old"] == f["new"] for f in fields)


def test_the_fixtures_are_the_files_the_old_release_wrote() -> None:
    made_by = old.golden("made_by")
    assert made_by["commit"] == "b22ad9f60abe11e402800108a6d1aa0ac2caefa0"
    assert (made_by["spec"], made_by["seed"], made_by["clock"]) == (old.SPEC, old.SEED, old.CLOCK.isoformat())
    assert old.file_digests(old.MIRROR, old.BACKUP, old.blobs_of(old.BACKUP)) == old.golden("fixtures")


def test_the_emulator_still_generates_the_organization_of_the_old_files(emulator: ThreadEmulator) -> None:
    """When this fails, the emulator's generator changed, not syncd: the tests that talk to the
    seeded organization (the restores, the syncs into the old mirror, the files made now) cannot
    hold then, while `check`, `export` and `diff` of the old files as they are still must."""
    assert old.seeded_source(emulator) == old.golden("source")


def test_an_old_backup_is_only_read_and_checked_exported_and_restored_as_before_then_backed_up_over(emulator: ThreadEmulator, work: Path) -> None:
    held = work / "held"
    held.mkdir()
    backup = copy_of_backup(held)
    before = folder_state(held)
    assert before == {name: digest for name, digest in old.golden("fixtures").items() if name != "mirror.db"}

    assert old.check_result(backup) == old.golden("check")
    assert old.export_result(backup, work / "export") == old.golden("export")
    assert old.restore_result(emulator, backup, work / "restore.db") == old.golden("restore")
    assert folder_state(held) == before  # nothing written into the backup, its blobs, or beside them

    # Backed up again by this syncd, over the old file: `--overwrite` reads the old backup's
    # counts first (never an emptier one), then the new file answers as the old one did.
    old.make_backup(emulator, backup, "--overwrite")
    assert folder_state(held) != before
    assert old.check_result(backup) == old.golden("check")
    assert old.export_result(backup, work / "again" / "export") == old.golden("export")


def test_an_old_mirror_is_diffed_as_before_then_synced_into_without_spurious_changes(
    emulator: ThreadEmulator, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = work / "held"
    held.mkdir()
    mirror = held / old.MIRROR.name
    shutil.copy2(old.MIRROR, mirror)
    recorded = old.golden("diff")
    assert old.diff_result(mirror) == recorded
    assert folder_state(held) == {"mirror.db": old.golden("fixtures")["mirror.db"]}  # only read

    # A sync by this syncd into it, of the organization as it was at the old second run: no
    # object changed, but for the emulator's origin (a new port).
    # The sync migrates the file: its hashes (64 hex characters) become the 22 the crawler now
    # stores (0008), so an object read as it was is not "updated".
    assert old.stored_hash_lengths(mirror) == {64}
    old.change_source(emulator, emulator.org_ids[0])
    told = synced(mirror, emulator, run=3)
    # The operator is told that the objects are rewritten, which and how many, then that it is done.
    for migration in ("0006_packed_objects", "0008_stored_hashes"):
        upgrading = [line for line in told if "state.upgrading" in line and f"migration={migration}" in line]
        assert len(upgrading) == 1 and f"file={mirror}" in upgrading[0] and "objects=" in upgrading[0], told
        assert [line for line in told if "state.upgraded" in line and f"migration={migration}" in line], told
    assert not [line for line in told if "0007_narrower_indexes" in line]  # (indexes only: quick, said nothing)
    assert old.stored_hash_lengths(mirror) == {22}
    third = old.diff_result(mirror, 2, 3)["changes"]
    assert [c for c in third if not changed_only_by_origin(c)] == []
    assert all(c["old_hash"] != c["new_hash"] for c in third if c["op"] == "updated")
    assert old.diff_result(mirror, 1, 2) == old.with_stored_hashes(recorded)  # the old runs read as before, after a new one

    # Another, of the organization as it was at the old first run: what changed between the old
    # runs changes back (deleted objects made again, with their ids), and nothing else.
    with old.seeded_emulator() as first:
        use(first, work, monkeypatch)
        synced(mirror, first, run=4)
    back = {(c["kind"], c["id"], c["op"]) for c in old.diff_result(mirror, 3, 4)["changes"] if not changed_only_by_origin(c)}
    assert back == {(c["kind"], c["id"], REVERSED[c["op"]]) for c in recorded["changes"]}
    runs = json.loads(old.ok("status", "--db", mirror, "--json"))["runs"]
    assert [(r["id"], r["status"]) for r in runs] == [(n, "complete") for n in (1, 2, 3, 4)]


def synced(mirror: Path, emulator: ThreadEmulator, run: int) -> list[str]:
    """`syncd sync --full` of the seeded organization into `mirror`: run `run`, read whole; the
    lines it wrote on stderr."""
    code, out, err = old.syncd("sync", f"{old.TENANT}:{emulator.org_ids[0]}", "--db", mirror, "--full", "--json")
    assert code == 0, (code, out, err)
    report = json.loads(out)
    assert (report["run"], report["status"], report["failed_listings"]) == (run, "complete", 0), report
    return err.splitlines()


def test_a_backup_and_a_mirror_made_now_answer_as_the_old_release_did(
    emulator: ThreadEmulator, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = work / "now" / "backup.db"
    old.make_backup(emulator, backup)
    assert old.check_result(backup) == old.golden("check")
    assert old.export_result(backup, work / "export") == old.golden("export")
    assert old.restore_result(emulator, backup, work / "restore.db") == old.golden("restore")

    with old.seeded_emulator() as another:  # the mirror changes the source: an organization of its own
        use(another, work, monkeypatch)
        old.make_mirror(another, work / "now" / "mirror.db")
    assert old.diff_without_hashes(old.diff_result(work / "now" / "mirror.db")) == old.diff_without_hashes(old.golden("diff"))
