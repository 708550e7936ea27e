"""`syncd serve` as a real process against the emulator (also a process): schedules, the
control API, metrics, triggered backups, SIGHUP reloads, SIGTERM, and the state lock.

The tests that run jobs run twice (`backend`): one daemon with its state in the state directory,
then with `SYNCD_STATE_URL` set, a fleet replica (`FleetDaemon`) alone on its PostgreSQL; the
others check the configuration and the control API's start, the same for both."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncd.emulator.process import EmulatorProcess
from syncd.state import StateStore
from tests import cli_zygote
from tests.daemon_support import (
    DaemonProcess,
    daemon_config,
    http,
    metric_value,
    wait_for,
)
from tests.state_support import use_backend

ALL_TOKEN = "daemon-test-token"
CONTROL_TOKEN = "control-secret-1234"
SPEC = "orgs=1,empty_orgs=1,collections=2,spaces=3,pages=4"


@pytest.fixture
def emulator() -> Iterator[EmulatorProcess]:
    """An emulator of the test's own: the mirror job copies into its empty organization."""
    with cli_zygote.emulator_process(token=ALL_TOKEN, spec=SPEC, rate=0) as running:
        yield running


def _orgs(emulator: EmulatorProcess) -> tuple[str, str]:
    source, empty = (org["id"] for org in emulator.report["organizations"])
    return source, empty


def _config(tmp: Path, emulator: EmulatorProcess) -> Path:
    source, empty = _orgs(emulator)
    return daemon_config(
        tmp,
        emulator.url,
        ALL_TOKEN,
        retry={"max_attempts": 4, "initial_wait": "0.1s", "max_wait": "1s"},
        daemon={"port": 0, "token": CONTROL_TOKEN, "shutdown_deadline": "10s", "failure_backoff": "1s"},
        jobs=[
            {"name": "sync", "kind": "sync", "source": "src", "schedule": {"every": "2s"}},
            {"name": "backup", "kind": "backup", "source": f"src:{source}", "retention": 2, "schedule": {"cron": "0 3 1 1 *"}},
            {"name": "mirror", "kind": "mirror", "source": f"src:{source}", "target": f"dst:{empty}", "schedule": {"every": "3s"}},
        ],
    )


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`syncd ARGS` as a process of its own (forked from the suite's CLI zygote)."""
    return cli_zygote.run(args, cwd=cwd, timeout=120, env={**os.environ, **(env or {})}, text=True)


def test_daemon_runs_jobs_serves_control_api_reloads_and_stops(
    tmp_path: Path, emulator: EmulatorProcess, backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_backend(backend, request, monkeypatch, tmp_path / "state")  # (the daemon and the CLI inherit the environment)
    config = _config(tmp_path, emulator)
    daemon = DaemonProcess.start(config, tmp_path / "state", token=CONTROL_TOKEN)
    try:
        # -- health, readiness and authentication
        assert http("GET", daemon.url + "/healthz") == (200, {"status": "ok"})
        assert http("GET", daemon.url + "/jobs")[0] == 401
        assert http("GET", daemon.url + "/jobs", token="wrong")[0] == 401
        assert daemon.get("/readyz")[0] == 200

        # -- the scheduled jobs run on their own: sync every 2 s, mirror every 3 s
        wait_for("two scheduled sync runs", lambda: len([r for r in daemon.finished_runs("sync") if r["outcome"] == "succeeded"]) >= 2, 60)
        mirror_run = wait_for("a mirror run", lambda: next(iter(daemon.finished_runs("mirror")), None), 60)
        assert mirror_run["outcome"] == "succeeded", mirror_run
        assert mirror_run["summary"]["verify"]["missing"] == 0 and mirror_run["summary"]["verify"]["identical"] > 0
        assert {r["cause"] for r in daemon.finished_runs("sync")} == {"schedule"}
        assert daemon.job("backup")["runs"] == []  # cron far away: no run unless triggered

        # -- /metrics shows the jobs and the API calls they made
        text = daemon.metrics()
        assert (metric_value(text, "syncd_job_runs_total", job="sync", outcome="succeeded") or 0) >= 2
        assert (metric_value(text, "syncd_job_runs_total", job="mirror", outcome="succeeded") or 0) >= 1
        assert (metric_value(text, "syncd_job_last_success_timestamp_seconds", job="sync") or 0) > 1e9
        assert (metric_value(text, "syncd_job_run_duration_seconds_count", job="sync") or 0) >= 2
        assert (metric_value(text, "syncd_api_requests_total", tenant="src", method="GET", status="200") or 0) > 10
        assert (metric_value(text, "syncd_api_requests_total", tenant="dst", method="POST", status="200") or 0) >= 1
        assert (metric_value(text, "syncd_objects_mirrored", tenant="src", kind="space") or 0) >= 3
        assert metric_value(text, "syncd_job_running", job="backup") == 0
        assert metric_value(text, "process_resident_memory_bytes") is not None

        # -- a triggered backup writes a backup file; retention keeps the newest two
        files = []
        for _ in range(3):
            status, answer = daemon.post("/jobs/backup/run")
            assert status == 202 and answer["status"] == "started", answer
            run = daemon.wait_run(answer["run"]["id"])
            assert run["outcome"] == "succeeded" and run["cause"] == "trigger", run
            files.append(Path(run["summary"]["file"]))
        kept = sorted((tmp_path / "state" / "backups" / "backup").glob("backup-*.db"))
        assert kept == sorted(files[1:]), kept
        with sqlite3.connect(files[-1]) as db:
            spaces = db.execute("SELECT count(*) FROM resources WHERE kind = 'space' AND deleted_run IS NULL").fetchone()[0]
        assert spaces == 3
        assert daemon.post("/jobs/nope/run")[0] == 404
        assert daemon.get("/runs/999999")[0] == 404

        # -- the command line talks to the running daemon
        done = _cli("trigger", "sync", "--wait", "--config", str(config), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "succeeded" in done.stdout
        listed = _cli("jobs", "--json", "--config", str(config), cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert [job["name"] for job in json.loads(listed.stdout)["jobs"]] == ["backup", "mirror", "sync"]
        unknown = _cli("trigger", "nope", "--config", str(config), cwd=tmp_path)
        assert unknown.returncode == 1
        assert unknown.stderr.strip().splitlines() == ["syncd: error: daemon: unknown job 'nope' (configured: backup, mirror, sync)"]
        wrong = _cli("jobs", "--config", str(config), "--url", daemon.url, cwd=tmp_path, env={"SYNCD_DAEMON__TOKEN": "not-the-token-at-all"})
        assert wrong.returncode == 1
        assert wrong.stderr.strip().splitlines() == ["syncd: error: daemon: missing or wrong token in the Authorization header (daemon.token)"]

        # -- a second daemon on the same state directory refuses to start
        second = _cli("serve", "--config", str(config), cwd=tmp_path)
        assert second.returncode == 2
        assert "another syncd daemon is running on state directory" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1

        # -- SIGHUP with a broken file: rejected, the old configuration stays
        good = config.read_text()
        config.write_text(good + "\n[[jobs]]\nname = 'broken'\n")
        daemon.signal(signal.SIGHUP)
        wait_for("the rejected reload", lambda: "config.reload_rejected" in daemon.log(), 30)
        assert "jobs[3].kind: is required" in daemon.log()
        assert [job["name"] for job in daemon.get("/jobs")[1]["jobs"]] == ["backup", "mirror", "sync"]
        assert metric_value(daemon.metrics(), "syncd_config_reloads_total", outcome="rejected") == 1
        before = len(daemon.finished_runs("sync"))
        wait_for("sync to keep running", lambda: len(daemon.finished_runs("sync")) > before, 30)

        # -- SIGHUP with a good file: a new job appears
        config.write_text(good + '\n[[jobs]]\nname = "nightly"\nkind = "backup"\nsource = "src"\n')
        daemon.signal(signal.SIGHUP)
        wait_for("the new job", lambda: "nightly" in [job["name"] for job in daemon.get("/jobs")[1]["jobs"]], 30)
        assert daemon.job("nightly")["schedule"] == "on trigger only"
    finally:
        code = daemon.stop()
    # -- SIGTERM: exit 0, the state directory is free again
    assert code == 0, daemon.log()
    assert "daemon.stopped" in daemon.log()
    assert not (tmp_path / "state" / "daemon.json").exists()


def test_sigterm_cancels_a_run_past_the_deadline_and_leaves_state_consistent(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = use_backend(backend, request, monkeypatch, tmp_path / "state")
    with cli_zygote.emulator_process(token=ALL_TOKEN, spec="orgs=1,collections=2,spaces=40,pages=10", rate=0, latency_ms=150) as slow:
        source = slow.report["organizations"][0]["id"]
        config = tmp_path / "syncd.toml"
        config.write_text(
            f'state_dir = "{tmp_path / "state"}"\n'
            f'[tenants.src]\nbase_url = "{slow.url}"\ntoken = "{ALL_TOKEN}"\nconcurrency = 2\n'
            '[daemon]\nport = 0\nshutdown_deadline = "1s"\n'
            f'[[jobs]]\nname = "sync"\nkind = "sync"\nsource = "src"\n'
            f'[[jobs]]\nname = "backup"\nkind = "backup"\nsource = "src:{source}"\n'
        )
        daemon = DaemonProcess.start(config, tmp_path / "state")
        sync_run = daemon.post("/jobs/sync/run")[1]["run"]["id"]
        backup_run = daemon.post("/jobs/backup/run")[1]["run"]["id"]
        wait_for("both runs to read", lambda: all(daemon.get(f"/runs/{i}")[1]["outcome"] == "running" for i in (sync_run, backup_run)), 30)
        wait_for("API calls", lambda: (metric_value(daemon.metrics(), "syncd_api_requests_total", tenant="src", method="GET", status="200") or 0) > 20, 30)
        daemon.signal(signal.SIGTERM)
        daemon.process.wait(timeout=30)
        assert daemon.process.returncode == 0, daemon.log()
        log = daemon.log()
        assert "daemon.cancelling_runs" in log and "job.run_cancelled" in log, log

        # No half-written backup is left behind.
        assert not list((tmp_path / "state" / "backups" / "backup").iterdir())
        # The state mirror's interrupted run never became current, and nothing is left open.
        with StateStore(state, readonly=True) as mirror:
            statuses = [run["status"] for run in mirror.runs()]
        assert statuses and "running" not in statuses and "complete" not in statuses

        # A new daemon takes the state directory over and the next sync completes.
        assert http("PUT", slow.url + "/_emulator/faults", body={"latency": 0})[0] == 200
        again = DaemonProcess.start(config, tmp_path / "state")
        try:
            # The run history (daemon.db, or the fleet's) says what happened to the stopped runs.
            assert {again.get(f"/runs/{i}")[1]["outcome"] for i in (sync_run, backup_run)} == {"cancelled"}
            assert {again.get(f"/runs/{i}")[1]["job"] for i in (sync_run, backup_run)} == {"sync", "backup"}
            run = again.wait_run(again.post("/jobs/sync/run")[1]["run"]["id"], timeout=120)
            assert run["outcome"] == "succeeded", run
            assert run["id"] > backup_run
        finally:
            assert again.stop(signum=signal.SIGINT) == 0  # Ctrl-C stops it as gracefully
        assert "reason=SIGINT" in again.log() and "daemon.stopped" in again.log()


def test_serve_refuses_bad_configuration_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "syncd.toml"
    config.write_text('[daemon]\nhost = "0.0.0.0"\n')
    done = _cli("serve", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2
    expected = (
        f"syncd: error: {config}: daemon.host: '0.0.0.0' is not a loopback address: set daemon.token "
        "(or SYNCD_DAEMON__TOKEN) so the control API is not open to the network"
    )
    assert done.stderr.strip().splitlines() == [expected]


def test_cli_without_a_daemon_says_so(tmp_path: Path) -> None:
    config = tmp_path / "syncd.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n[daemon]\nport = 1\n')
    done = _cli("trigger", "sync", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 3
    assert "no syncd daemon answers at http://127.0.0.1:1" in done.stderr
    assert os.path.exists(config)


def test_serve_refuses_a_job_whose_token_is_missing(tmp_path: Path) -> None:
    config = tmp_path / "syncd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        '[tenants.src]\nbase_url = "http://127.0.0.1:1"\ntoken_env = "SYNCD_TEST_NO_SUCH_TOKEN"\n'
        '[[jobs]]\nname = "sync"\nkind = "sync"\nsource = "src"\n'
    )
    done = _cli("serve", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "syncd: error: job sync: tenants.src.token_env: environment variable SYNCD_TEST_NO_SUCH_TOKEN is not set or empty"
    ]
    assert not (tmp_path / "state" / "daemon.lock").exists()


def test_serve_logs_as_the_file_says_unless_the_command_line_says_otherwise(tmp_path: Path) -> None:
    config = tmp_path / "syncd.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\nlog_format = "json"\n[daemon]\nport = 0\n')
    for argv, is_json in ((["serve"], True), (["--log-format", "console", "serve"], False)):
        process = subprocess.Popen(
            [sys.executable, "-m", "syncd.cli", *argv[:-1], argv[-1], "--config", str(config)],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        try:
            assert process.stdout is not None
            line = next(line for line in process.stdout if "daemon.started" in line)
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
            if process.stdout is not None:
                process.stdout.close()
        assert line.lstrip().startswith("{") is is_json, line


def test_serve_on_a_port_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "syncd.toml"
        config.write_text(f'state_dir = "{tmp_path / "state"}"\n[daemon]\nport = {port}\n')
        done = _cli("serve", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"syncd: error: control API: cannot listen on 127.0.0.1:{port}:"), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "state" / "daemon.lock").exists()
