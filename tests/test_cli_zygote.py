"""The suite's CLI zygote (tests/cli_zygote.py) gives each command a process of its own, as a new
interpreter would have it: what the tests that use it rely on."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from syncd.state import StateStore
from tests import cli_zygote
from tests.hostile.cli_support import clean_env


def test_a_command_gets_its_own_process_environment_directory_umask_and_exit_code(tmp_path: Path) -> None:
    env = clean_env(SYNCD_STATE_DIR=str(tmp_path / "made"))
    ran = cli_zygote.run(["status"], env=env, cwd=tmp_path, umask=0o077)
    assert ran.returncode == 2, ran.stderr  # no mirror file yet: the one-line error's status
    assert ran.stderr.decode().startswith("syncd: error: "), ran.stderr
    assert str(tmp_path / "made") in ran.stderr.decode()  # the child's environment, not the zygote's
    ran = cli_zygote.run(["nope"], env=env, cwd=tmp_path)
    assert ran.returncode == 2 and b"No such command 'nope'" in ran.stderr


def test_a_relative_path_is_read_from_the_childs_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bad.db").write_bytes(b"not a database at all" * 100)
    env = clean_env()
    beside = cli_zygote.run(["status", "--db", "bad.db"], env=env, cwd=tmp_path / "sub")
    elsewhere = cli_zygote.run(["status", "--db", "bad.db"], env=env, cwd=tmp_path)
    assert beside.returncode == elsewhere.returncode == 2, (beside.stderr, elsewhere.stderr)
    assert b"no such mirror file" in elsewhere.stderr and b"no such mirror file" not in beside.stderr, (beside.stderr, elsewhere.stderr)


def test_wide_output_follows_the_childs_columns(tmp_path: Path) -> None:
    """`syncd status` prints through a console its module made when the zygote imported it:
    the width is still the child's COLUMNS (the zygote imports without one)."""
    db = tmp_path / ("d" * 120) / "mirror.db"
    db.parent.mkdir()
    StateStore(db).close()
    widths = {}
    for columns in (60, 400):
        ran = cli_zygote.run(["status", "--db", str(db)], env=clean_env(COLUMNS=str(columns)), cwd=tmp_path)
        assert ran.returncode == 0 and b"no runs yet" in ran.stdout, ran.stderr
        widths[columns] = max(len(line) for line in ran.stdout.decode().splitlines())
    assert widths[60] <= 60 < len(str(db)) < widths[400], widths
    assert "COLUMNS" not in cli_zygote._ZYGOTE_ENVIRONMENT


def test_signals_reach_the_child_and_end_it_as_they_would_a_new_interpreter(tmp_path: Path) -> None:
    process = cli_zygote.launch(["emulator", "serve", "--port", "0", "--json"])
    assert process.stdout is not None
    with process.stdout:
        assert '"url"' in process.stdout.readline()  # serving
        assert process.pid != os.getpid() and process.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=0.2)
        process.send_signal(signal.SIGINT)  # Ctrl-C: KeyboardInterrupt, which the command handles
        assert process.wait(timeout=30) in (0, 130)
    process = cli_zygote.started(["emulator", "serve", "--port", "0"], env=clean_env(), cwd=tmp_path)
    process.kill()
    assert process.wait(timeout=30) == -signal.SIGKILL


def test_the_command_for_a_shell_is_the_command_ended_with_it(tmp_path: Path) -> None:
    """`write_command`'s `syncd` (what the documentation's pages run): a shell's arguments,
    directory and exit status; a signal to it reaches the command; killed first, it takes the
    command with it (the zygote's child must not outlive what a page stops)."""
    syncd = cli_zygote.write_command(tmp_path / "bin")
    ran = subprocess.run([str(syncd), "status", "--db", "missing.db"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and "no such mirror file" in ran.stderr and "missing.db" in ran.stderr, ran.stderr
    for ending, status in ((signal.SIGTERM, (0, -signal.SIGTERM)), (signal.SIGKILL, (-signal.SIGKILL,))):
        shell = subprocess.Popen([str(syncd), "emulator", "serve", "--port", "0", "--json"], stdout=subprocess.PIPE, text=True, env=clean_env())
        assert shell.stdout is not None
        with shell.stdout:
            url = json.loads(shell.stdout.readline())["url"]
            port = int(url.split(":")[2].split("/")[0])
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass  # the command serves
            shell.send_signal(ending)
            assert shell.wait(timeout=30) in status
        deadline = time.monotonic() + 30
        while _listens(port):  # the command ended with it
            if time.monotonic() > deadline:
                _stop_listener(port)  # this test's emulator: not left behind when the test fails
                pytest.fail(f"the command still serves on {port} after {ending.name} to its shell")
            time.sleep(0.1)


def _stop_listener(port: int) -> None:
    """SIGKILL the process listening on 127.0.0.1:`port` (found through /proc: its pid is the zygote's to know)."""
    wanted = f":{port:04X}"
    inodes = {f"socket:[{fields[9]}]" for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
              if (fields := line.split())[1].endswith(wanted) and fields[3] == "0A"}  # fmt: skip
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            if os.readlink(fd) in inodes:
                os.kill(int(fd.parts[2]), signal.SIGKILL)
        except OSError:
            continue


def _listens(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
