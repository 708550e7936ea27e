"""A daemon run says where it is (`progress` in `GET /runs/{id}`), and `syncd trigger --wait`
shows it on stderr while it waits: one daemon, then a fleet replica alone on a PostgreSQL
schema (`state_url` in its configuration file), whose runs' progress lives in its memory beside
the fleet's history."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.daemon_support import DaemonProcess, daemon_config
from tests.pg_support import fresh_schema
from tests.state_support import BACKENDS
from tests.hostile.cli_support import clean_env
from tests.loopback import wait_for
from tests.terminal import on_a_terminal
from tests.thread_emulator import TOKEN, ThreadEmulator, thread_emulator

CONTROL_TOKEN = "trigger-progress-control"


@pytest.fixture(scope="module")
def emulator() -> Iterator[ThreadEmulator]:
    with thread_emulator("orgs=1,collections=2,spaces=4,pages=3,files=0,sites=0") as running:
        running.admin("PUT", "/faults", {"latency": 60})  # a run lasts a second or two
        yield running


@pytest.fixture(scope="module", params=BACKENDS)
def state_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None (the state in the state directory), or a PostgreSQL schema for this module's daemon."""
    if request.param == "sqlite":
        yield None
        return
    with fresh_schema(str(request.getfixturevalue("pg_server"))) as url:
        yield url


@pytest.fixture(scope="module")
def daemon(emulator: ThreadEmulator, state_url: str | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    tmp_path = tmp_path_factory.mktemp("daemon")
    config = daemon_config(
        tmp_path, emulator.url, TOKEN,
        retry={"max_attempts": 2, "initial_wait": "0.1s", "max_wait": "1s"},
        daemon={"port": 0, "token": CONTROL_TOKEN, "shutdown_deadline": "10s"},
        jobs=[{"name": "sync", "kind": "sync", "source": "src", "schedule": {"cron": "0 3 1 1 *"}}],
    )  # fmt: skip
    if state_url is not None:
        config.write_text(f'state_url = "{state_url}"\n' + config.read_text())
    running = DaemonProcess.start(config, tmp_path / "state", token=CONTROL_TOKEN)
    try:
        yield running
    finally:
        assert running.stop() == 0, running.log()[-2000:]
    made = [name for name in ("syncd.db", "daemon.db") if (tmp_path / "state" / name).exists()]
    assert state_url is None or not made, made  # its mirror and history are in PostgreSQL


def test_a_running_run_reports_its_progress(daemon: DaemonProcess) -> None:
    status, answer = daemon.post("/jobs/sync/run")
    assert status == 202, answer
    run_id = answer["run"]["id"]

    def reading() -> dict | None:
        status, run = daemon.get(f"/runs/{run_id}")
        assert status == 200, run
        progress = run["progress"]
        return run if run["outcome"] == "running" and progress.get("step") == "reading" and progress["done"] > 0 else None

    run = wait_for("the run to report its reading", reading, timeout=60, interval=0.05)
    progress = run["progress"]
    assert progress["total"] is None and re.fullmatch(r"\d+ objects, \d+ requests, .*req/s.*", progress["detail"]), progress
    ended = daemon.wait_run(run_id)
    assert ended["outcome"] == "succeeded" and ended["progress"]["done"] == ended["summary"]["objects_read"]


def test_trigger_wait_shows_the_run_progress_on_stderr(daemon: DaemonProcess) -> None:
    env = clean_env()
    env.pop("NO_COLOR")
    code, err, out = on_a_terminal(["trigger", "sync", "--wait", "--config", str(daemon.config)], env)
    assert code == 0, (err, out)
    assert re.search(r"run #\d+ of sync: reading .*\d+ objects, \d+ requests", err), err
    assert "\x1b" not in out and re.search(r"run #\d+ of sync: succeeded in", out), out
