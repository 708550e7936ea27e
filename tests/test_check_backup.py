"""`syncd check BACKUP.db`: a real backup (with its file binaries, fetched from the emulator
over loopback) passes; a flipped byte in a blob, a missing blob, a damaged SQLite page, a
file without its blob each fail with their line; a file that is no backup is exit 2 in one
line; the backup is never changed."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from syncd.cli import main
from syncd.config import load_settings, parse_target_ref
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import serve_emulator
from syncd.emulator.store import Store
from syncd.read.backup import backup, blobs_dir
from syncd.state import StateStore
from tests.console_script import run_installed
from tests.hostile.cli_support import clean_env
from tests.schema_support import check_output

TOKEN = "check-token"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One backup with its blob folder (two organizations, files shared between them)."""
    folder = tmp_path_factory.mktemp("check")
    out = folder / "made.db"

    async def make() -> None:
        store = Store(seed=3)
        generate(store, parse_spec("orgs=2,collections=1,spaces=2,pages=1,files=2"), seed=3, all_token=TOKEN)
        async with serve_emulator(store) as running:
            config = folder / "syncd.toml"
            config.write_text(f'state_dir = "{folder / "state"}"\n[tenants.src]\nbase_url = "{running.url}"\ntoken = "{TOKEN}"\n')
            settings = load_settings(config, {})
            result = await backup(settings, parse_target_ref("src", settings), out, with_files=True)
            assert result.files is not None and result.files.ok and result.files.downloaded > 0

    anyio.run(make)
    return out


@pytest.fixture
def copy(made: Path, tmp_path: Path) -> Path:
    """A copy of the backup (and its blobs) this test may damage."""
    path = tmp_path / "nightly.db"
    shutil.copyfile(made, path)
    shutil.copytree(blobs_dir(made), blobs_dir(path))
    return path


def check(path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, list[str], str]:
    code = main(["check", str(path), *options])
    captured = capsys.readouterr()
    lines = (captured.err if "--json" in options else captured.out).splitlines()
    return code, lines, captured.out


def blobs(path: Path) -> list[Path]:
    return sorted(p for p in blobs_dir(path).rglob("*") if p.is_file() and p.name != "manifest.json")


def manifest(path: Path) -> dict[str, dict]:
    return json.loads((blobs_dir(path) / "manifest.json").read_text())


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_good_backup_is_healthy_and_left_as_it_was(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(copy.parent)
    code, lines, _ = check(copy, capsys)
    assert code == 0, lines
    assert len(lines) == 1 and lines[0].startswith(f"{copy}: healthy (SQLite integrity ok; 1 run of src, ")
    assert f"; {len(manifest(copy))} file rows; {len(blobs(copy))} blobs hashed (" in lines[0]
    code, lines, out = check(copy, capsys, "--json")
    assert code == 0 and lines[-1].startswith(f"{copy}: healthy")  # the human line on stderr
    document = check_output("check", out)
    assert document["healthy"] and document["problems"] == [] and document["integrity"] == "ok"
    assert document["file_rows"] == len(manifest(copy)) > len(blobs(copy)) > 0  # shared bytes stored once
    assert document["blobs"] == {"folder": str(blobs_dir(copy)), "checked": len(blobs(copy)), "bytes": sum(p.stat().st_size for p in blobs(copy))}
    assert document["tenants"] == ["src"] and document["objects"] > document["file_rows"]
    assert snapshot(copy.parent) == before  # nothing written into it or beside it


def test_a_flipped_byte_in_a_blob(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blob = blobs(copy)[0]
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x01
    blob.write_bytes(bytes(data))
    users = sorted(row for row, entry in manifest(copy).items() if entry["sha256"] == blob.parent.name + blob.name)
    code, lines, _ = check(copy, capsys)
    assert code == 1
    assert lines[0].startswith(f"blob-hash: nightly.blobs/{blob.parent.name}/{blob.name}: its bytes hash to ")
    assert lines[0].endswith(f", not to its name: they changed after they were stored (the binary of {', '.join(users)})")
    assert lines[1:] == [lines[-1]] and lines[-1].startswith(f"{copy}: 1 problem (SQLite integrity ok;")


def test_a_missing_blob(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blob = blobs(copy)[-1]
    blob.unlink()
    sha256 = blob.parent.name + blob.name
    users = sorted(row for row, entry in manifest(copy).items() if entry["sha256"] == sha256)
    names = {row: entry["name"] for row, entry in manifest(copy).items()}
    code, lines, out = check(copy, capsys, "--json")
    assert code == 1
    expected = [f"blob-missing: file {row} ({names[row]!r}): its blob nightly.blobs/{blob.parent.name}/{blob.name} is missing" for row in users]
    assert lines[:-1] == expected
    document = check_output("check", out)
    assert not document["healthy"] and [p["kind"] for p in document["problems"]] == ["blob-missing"] * len(users)


def test_a_file_without_its_blob_in_the_manifest(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entries = manifest(copy)
    row = sorted(entries)[0]
    name = entries.pop(row)["name"]
    (blobs_dir(copy) / "manifest.json").write_text(json.dumps(entries))
    code, lines, _ = check(copy, capsys)
    assert code == 1
    assert lines[:-1] == [f"file-not-stored: file {row} ({name!r}): no blob in the manifest: the backup does not hold its binary"]


def _damage(path: Path, table: str) -> None:
    """One leaf page of `table` overwritten with garbage (as tests/hostile/test_07 does)."""
    with closing(sqlite3.connect(path)) as conn:
        pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", [table])]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    assert pages, table
    with path.open("r+b") as handle:
        handle.seek((pages[len(pages) // 2] - 1) * size)
        handle.write(b"\xde\xad\xbe\xef" * (size // 4))


@pytest.mark.parametrize("table", ["resources", "changes"])
def test_a_damaged_sqlite_page(copy: Path, capsys: pytest.CaptureFixture[str], table: str) -> None:
    _damage(copy, table)
    code, lines, out = check(copy, capsys, "--json")
    assert code == 1
    document = check_output("check", out)
    assert document["integrity"] == "damaged" and not document["healthy"]
    sqlite_lines = [line for line in lines if line.startswith(f"sqlite: {copy}: ")]
    assert sqlite_lines, lines
    assert lines[-1].startswith(f"{copy}: {len(document['problems'])} problem")
    if table == "resources":  # SQLite's whole-file check stops at it: the table is named
        assert sqlite_lines == [f"sqlite: {copy}: table resources: database disk image is malformed"]
        assert document["file_rows"] is None
    else:  # the blobs are still checked, and found whole
        assert all(problem["kind"] == "sqlite" for problem in document["problems"])
        assert document["blobs"]["checked"] == len(blobs(copy)) and document["file_rows"] == len(manifest(copy))


def test_a_backup_without_blobs_is_healthy_with_a_note(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.rmtree(blobs_dir(copy))
    code, lines, _ = check(copy, capsys)
    assert code == 0
    assert lines[0] == "note: no blob folder (nightly.blobs): file binaries not checked (a backup made without --with-files)"


def test_what_is_no_backup_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "notes.db"
    text.write_text("hello")
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
    unfinished = tmp_path / "unfinished.db"
    with StateStore(unfinished) as mirror:
        mirror.start_run("sync", "src", "src")  # closed unfinished: failed, never complete
    for path, expected in [
        (tmp_path / "absent.db", f"no state file at {tmp_path / 'absent.db'}"),
        (tmp_path, f"{tmp_path} is not a syncd mirror or backup (a directory)"),
        (text, f"{text} is not a syncd mirror or backup (not an SQLite database)"),
        (other, f"{other} is not a syncd mirror or backup (it has no syncd tables)"),
        (unfinished, f"{unfinished} holds no finished run: it is no backup"),
    ]:
        assert main(["check", str(path), "--json"]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"syncd: error: {expected}"), lines


def test_the_installed_script_prints_one_json_document(copy: Path) -> None:
    blob = blobs(copy)[0]
    blob.write_bytes(b"not what was stored")
    ran = run_installed("check", copy, "--json", env=clean_env(), cwd=copy.parent)
    assert ran.code == 1, ran.show()
    document = check_output("check", ran.stdout)
    assert [problem["kind"] for problem in document["problems"]] == ["blob-hash"]
    assert "blob-hash: nightly.blobs/" in ran.stderr
