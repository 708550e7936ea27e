"""Item 7 of issue 11: every failure is one line and a documented exit code.

Before the fix these were tracebacks: JSON nested 200,000 deep (RecursionError), a full disk,
a damaged page in the mirror (`sqlite3.DatabaseError`, while `status` and `export` succeeded
silently on some damaged files), a token holding a line break, a backup onto a read-only
file system. Exit codes (docs/reference/errors.md): 1 for a failure that may pass when
run again (a full disk, an answer that cannot be read), 2 for one that needs a change first
(a damaged state file, a read-only or unwritable place, bad configuration).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.hostile.cli_support import (
    EmulatorProcess,
    Ran,
    Server,
    clean_env,
    module_emulator,
    remount_read_only,
    run_cli,
    tenant_env,
    tmpfs,
)

GENERATE = "orgs=1,empty_orgs=1,collections=2,spaces=3,pages=2,files=2"


emulator = module_emulator(GENERATE)


@pytest.fixture(scope="module")
def files(emulator: EmulatorProcess, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with `mirror.db` (two sync runs) and `backup.db` (with its `.blobs`)."""
    folder = tmp_path_factory.mktemp("item07")
    env = tenant_env(emulator.url, folder / "state")
    for args in (("sync", "src", "--db", "mirror.db"), ("sync", "src", "--db", "mirror.db"),
                 ("backup", "src", "--out", "backup.db", "--with-files")):  # fmt: skip
        ran = run_cli(*args, env=env, cwd=folder)
        assert ran.code == 0, ran.show()
    return folder


def _syncd(emulator: EmulatorProcess, cwd: Path, *args: str | Path) -> Ran:
    return run_cli(*args, env=tenant_env(emulator.url, cwd / "state"), cwd=cwd)


def test_item07_json_nested_200k_deep_from_the_server_is_one_line(tmp_path: Path) -> None:
    with Server() as server:
        server.answer(r"/.*", 200, b"[" * 200_000 + b"]" * 200_000)
        env = tenant_env(server.url, tmp_path / "state")
        env.update(SYNCD_RETRY__MAX_ATTEMPTS="2", SYNCD_RETRY__INITIAL_WAIT="0.1s", SYNCD_RETRY__MAX_WAIT="0.2s")  # no backoff to sit through
        ran = run_cli("sync", "src", env=env, cwd=tmp_path)
    assert "nested too deeply" in ran.one_line_error(1)


def test_item07_json_nested_too_deep_inside_a_state_file_is_one_line(files: Path, emulator: EmulatorProcess, tmp_path: Path) -> None:
    """A hand-made (or damaged) backup whose rows hold JSON no parser can take."""
    made = tmp_path / "made.db"
    shutil.copyfile(files / "backup.db", made)
    with sqlite3.connect(made) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")  # json_valid() refuses it: hand-made
        conn.execute("UPDATE resources SET data = ? WHERE kind = 'space'", ["[" * 200_000 + "]" * 200_000])
    conn.close()
    line = _syncd(emulator, tmp_path, "export", made, tmp_path / "out").one_line_error(2)
    assert str(made) in line and "nested too deeply" in line
    source, target = emulator.org_ids
    line = _syncd(emulator, tmp_path, "restore", made, f"src:{target}", "--org", source, "--dry-run").one_line_error(2)
    assert "nested too deeply" in line


def _damage(source: Path, copy: Path, table: str) -> None:
    """`copy` of `source` with one leaf page of `table` overwritten with garbage."""
    with sqlite3.connect(source) as conn:
        pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", [table])]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    assert pages, table
    shutil.copyfile(source, copy)
    with copy.open("r+b") as handle:
        handle.seek((pages[len(pages) // 2] - 1) * size)
        handle.write(b"\xde\xad\xbe\xef" * (size // 4))


@pytest.mark.parametrize("table", ["changes", "resources"])
def test_item07_a_damaged_page_is_one_line_in_every_command(files: Path, emulator: EmulatorProcess, tmp_path: Path, table: str) -> None:
    """`changes` is a table `status`, `export` and `sync` do not read: they used to succeed
    on such a file as if nothing were wrong; `resources` made `sync` a traceback."""
    damaged = tmp_path / "damaged.db"
    _damage(files / "mirror.db", damaged, table)
    target = emulator.org_ids[1]
    for args in (
        ("status", "--db", damaged),
        ("export", damaged, tmp_path / "out"),
        ("diff", "--db", damaged),
        ("sync", "src", "--db", damaged),
        ("restore", damaged, f"src:{target}", "--dry-run", "--db", tmp_path / "work.db"),
    ):
        line = _syncd(emulator, tmp_path, *args).one_line_error(2)
        assert f"{damaged} cannot be read, it is damaged" in line, (args, line)
    assert not (tmp_path / "out").exists()


def test_item07_a_full_disk_is_one_line(files: Path, emulator: EmulatorProcess, tmp_path: Path) -> None:
    with tmpfs("192k") as disk:
        line = _syncd(emulator, tmp_path, "sync", "src", "--db", disk / "state" / "mirror.db").one_line_error(1)
        assert str(disk) in line and "free space" in line
        for leftover in disk.rglob("*"):
            if leftover.is_file():
                leftover.unlink()
        line = _syncd(emulator, tmp_path, "backup", "src", "--out", disk / "backup.db", "--with-files").one_line_error(1)
        assert str(disk) in line and "free space" in line
    with tmpfs("64k") as disk:
        line = _syncd(emulator, tmp_path, "export", files / "backup.db", disk / "export").one_line_error(1)
        assert "free space" in line  # the path when export.py names it (the OSError of a write does not)


def test_item07_a_read_only_file_system_is_one_line(files: Path, emulator: EmulatorProcess, tmp_path: Path) -> None:
    """Reading a backup on read-only media works (status, export, diff); writing there is one
    line (exit 2: choose a writable place)."""
    with tmpfs("8m") as media:
        shutil.copyfile(files / "backup.db", media / "backup.db")
        shutil.copytree(files / "backup.blobs", media / "backup.blobs")
        shutil.copyfile(files / "mirror.db", media / "mirror.db")
        remount_read_only(media)

        status = _syncd(emulator, tmp_path, "status", "--db", media / "backup.db")
        status.assert_clean()
        assert status.code == 0 and "not a syncd mirror" not in status.stdout + status.stderr, status.show()
        export = _syncd(emulator, tmp_path, "export", media / "backup.db", tmp_path / "out")
        export.assert_clean()
        assert export.code == 0 and "not a syncd mirror" not in export.stdout + export.stderr, export.show()
        diff = _syncd(emulator, tmp_path, "diff", "--db", media / "mirror.db")
        assert diff.code == 0, diff.show()

        for args in (
            ("sync", "src", "--db", media / "mirror.db"),
            ("backup", "src", "--out", media / "new.db"),
            ("backup", "src", "--out", media / "folder" / "new.db"),
            ("export", media / "backup.db", media / "export"),
        ):
            line = _syncd(emulator, tmp_path, *args).one_line_error(2)
            assert str(media) in line and "read-only file system" in line.lower(), (args, line)


def test_item07_a_token_with_a_control_character_is_refused_at_configuration_time(tmp_path: Path) -> None:
    secret = "tok-5ecret"
    token_file = tmp_path / "token"
    token_file.write_text(f"{secret}\x1b[2J\n")
    cases = [
        (clean_env(SYNCD_TENANTS__SRC__BASE_URL="http://127.0.0.1:9", SYNCD_TENANTS__SRC__TOKEN=f"{secret}\nInjected: x"),
         "SYNCD_TENANTS__SRC__TOKEN"),
        (clean_env(SYNCD_TENANTS__SRC__BASE_URL="http://127.0.0.1:9", SYNCD_TENANTS__SRC__TOKEN_FILE=str(token_file)),
         "tenants.src.token_file"),
    ]  # fmt: skip
    for env, named in cases:
        env["SYNCD_STATE_DIR"] = str(tmp_path / "state")
        for args in (("config", "check"), ("sync", "src")):
            ran = run_cli(*args, env=env, cwd=tmp_path)
            line = ran.one_line_error(2)
            assert named in line and "control characters" in line, line
            assert secret not in ran.stdout + ran.stderr and "Injected" not in ran.stdout + ran.stderr
