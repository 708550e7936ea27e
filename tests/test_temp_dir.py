"""Where syncd's temporary files go: under the state directory (`STATE_DIR/tmp`), or the
configured `temp_dir`, never the system's temporary directory, so that a read-only root file
system with a writable state (Kubernetes' `readOnlyRootFilesystem`) syncs again and again; and a
temporary directory that cannot be written is named as such (issue 41, item 8)."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from syncd import temp_dir
from syncd.config import load_settings
from syncd.daemon.service import Daemon
from syncd.state.sqlite_file import database_failure
from tests.console_script import SCRIPT
from tests.daemon_support import DaemonProcess, daemon_config
from tests.hostile.cli_support import clean_env
from tests.read_only_root import on_read_only_root, start_on_read_only_root, syncd_on_read_only_root
from tests.thread_emulator import TOKEN, ThreadEmulator, module_thread_emulator

emulator = module_thread_emulator("orgs=1,collections=2,spaces=4,pages=20,files=1,sites=0")


def _environment(emulator: ThreadEmulator, state: Path, unwritable: Path, **extra: str) -> dict[str, str]:
    """A `syncd` of one tenant whose state is `state` and whose system temporary directory
    (`TMPDIR`, `SQLITE_TMPDIR`) is `unwritable`, as on a read-only root."""
    state.mkdir(exist_ok=True)
    unwritable.mkdir(exist_ok=True)
    return clean_env(SYNCD_TENANTS__SRC__BASE_URL=emulator.url, SYNCD_TENANTS__SRC__TOKEN=TOKEN,
                     SYNCD_STATE_DIR=str(state), TMPDIR=str(unwritable), SQLITE_TMPDIR=str(unwritable), **extra)  # fmt: skip


def test_a_read_only_root_syncs_a_second_and_a_third_time(emulator: ThreadEmulator, tmp_path: Path) -> None:
    """Before: the first sync succeeded and every later one failed at once with `syncd.db: disk
    I/O error: check the disk`: the second run's merge needs a temporary file, and SQLite found
    no writable temporary directory."""
    state, unwritable = tmp_path / "state", tmp_path / "tmp"
    env = _environment(emulator, state, unwritable)
    probe = on_read_only_root(["sh", "-c", 'for d in "$TMPDIR" /tmp /var/tmp .; do : > "$d/probe" && echo "$d"; done; true'],
                              env=env, cwd=tmp_path, writable=[state])  # fmt: skip
    assert probe.stdout == "" and "Read-only file system" in probe.stderr, probe.show()
    for number in (1, 2, 3):
        ran = syncd_on_read_only_root("sync", "src", env=env, cwd=tmp_path, writable=[state])
        assert ran.code == 0, ran.show()
        assert f"run {number} complete" in ran.stdout, ran.show()
    place = state / "tmp"
    assert place.is_dir() and stat.S_IMODE(place.stat().st_mode) == 0o700, "made on demand, private"
    assert not list(place.iterdir()), "SQLite's temporary files are unlinked once open: nothing is left"


def test_a_temp_dir_that_cannot_be_written_is_named(emulator: ThreadEmulator, tmp_path: Path) -> None:
    """The configured `temp_dir` on the read-only root: one line naming it and what to do, exit 2
    (not "check the disk" about the state file)."""
    state, unwritable = tmp_path / "state", tmp_path / "tmp"
    env = _environment(emulator, state, unwritable, SYNCD_TEMP_DIR=str(unwritable))
    ran = syncd_on_read_only_root("sync", "src", env=env, cwd=tmp_path, writable=[state])
    assert ran.code == 2, ran.show()
    line = ran.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, ran.show()
    assert f"the temporary directory {unwritable} is not writable" in line and "set temp_dir" in line, ran.show()
    assert "check the disk" not in line


def test_a_daemon_on_a_read_only_root_syncs_again_and_again(emulator: ThreadEmulator, tmp_path: Path) -> None:
    """The issue's own case: `syncd serve` with only its state writable; before, its first sync
    succeeded and the second failed in 0.03 s with "disk I/O error: check the disk"."""
    state, unwritable = tmp_path / "state", tmp_path / "tmp"
    env = _environment(emulator, state, unwritable)
    config = daemon_config(tmp_path, emulator.url, TOKEN, retry={"max_attempts": 1}, daemon={},
                           jobs=[{"name": "sync", "kind": "sync", "source": "src"}])  # fmt: skip
    log = tmp_path / "daemon.log"
    with log.open("wb") as handle:
        process = start_on_read_only_root([SCRIPT, "serve", "--config", config], env=env, cwd=tmp_path, writable=[state], output=handle.fileno())
    daemon = DaemonProcess(config, state, process, log)  # type: ignore[arg-type]  (a Popen: the part DaemonProcess uses)
    try:
        daemon.wait_ready()
        for _ in range(3):
            run = daemon.wait_run(daemon.post("/jobs/sync/run")[1]["run"]["id"], timeout=120)
            assert run["outcome"] == "succeeded", (run, daemon.log()[-2000:])
    finally:
        assert daemon.stop() == 0, daemon.log()[-2000:]


@pytest.mark.parametrize("errorname", ["SQLITE_IOERR_GETTEMPPATH", "SQLITE_CANTOPEN_NOTEMPDIR"])
def test_no_temporary_directory_is_named_not_the_disk(errorname: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's own word that it found no temporary directory it may write (a `temp_dir` gone
    or made read-only while a process runs; a command that reads no configuration, such as
    `export`, on a read-only root): the message is about that place, not the disk."""
    failure = sqlite3.OperationalError("disk I/O error")
    failure.sqlite_errorname = errorname  # type: ignore[attr-defined]
    monkeypatch.setattr(temp_dir, "_chosen", tmp_path / "tmp")  # as loading the settings chooses it
    error = database_failure(tmp_path / "syncd.db", failure)
    assert error is not None and error.exit_code == 2 and "check the disk" not in str(error)
    assert f"no writable temporary directory: the temporary directory {tmp_path / 'tmp'} is not writable" in str(error)
    assert "set temp_dir" in str(error)
    monkeypatch.setattr(temp_dir, "_chosen", None)  # no configuration read
    error = database_failure(tmp_path / "syncd.db", failure)
    assert error is not None and error.exit_code == 2
    assert "no writable temporary directory (SQLITE_TMPDIR, TMPDIR, /var/tmp" in str(error) and "set SQLITE_TMPDIR" in str(error)


def test_a_daemon_reload_does_not_move_the_temporary_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's temporary directory is the process's, moved by a restart only: a running
    daemon's reload reads the new file (in a thread of its own) without recording its place,
    where a command's loading records it."""
    monkeypatch.setattr(temp_dir, "_chosen", None)
    config = tmp_path / "syncd.toml"
    place = lambda name: f'state_dir = "{tmp_path / "state"}"\ntemp_dir = "{tmp_path / name}"\n'  # noqa: E731
    config.write_text(place("first"))
    settings = load_settings(config, env={})
    assert temp_dir.chosen() == (tmp_path / "first").absolute()
    config.write_text(place("second"))
    reloaded = Daemon(settings)._reload_settings()
    assert reloaded.temp_path == tmp_path / "second" and temp_dir.chosen() == (tmp_path / "first").absolute()
    load_settings(config, env={})  # a command's loading records it
    assert temp_dir.chosen() == (tmp_path / "second").absolute()
