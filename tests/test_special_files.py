"""Issue 41, item 5: a file syncd reads from its configuration or its command line (a token
file, a plan, a backup, the configuration itself) that is a FIFO or a device is refused in
one line (exit 2) instead of hanging on it or reading it without end; a SIGHUP whose new
configuration names such a file leaves the daemon answering.

Every command is a process of its own with a timeout, so a hang fails the test (the issue's
bound: non-zero within 15 s)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon_support import DaemonProcess
from tests.hostile.cli_support import Ran, clean_env, run_cli
from tests.loopback import http, wait_for

BOUND = 15.0
"""The issue's acceptance: a command given a FIFO exits non-zero within this many seconds."""


def _config(tmp_path: Path, token_file: Path | str) -> Path:
    """A configuration with a tenant `src` whose token is in `token_file`, one `dst` with its
    token inline, and a job that uses `src` (so `serve` and a reload read its token)."""
    config = tmp_path / "syncd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f'[tenants.src]\nbase_url = "http://127.0.0.1:9"\ntoken_file = "{token_file}"\n'
        '[tenants.dst]\nbase_url = "http://127.0.0.1:9"\ntoken = "dst-token-0123456789"\n'
        '[daemon]\nport = 0\n'
        '[[jobs]]\nname = "nightly"\nkind = "backup"\nsource = "src"\n'
    )  # fmt: skip
    return config


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _syncd(tmp_path: Path, *args: str | Path) -> Ran:
    """`syncd ARGS` in `tmp_path`, killed (TimeoutExpired: the test fails) after `BOUND` seconds."""
    return run_cli(*args, env=clean_env(), cwd=tmp_path, timeout=BOUND)


def test_a_fifo_as_token_file_is_refused_by_config_check(tmp_path: Path) -> None:
    config = _config(tmp_path, _fifo(tmp_path / "token"))
    line = _syncd(tmp_path, "config", "check", "--config", config).one_line_error(2)
    assert "tenants.src.token_file" in line and "FIFO" in line and "not a regular file" in line, line


def test_a_device_as_token_file_is_refused_not_read_without_end(tmp_path: Path) -> None:
    config = _config(tmp_path, "/dev/zero")
    line = _syncd(tmp_path, "config", "check", "--config", config).one_line_error(2)
    assert "/dev/zero" in line and "a device" in line and "not a regular file" in line, line


def test_a_token_file_past_the_bound_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "token"
    big.write_bytes(b"t" * (1 << 20))
    line = _syncd(tmp_path, "config", "check", "--config", _config(tmp_path, big)).one_line_error(2)
    assert "tenants.src.token_file" in line and "larger than" in line, line


def test_a_fifo_as_configuration_file_is_refused(tmp_path: Path) -> None:
    line = _syncd(tmp_path, "config", "check", "--config", _fifo(tmp_path / "syncd.toml")).one_line_error(2)
    assert "syncd.toml" in line and "FIFO" in line, line


def test_a_device_as_configuration_file_is_refused(tmp_path: Path) -> None:
    line = _syncd(tmp_path, "config", "check", "--config", "/dev/zero").one_line_error(2)
    assert "/dev/zero" in line and "a device" in line, line


def test_a_fifo_as_plan_is_refused_by_mirror_apply(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("src-token-0123456789\n")
    config = _config(tmp_path, token)
    plan = _fifo(tmp_path / "plan.json")
    line = _syncd(tmp_path, "mirror", "apply", "--plan", plan, "--config", config).one_line_error(2)
    assert "plan.json" in line and "FIFO" in line, line


@pytest.mark.parametrize(
    "args",
    [["check", "{fifo}"], ["status", "--db", "{fifo}"], ["export", "{fifo}", "{out}"], ["restore", "{fifo}", "dst:o1", "--config", "{config}"]],
    ids=["check", "status", "export", "restore"],
)
def test_a_fifo_as_backup_is_refused(args: list[str], tmp_path: Path) -> None:
    """SQLite itself would wait on a FIFO (and read a device without end): the file is checked
    regular before SQLite opens it."""
    token = tmp_path / "token"
    token.write_text("src-token-0123456789\n")
    values = {"fifo": _fifo(tmp_path / "backup.db"), "out": tmp_path / "out", "config": _config(tmp_path, token)}
    line = _syncd(tmp_path, *(arg.format(**values) for arg in args)).one_line_error(2)
    assert "backup.db" in line and "FIFO" in line, line


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    token = tmp_path / "token"
    token.write_text("src-token-0123456789\n")
    process = DaemonProcess.start(_config(tmp_path, token), tmp_path / "state")
    try:
        yield process
    finally:
        process.stop(timeout=5)


def test_a_sighup_naming_a_fifo_leaves_the_daemon_answering(daemon: DaemonProcess, tmp_path: Path) -> None:
    """The new configuration is read off the event loop: a token file swapped for a FIFO
    rejects the reload (the running configuration stays), and meanwhile `/healthz` answers
    and SIGTERM stops the daemon."""
    token = tmp_path / "token"
    token.unlink()
    _fifo(token)
    daemon.signal(signal.SIGHUP)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        status, _ = http("GET", daemon.url + "/healthz", timeout=1.0)  # a frozen loop: TimeoutError
        assert status == 200
        time.sleep(0.1)
    wait_for("the reload to be rejected", lambda: "config.reload_rejected" in daemon.log(), BOUND)
    assert "FIFO" in daemon.log() and daemon.job("nightly")["name"] == "nightly", daemon.log()
    daemon.signal(signal.SIGTERM)
    daemon.process.wait(timeout=BOUND)
    assert daemon.process.returncode == 0, daemon.log()


def test_a_reload_not_read_within_its_deadline_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reading that never ends (a file on a hung network mount: no FIFO trick stops that)
    is given up after `RELOAD_DEADLINE`; the loop runs meanwhile, the configuration stays, and
    the thread left reading is a daemon thread (the interpreter does not wait for it at exit)."""
    import threading

    import anyio

    from syncd.config import load_settings
    from syncd.daemon import service

    token = tmp_path / "token"
    token.write_text("src-token-0123456789\n")
    settings = load_settings(_config(tmp_path, token), env={})
    monkeypatch.setattr(service, "RELOAD_DEADLINE", 0.5)
    hung = threading.Event()

    def never_read() -> object:
        hung.wait(BOUND)
        raise AssertionError("read after its deadline")

    async def main() -> tuple[bool, int]:
        daemon = service.Daemon(settings, reload=never_read)  # type: ignore[arg-type]
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            with anyio.fail_after(BOUND):
                adopted = await daemon.reload_off_loop()
            group.cancel_scope.cancel()
        assert daemon.settings is settings
        left = [thread for thread in threading.enumerate() if thread.name == "syncd reload"]
        assert left and all(thread.daemon for thread in left)  # a hung read never keeps the process from exiting
        return adopted, ticks

    try:
        adopted, ticks = anyio.run(main)
    finally:
        hung.set()
    assert adopted is False and ticks > 10  # rejected, and the loop ran while it waited
