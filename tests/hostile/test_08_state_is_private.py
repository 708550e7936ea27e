"""Item 8 of issue 11: what syncd writes is private, whatever the umask.

The mirror, backups, exports and the daemon's files hold what the token sees: members'
e-mail addresses, SAML certificates, settings, pages. Before the fix, under the usual umask
022, they were 0644 in 0755 folders: readable by every account on the machine. Now every
file syncd creates is 0600 and every folder 0700 (the state file's -wal, -shm and .lock
too); files and folders that were there before keep their mode.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path


from syncd.daemon.runs import RunLog
from syncd.state import StateStore
from tests import cli_zygote
from tests.hostile.cli_support import EmulatorProcess, module_emulator, run_cli, tenant_env

GENERATE = "orgs=1,empty_orgs=1,collections=2,spaces=3,pages=2,files=2"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def not_private(*roots: Path) -> list[str]:
    """Everything at and below `roots` that is not 0700 (folder) or 0600 (file)."""
    wrong = []
    for root in roots:
        for path in [root, *root.rglob("*")]:
            want = 0o700 if path.is_dir() else 0o600
            if mode(path) != want:
                wrong.append(f"{path} is {mode(path):04o}, not {want:04o}")
    return wrong


emulator = module_emulator(GENERATE)


def test_item08_sync_backup_export_and_restore_write_private_files(emulator: EmulatorProcess, tmp_path: Path) -> None:
    source, empty = emulator.org_ids
    state = tmp_path / "state"
    env = tenant_env(emulator.url, state)

    def syncd(*args: str | Path) -> None:
        ran = run_cli(*args, env=env, cwd=tmp_path, umask=0o022)
        assert ran.code == 0, ran.show()

    syncd("sync", "src")
    assert (state / "syncd.db").is_file()
    syncd("backup", f"src:{source}", "--out", tmp_path / "backups" / "b.db", "--with-files")
    blobs = tmp_path / "backups" / "b.blobs"
    assert any(path.is_file() for path in blobs.rglob("*")), "the backup holds file binaries"
    syncd("export", tmp_path / "backups" / "b.db", tmp_path / "export")
    assert any((tmp_path / "export").rglob("*.md"))
    syncd("restore", tmp_path / "backups" / "b.db", f"src:{empty}")
    assert not_private(state, tmp_path / "backups", tmp_path / "export") == []

    # What was there before keeps the mode its owner chose: a shared folder, a file made for syncd.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    db = shared / "mirror.db"
    db.touch()
    db.chmod(0o640)
    syncd("sync", "src", "--db", db)
    assert mode(shared) == 0o755 and mode(db) == 0o640


def test_item08_the_daemon_state_is_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = tenant_env("http://127.0.0.1:9", state)
    env["SYNCD_DAEMON__PORT"] = "0"
    with (tmp_path / "daemon.log").open("wb") as log:  # umask 022: the point of the test
        daemon = cli_zygote.spawn(["serve"], cwd=tmp_path, env=env, stdout=log.fileno(), stderr=log.fileno(), umask=0o022)
    try:
        info = state / "daemon.json"
        deadline = time.monotonic() + 30
        while not (info.exists() and info.read_text().endswith("\n")):
            assert daemon.poll() is None and time.monotonic() < deadline, (tmp_path / "daemon.log").read_text()
            time.sleep(0.1)
        assert json.loads(info.read_text())["pid"] == daemon.pid
        made = {path.name for path in state.iterdir()}
        assert {"daemon.db", "daemon.json", "daemon.lock"} <= made, made
        assert not_private(state) == []
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)


def test_item08_the_state_file_its_companions_and_folder_are_private_in_the_library(tmp_path: Path) -> None:
    """`StateStore` and `RunLog` used as a library (no CLI, so no umask 077 around them)."""
    previous = os.umask(0o022)
    try:
        folder = tmp_path / "new" / "state"
        with StateStore(folder / "syncd.db") as mirror:
            mirror.start_run("sync", "t", "t")
            companions = {path.name for path in folder.iterdir()}
            assert {"syncd.db", "syncd.db-wal", "syncd.db-shm", "syncd.db.lock"} <= companions, companions
            assert not_private(tmp_path / "new") == []
        runs = RunLog(folder / "daemon.db")
        try:
            assert {"daemon.db-wal", "daemon.db-shm"} <= {path.name for path in folder.iterdir()}
            assert not_private(tmp_path / "new") == []
        finally:
            runs.close()
    finally:
        os.umask(previous)
