"""An operator's pause, resume and cancel of a job of one daemon (SQLite state), through the
command line: `syncd serve` and the emulator as real processes (issue 39).

A pause holds across a restart (it is kept in `state/daemon.db`); a paused job's schedule does
not fire and a trigger is refused with how to resume; a resume lets it run again. A cancel ends
a long mirror run `cancelled` with the operator named in its reason, and the next run finishes
the copy from where the cancelled one left it (nothing twice), under more than one profile.
The fleet's counterparts are in tests/test_fleet_control.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests import cli_zygote
from tests.daemon_support import DaemonProcess, daemon_config, metric_value
from tests.loopback import EmulatorClient, http, wait_for
from tests.schema_support import assert_valid

TOKEN = "control-test-token"
CONTROL = "control-api-secret-1234"
SPEC = "orgs=1,empty_orgs=1,collections=2,spaces=6,pages=3"
QUIET = 3.0
"""Seconds a paused job is watched for a run its schedule (every second) would have started."""


@pytest.fixture(autouse=True)
def _sqlite_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """One daemon on its state directory (the fleet has its own tests)."""
    monkeypatch.delenv("SYNCD_STATE_URL", raising=False)


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli_zygote.run([*args, "--config", str(config)], cwd=config.parent, timeout=120, env=dict(os.environ), text=True)


def _runs(daemon: DaemonProcess, job: str) -> list[dict[str, object]]:
    return daemon.job(job)["runs"]  # type: ignore[no-any-return]


def _quiet(daemon: DaemonProcess, job: str) -> None:
    """No run of `job` starts for `QUIET` seconds (its schedule would start three)."""
    before = [run["id"] for run in _runs(daemon, job)]
    time.sleep(QUIET)
    assert [run["id"] for run in _runs(daemon, job)] == before, "a paused job ran"


def test_a_pause_holds_across_a_restart_refuses_triggers_and_a_resume_runs_the_job_again(tmp_path: Path) -> None:
    with cli_zygote.emulator_process(token=TOKEN, spec=SPEC, rate=0) as emulator:
        config = daemon_config(
            tmp_path, emulator.url, TOKEN,
            retry={"max_attempts": 2, "initial_wait": "0.1s", "max_wait": "0.5s"},
            daemon={"port": 0, "token": CONTROL, "shutdown_deadline": "10s"},
            jobs=[{"name": "tick", "kind": "sync", "source": "src", "schedule": {"every": "1s"}}],
        )  # fmt: skip
        daemon = DaemonProcess.start(config, tmp_path / "state", token=CONTROL)
        try:
            wait_for("a scheduled run", lambda: any(r["outcome"] == "succeeded" for r in _runs(daemon, "tick")), 60)
            for action in ("pause", "resume", "cancel"):  # bearer-authenticated like /run
                assert http("POST", f"{daemon.url}/jobs/tick/{action}", body={})[0] == 401
            assert daemon.job("tick")["paused"] is None
            paused = _cli(config, "pause", "tick", "--json")
            assert paused.returncode == 0, paused.stderr
            answer = json.loads(paused.stdout)
            assert_valid("pause", answer)
            assert answer["status"] == "paused" and "syncd command line" in answer["job"]["paused"]["by"]
            assert "syncd resume tick" in paused.stderr  # the human line goes to stderr with --json
            wait_for("the run in progress to end", lambda: daemon.job("tick")["state"] == "paused", 60)
            _quiet(daemon, "tick")

            refused = _cli(config, "trigger", "tick")
            assert refused.returncode == 1
            (line,) = refused.stderr.strip().splitlines()
            assert line.startswith("syncd: error: daemon: job 'tick' is paused (since ") and "`syncd resume tick`" in line, line
            assert re.search(r"\(since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, by ", line), line  # the one time format
            status, body = daemon.post("/jobs/tick/run")
            assert status == 409 and "is paused" in body["error"]["message"], body
            assert _cli(config, "pause", "tick").stdout.startswith("tick was already paused")
            listed = _cli(config, "jobs", "--json")
            (job,) = json.loads(listed.stdout)["jobs"]
            assert_valid("jobs", {"jobs": [job]})
            assert job["state"] == "paused" and job["next_run_at"] is None and job["paused"]["at"]
            assert "paused" in _cli(config, "jobs").stdout
            assert metric_value(daemon.metrics(), "syncd_job_paused", job="tick") == 1
        finally:
            assert daemon.stop() == 0, daemon.log()

        # -- a restart keeps the pause (state/daemon.db)
        again = DaemonProcess.start(config, tmp_path / "state", token=CONTROL)
        try:
            assert again.job("tick")["state"] == "paused"
            assert metric_value(again.metrics(), "syncd_job_paused", job="tick") == 1
            _quiet(again, "tick")
            resumed = _cli(config, "resume", "tick", "--json")
            assert resumed.returncode == 0 and resumed.stderr.startswith("tick resumed: next run "), resumed.stderr
            answer = json.loads(resumed.stdout)
            assert_valid("pause", answer)
            # From its next time on (no run for the times it missed): due in the future, not now.
            assert answer["status"] == "resumed" and answer["job"]["state"] == "idle" and answer["job"]["next_run_at"], answer
            before = max(run["id"] for run in _runs(again, "tick"))  # type: ignore[type-var]
            ran = wait_for("a scheduled run after the resume", lambda: next((r for r in _runs(again, "tick") if r["id"] > before and r["outcome"] == "succeeded"), None), 60)
            assert ran["cause"] == "schedule"
            assert again.job("tick")["paused"] is None
            assert metric_value(again.metrics(), "syncd_job_paused", job="tick") == 0
            assert _cli(config, "resume", "tick").stdout.startswith("tick was not paused")
            assert _cli(config, "pause", "nope").returncode == 1
        finally:
            assert again.stop() == 0, again.log()
        assert "job.paused" in daemon.log() and "job.resumed" in again.log()


@pytest.mark.parametrize("profile", ["default", "divergent"])
def test_a_cancel_ends_a_long_mirror_run_cancelled_and_the_next_run_finishes_the_copy(tmp_path: Path, profile: str) -> None:
    spec = "orgs=1,empty_orgs=1,collections=3,spaces=8,pages=3,files=1,sites=1,sections=2"
    with cli_zygote.emulator_process(token=TOKEN, spec=spec, seed=7, rate=0, latency_ms=40, profile=profile) as slow:
        emulator = EmulatorClient(slow.url, slow.report, TOKEN)
        src, dst = emulator.orgs
        config = daemon_config(
            tmp_path, slow.url, TOKEN,
            retry={"max_attempts": 4, "initial_wait": "0.1s", "max_wait": "1s"},
            daemon={"port": 0, "token": CONTROL, "shutdown_deadline": "10s"},
            jobs=[{"name": "copy", "kind": "mirror", "source": f"src:{src}", "target": f"dst:{dst}"}],
        )  # fmt: skip
        daemon = DaemonProcess.start(config, tmp_path / "state", token=CONTROL)
        try:
            nothing = _cli(config, "cancel", "copy")
            assert nothing.returncode == 1
            assert nothing.stderr.strip().splitlines() == ["syncd: error: daemon: job 'copy' has no running run to cancel"]
            status, answer = daemon.post("/jobs/copy/run")
            assert status == 202
            run_id = answer["run"]["id"]
            writes = emulator.writes()
            wait_for("the copy to have written", lambda: emulator.writes() >= writes + 10, 120)
            assert f"run #{run_id} goes on" in _cli(config, "pause", "copy").stdout
            resumed = _cli(config, "resume", "copy")  # while the run that went on through the pause runs
            assert resumed.returncode == 0 and resumed.stdout.strip() == f"copy resumed: run #{run_id} is running now", resumed.stdout
            asked = time.monotonic()
            cancelled = _cli(config, "cancel", "copy", "--wait", "--timeout", "30", "--json")
            took = time.monotonic() - asked
            assert cancelled.returncode == 0, (cancelled.stdout, cancelled.stderr)
            ended = json.loads(cancelled.stdout)
            assert_valid("cancel", ended)
            run = ended["run"]
            assert run["id"] == run_id and run["outcome"] == "cancelled", run
            assert run["reason"].startswith("cancelled by the operator (") and "syncd command line" in run["reason"], run
            assert run["summary"]["stopped_at"]["step"] and run["summary"]["stopped_at"]["done"] >= 0, run  # where it stopped
            print(f"\ncancel ({profile}): the run ended {took:.1f} s after `syncd cancel` was started")  # a figure, not an assertion
            assert daemon.get(f"/runs/{run_id}")[1]["reason"] == run["reason"]
            assert (metric_value(daemon.metrics(), "syncd_job_runs_total", job="copy", outcome="cancelled") or 0) == 1
            assert daemon.job("copy")["state"] == "idle"

            # The next run continues from what the cancelled one wrote: the target ends equal, nothing twice.
            assert http("PUT", slow.url + "/_emulator/faults", body={"latency": 0})[0] == 200
            done = _cli(config, "trigger", "copy", "--wait")
            assert done.returncode == 0, (done.stdout, done.stderr)
            status, again = daemon.post("/jobs/copy/run")
            rerun = daemon.wait_run(again["run"]["id"], timeout=120)
        finally:
            assert daemon.stop() == 0, daemon.log()
        target, source = emulator.dump(dst), emulator.dump(src)
    assert rerun["outcome"] == "succeeded" and rerun["summary"]["writes"] == 0, rerun["summary"]
    assert target == source, [kind for kind in target if target[kind] != source.get(kind)]
    assert not any("#" in path or "(copy)" in path for rows in target.values() for path, _ in rows)
    assert "job.cancel_requested" in daemon.log() and "job.run_cancelled" in daemon.log()
