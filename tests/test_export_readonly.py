"""Backups are only read by `status` and `export` (`StateStore(path, readonly=True)`): nothing is
written into the file or beside it, read-only media work, old schemas are read as they are,
and files that are not (or no longer) readable end in one line, not a traceback."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_utils import Database

from syncd.cli import main
from syncd.read.backup import blobs_dir
from syncd.read.export import ExportError, export_mirror
from syncd.state import MIGRATIONS, StateStore, StateError, NewerStateError, applied_migrations, migrate
from tests.test_export import Backup, _row, build_backup, rows_of

SIDECARS = ("-wal", "-shm", "-journal", ".lock")


@pytest.fixture(scope="module")
def backup(tmp_path_factory: pytest.TempPathFactory) -> Backup:
    return build_backup(tmp_path_factory.mktemp("backup") / "backup.db")


def state(folder: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry below `folder`: (sha256 or 'dir', mtime in ns, mode)."""
    entries = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        digest = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        entries[path.relative_to(folder).as_posix()] = (digest, info.st_mtime_ns, info.st_mode)
    return entries


def read_only(folder: Path) -> None:
    """`chmod -R a-w folder`."""
    for path in [folder, *folder.rglob("*")]:
        path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)


def writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)


def media_copy(backup: Backup, folder: Path) -> Path:
    """A copy of the backup and its blobs in `folder`, made read-only."""
    folder.mkdir(parents=True)
    db = folder / "backup.db"
    shutil.copy2(backup.path, db)
    shutil.copytree(blobs_dir(backup.path), blobs_dir(db))
    read_only(folder)
    return db


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("syncd: error: ") and "\n" not in err and "Traceback" not in captured.out + captured.err, err
    return err


# ----- read-only media ---------------------------------------------------------------------


def test_status_and_export_leave_a_read_only_backup_as_it_was(backup: Backup, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    media = tmp_path / "media"
    db = media_copy(backup, media)
    before = state(media)
    try:
        assert main(["status", "--db", str(db), "--json"]) == 0
        runs = json.loads(capsys.readouterr().out)["runs"]
        assert [r["status"] for r in runs] == ["complete"]
        assert main(["status", "--db", str(db)]) == 0
        assert "current objects" in capsys.readouterr().out
        out = tmp_path / "out"
        assert main(["export", str(db), str(out)]) == 0
        printed = " ".join(capsys.readouterr().out.split())
        files = len(rows_of(backup, "file") + rows_of(backup, "change-request-file"))
        assert f"{files} file binaries" in printed and "not in the backup" not in printed
        with StateStore(db, readonly=True) as mirror:
            assert mirror.immutable and mirror.readonly
            assert mirror.counts("emu")["page"] == len(rows_of(backup, "page"))
        assert state(media) == before, "no byte, time or mode changed, and nothing appeared beside the file"
        assert not [p for p in media.iterdir() if p.name.endswith(SIDECARS)]
    finally:
        writable(media)


def _nobody() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


@pytest.mark.skipif(os.geteuid() != 0 or _nobody() is None or shutil.which("setpriv") is None,
                    reason="needs root, a `nobody` user and setpriv to run a command as another user")  # fmt: skip
def test_read_only_media_for_a_user_who_cannot_write_there(backup: Backup) -> None:
    """Root ignores file modes, so the commands run as `nobody` (through setpriv, which
    drops root's capabilities only once the interpreter is found): for that user the folder
    is read-only media, where plain `mode=ro` cannot even open a WAL file (it must create
    the WAL index beside it)."""
    user = _nobody()
    assert user is not None
    with tempfile.TemporaryDirectory(prefix="syncd-ro-") as top:
        root = Path(top)
        root.chmod(0o755)
        db = media_copy(backup, root / "media")
        # syncd writes its files private (0600/0700); media brought from elsewhere may be readable by all.
        for path in [root / "media", *(root / "media").rglob("*")]:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | (0o055 if path.is_dir() else 0o044))
        out_parent = root / "exports"
        out_parent.mkdir(mode=0o777)
        out_parent.chmod(0o777)
        before = state(root / "media")

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": top, "NO_COLOR": "1", "COLUMNS": "200"}
            # The user may read and search everywhere (CAP_DAC_READ_SEARCH, ambient): an interpreter
            # under root's 0700 home, as pyenv's are, must load its shared libpython as that user.
            # Writing stays refused wherever the modes refuse it, which is what this test is about.
            drop = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                    "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
            return subprocess.run([*drop, sys.executable, *args], cwd=top, env=env, capture_output=True, text=True, timeout=300)

        plain = run("-c", f"import sqlite3; sqlite3.connect({db.resolve().as_uri() + '?mode=ro'!r}, uri=True).execute('SELECT count(*) FROM runs')")
        assert plain.returncode != 0 and "readonly database" in plain.stderr, plain.stderr[-300:]
        status = run("-m", "syncd.cli", "status", "--db", str(db), "--json")
        assert status.returncode == 0, status.stderr
        assert [r["status"] for r in json.loads(status.stdout)["runs"]] == ["complete"]
        export = run("-m", "syncd.cli", "export", str(db), str(out_parent / "out"))
        assert export.returncode == 0, export.stderr
        assert "not a syncd mirror" not in export.stdout + export.stderr
        assets = [p for p in (out_parent / "out").rglob("*") if p.parent.name == "assets"]
        assert len(assets) == len(rows_of(backup, "file") + rows_of(backup, "change-request-file"))
        assert state(root / "media") == before
        writable(root)


# ----- the read-only StateStore -------------------------------------------------------------------


def test_a_read_only_mirror_refuses_every_write(backup: Backup, tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    shutil.copy2(backup.path, db)
    before = state(tmp_path)
    with StateStore(db, readonly=True) as mirror:
        assert len(list(mirror.current("emu", kind="space"))) == len(rows_of(backup, "space"))
        writes = [
            lambda: mirror.start_run("sync", "emu", "emu"),
            lambda: mirror.transaction().__enter__(),
            lambda: mirror.stage(1, []),
            lambda: mirror.record_listing(1, "emu", "x", ok=True),
            lambda: mirror.finish_run(1),
            lambda: mirror.close_run(1, "complete"),
            lambda: mirror.abandon_run(1),
            lambda: mirror.recover(),
        ]
        for write in writes:
            with pytest.raises(StateError, match="is open read-only"):
                write()
        with pytest.raises(sqlite3.OperationalError):  # and SQLite itself says no
            mirror.db.execute("DELETE FROM runs")
    assert state(tmp_path) == before


def test_a_mirror_in_use_is_read_through_its_wal_as_one_snapshot(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    with StateStore(db) as writer:
        writer.finish_run(writer.start_run("sync", "t", "t"))
        assert db.with_name("live.db-wal").exists()  # a writer has it open
        with StateStore(db, readonly=True) as reader:
            assert not reader.immutable
            assert [r["id"] for r in reader.runs()] == [1]
            writer.finish_run(writer.start_run("sync", "t", "t"))
            assert [r["id"] for r in reader.runs()] == [1], "a read-only StateStore reads one snapshot"
        with StateStore(db, readonly=True) as reader:
            assert [r["id"] for r in reader.runs()] == [1, 2]


def test_a_file_written_while_it_is_read_immutable_is_reported(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with StateStore(db) as writer:
        writer.finish_run(writer.start_run("sync", "t", "t"))
    with pytest.raises(StateError, match="was written while it was being read"):
        with StateStore(db, readonly=True) as reader:
            assert reader.immutable and len(reader.runs()) == 1
            with StateStore(db) as writer:  # closing it checkpoints into the file
                writer.finish_run(writer.start_run("sync", "t", "t"))
    with StateStore(db, readonly=True) as reader:
        assert len(reader.runs()) == 2


# ----- old, new, foreign and damaged files ----------------------------------------------------


def old_file(path: Path, wal: bool) -> None:
    """A state file of the first schema, as the first syncd left it."""
    with Database(path) as db:
        assert migrate(db, MIGRATIONS[:1]) == ["0001_snapshots"]
        db.execute("INSERT INTO runs (job, tenant, scope_ref, started_at, status) "
                   "VALUES ('backup', 't', 't', '2024-01-01T00:00:00+00:00', 'complete')")  # fmt: skip
        db.execute("INSERT INTO resources (tenant, kind, id, org, data, hash, first_seen_run, last_seen_run) "
                   """VALUES ('t', 'organization', 'o1', 'o1', '{"id": "o1", "title": "Old org"}', 'h', 1, 1)""")  # fmt: skip
        if wal:
            db.enable_wal()


@pytest.mark.parametrize("wal", [False, True], ids=["rollback-journal", "wal"])
def test_an_older_file_is_read_as_it_is(tmp_path: Path, wal: bool, capsys: pytest.CaptureFixture[str]) -> None:
    media = tmp_path / "media"
    media.mkdir()
    db = media / "old.db"
    old_file(db, wal)
    read_only(media)
    before = state(media)
    try:
        assert main(["status", "--db", str(db), "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert [r["status"] for r in printed["runs"]] == ["complete"] and printed["objects"] == {"t": {"organization": 1}}
        report = export_mirror(db, tmp_path / "out")
        assert report.organizations == 1
        assert json.loads((tmp_path / "out" / "old-org" / "organization.json").read_text()) == {"id": "o1", "title": "Old org"}
        with StateStore(db, readonly=True) as mirror:
            assert applied_migrations(mirror.db) == ["0001_snapshots"], "not migrated"
            assert mirror.immutable is wal
        assert state(media) == before
    finally:
        writable(media)
    with StateStore(db) as mirror:  # opened to write, it is upgraded as before
        assert applied_migrations(mirror.db) == [m.name for m in MIGRATIONS]


def test_newer_and_foreign_schemas_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    newer = tmp_path / "new.db"
    StateStore(newer).close()
    with Database(newer) as db:
        db.execute("INSERT INTO migrations (name, applied_at) VALUES ('0099_from_the_future', 'x')")
    with pytest.raises(NewerStateError):
        StateStore(newer, readonly=True)
    assert main(["status", "--db", str(newer)]) == 2
    assert "written by a newer syncd" in one_line_error(capsys)
    assert main(["export", str(newer), str(tmp_path / "out")]) == 2
    assert "written by a newer syncd" in one_line_error(capsys)

    older = tmp_path / "older.db"
    with sqlite3.connect(older) as conn:
        conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    assert main(["status", "--db", str(older)]) == 2
    assert "written by an older syncd (it lacks migration '0001_snapshots')" in one_line_error(capsys)

    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (text)")
    assert main(["status", "--db", str(foreign)]) == 2
    assert "not a syncd mirror or backup (it has no syncd tables)" in one_line_error(capsys)
    assert not (tmp_path / "out").exists()


def damaged_files(backup: Backup, folder: Path) -> Iterator[tuple[Path, str]]:
    """(file, what the one-line error says) for files that are not, or no longer, readable."""
    text = folder / "notes.db"
    text.write_text("hello, this is not a database at all\n" * 10)
    yield text, "not an SQLite database"
    empty = folder / "empty.db"
    empty.touch()
    yield empty, "an empty file"
    directory = folder / "dir.db"
    directory.mkdir()
    yield directory, "not a syncd mirror or backup"
    data = backup.path.read_bytes()
    truncated = folder / "truncated.db"
    truncated.write_bytes(data[:60])
    yield truncated, "truncated"
    half = folder / "half.db"
    half.write_bytes(data[: len(data) // 2])
    yield half, str(half)
    garbage = folder / "garbage.db"
    page = int.from_bytes(data[16:18], "big")
    noise = hashlib.sha256(b"noise").digest() * (len(data) // 32 + 1)
    garbage.write_bytes(data[:page] + noise[: len(data) - page])
    yield garbage, str(garbage)
    tail = folder / "tail.db"  # the schema reads, the rows do not
    cut = len(data) // 2 // page * page
    tail.write_bytes(data[:cut] + noise[: len(data) - cut])
    yield tail, "cannot be read, it is damaged: database disk image is malformed"


def test_files_that_are_not_or_no_longer_databases_are_one_line_errors(backup: Backup, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    for path, says in damaged_files(backup, tmp_path):
        assert main(["status", "--db", str(path)]) == 2, path
        assert says in one_line_error(capsys), path
        assert main(["export", str(path), str(tmp_path / "out")]) == 2, path
        assert says in one_line_error(capsys), path
        with pytest.raises(ExportError):
            export_mirror(path, tmp_path / "out")


def test_a_hand_made_backup_round_trips_read_only(tmp_path: Path) -> None:
    """The export's own helpers write backups through the read-write StateStore; reading them back
    read-only gives the same rows."""
    from tests.test_export import write_backup

    rows = [_row("organization", "o1", None, None, title="Org"), _row("space", "s1", ("organization", "o1"), 0, title="Docs")]
    write_backup(tmp_path / "b.db", rows, [])
    with StateStore(tmp_path / "b.db", readonly=True) as mirror:
        assert {r["id"]: r["data"] for r in mirror.current("emu")} == {r.id: r.data for r in rows}
