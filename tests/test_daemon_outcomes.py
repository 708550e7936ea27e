"""What the operator is told is what happened (issue 39): a copy-mode mirror job whose source
drops a space keeps succeeding, and every place that shows a run says what it left on the
target, in the same words: the control API (`/jobs/NAME`, `/runs/ID`), `syncd trigger --wait`
(human and `--json`), the run page, the metrics and the log. Against the emulator under each profile
(`default`, `divergent`, `mixed:SEED`: docs/concepts/open-points.md), with `syncd serve` and the
command line as processes of their own.
"""

from __future__ import annotations

import html
import json
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncd.daemon.ui.session import make_session
from syncd.emulator.process import EmulatorProcess
from tests import cli_zygote
from tests.daemon_support import DaemonProcess, daemon_config, metric_samples, metric_value
from tests.loopback import EmulatorClient
from tests.schema_support import check_output

ALL_TOKEN = "outcomes-test-token"
CONTROL_TOKEN = "control-secret-outcomes"
SPEC = "orgs=1,empty_orgs=1,collections=2,spaces=4,pages=3"


@pytest.fixture(params=["default", "divergent", "mixed:39"])
def emulator(request: pytest.FixtureRequest) -> Iterator[EmulatorProcess]:
    with cli_zygote.emulator_process(token=ALL_TOKEN, spec=SPEC, rate=0, profile=request.param) as running:
        yield running


def _cli(*args: str, cwd: Path) -> Any:
    return cli_zygote.run(args, cwd=cwd, timeout=180, env=dict(os.environ), text=True)


def _page(daemon: DaemonProcess, path: str) -> str:
    """A page of the daemon's web UI as a logged-in browser gets it (the session cookie)."""
    assert daemon.token is not None
    request = urllib.request.Request(daemon.url + path, headers={"Cookie": f"syncd_ui={make_session(daemon.token, time.time())}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
        return html.unescape(answer.read().decode())


def _run(daemon: DaemonProcess) -> dict[str, Any]:
    status, answer = daemon.post("/jobs/mirror/run")
    assert status == 202, answer
    return daemon.wait_run(answer["run"]["id"], timeout=120)


def test_a_copy_mode_job_whose_source_drops_a_space_succeeds_and_says_what_it_left(
    tmp_path: Path, emulator: EmulatorProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SYNCD_STATE_URL", raising=False)  # one daemon, its state in the state directory
    source, target = (org["id"] for org in emulator.report["organizations"])
    config = daemon_config(
        tmp_path, emulator.url, ALL_TOKEN,
        retry={"max_attempts": 4, "initial_wait": "0.1s", "max_wait": "1s"},
        daemon={"port": 0, "token": CONTROL_TOKEN, "shutdown_deadline": "10s"},
        jobs=[{"name": "mirror", "kind": "mirror", "source": f"src:{source}", "target": f"dst:{target}"}],  # copy mode: the default
    )  # fmt: skip
    daemon = DaemonProcess.start(config, tmp_path / "state", token=CONTROL_TOKEN)
    try:
        first = _run(daemon)
        assert first["outcome"] == "succeeded" and first["reason"] is None, first
        assert first["summary"]["left_on_target"] == [] and first["summary"]["verify"]["left_on_target"] == 0
        success = daemon.job("mirror")["last_success_at"]

        # The source drops a space (through the service's API, as a person would).
        api = EmulatorClient(emulator.url, emulator.report, ALL_TOKEN)
        spaces = api.api("GET", f"/v1/orgs/{source}/spaces?limit=1000")["items"]
        dropped = spaces[-1]["title"]
        api.api("DELETE", f"/v1/spaces/{spaces[-1]['id']}")

        # -- syncd trigger --wait: the run succeeded, and its line says what it left, in words
        done = _cli("trigger", "mirror", "--wait", "--config", str(config), cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        said = " ".join(done.stdout.split())  # a terminal's lines joined
        assert "succeeded" in said and "were left on the target (copy mode keeps them)" in said and repr(dropped) in said, done.stdout
        assert "{" not in done.stdout  # no Python dict of counts
        second = next(run for run in daemon.job("mirror")["runs"] if run["outcome"] != "running")
        reason = second["reason"]
        assert reason.startswith(f"{second['summary']['verify']['left_on_target']} object(s) the source no longer has were left on the target (copy mode keeps them): space {dropped!r}")
        assert reason in said

        # -- /runs/ID: succeeded, the space in left_on_target (kind, title, path), the reason
        status, run = daemon.get(f"/runs/{second['id']}")
        assert status == 200 and run["outcome"] == "succeeded" and run["reason"] == reason
        left = run["summary"]["left_on_target"]
        assert left[0]["kind"] == "space" and left[0]["title"] == dropped and left[0]["path"].endswith(dropped), left
        assert {item["kind"] for item in left[1:]} <= {"site-space"}  # where the space was published, if it was
        assert run["summary"]["verify"]["left_on_target"] == len(left) and run["summary"]["verify"]["extra"] == 0 and run["summary"]["equal"]

        # -- /jobs/NAME: the last run with its reason; last success moved
        job = daemon.job("mirror")
        assert job["last_run"]["id"] == second["id"] and job["last_run"]["reason"] == reason
        assert job["last_success_at"] > success

        # -- syncd trigger --wait --json: the run as it ended, with its reason
        as_json = _cli("trigger", "mirror", "--wait", "--json", "--config", str(config), cwd=tmp_path)
        assert as_json.returncode == 0, as_json.stderr
        document = check_output("trigger", as_json.stdout)
        assert document["run"]["outcome"] == "succeeded" and dropped in document["run"]["reason"]
        assert document["run"]["summary"]["left_on_target"] == left
        assert daemon.job("mirror")["last_success_at"] > job["last_success_at"]

        # -- syncd jobs: the last outcome with its reason
        listed = _cli("jobs", "--config", str(config), cwd=tmp_path)
        assert listed.returncode == 0 and "left on the target" in " ".join(listed.stdout.split()), listed.stdout

        # -- the run page: outcome, the reason, what was left, where
        page = _page(daemon, f"/ui/runs/{second['id']}")
        assert 'id="run-reason"' in page and reason in page
        assert 'id="run-left"' in page and dropped in page and left[0]["path"] in page
        assert "/ui/jobs/mirror" in page

        # -- the metrics: one series of the last outcome with its reason, and the count left
        text = daemon.metrics()
        assert metric_value(text, "syncd_job_left_on_target", job="mirror") == len(left)
        samples = [line for line in text.splitlines() if line.startswith("syncd_job_last_outcome{")]
        assert len(samples) == 1 and 'outcome="succeeded"' in samples[0] and "left on the target" in samples[0], samples
        assert metric_samples(text, "syncd_job_last_outcome", job="mirror", outcome="succeeded") == [1.0]

        # -- the logs: the run's end with the same words
        ended = [line for line in daemon.log().splitlines() if "job.run_finished" in line and f"run={second['id']}" in line]
        assert ended and "were left on the target (copy mode keeps them)" in ended[0] and dropped in ended[0], ended
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()


def test_a_plan_of_a_copy_lists_what_it_leaves_in_its_own_section(tmp_path: Path, emulator: EmulatorProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """`mirror plan` (human and --json) after the source dropped a space that was copied."""
    monkeypatch.delenv("SYNCD_STATE_URL", raising=False)
    source, target = (org["id"] for org in emulator.report["organizations"])
    config = daemon_config(tmp_path, emulator.url, ALL_TOKEN, retry={"max_attempts": 4, "initial_wait": "0.1s", "max_wait": "1s"}, daemon={}, jobs=[])
    applied = _cli("mirror", "apply", f"src:{source}", f"dst:{target}", "--config", str(config), cwd=tmp_path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    api = EmulatorClient(emulator.url, emulator.report, ALL_TOKEN)
    space = api.api("GET", f"/v1/orgs/{source}/spaces?limit=1000")["items"][0]
    api.api("DELETE", f"/v1/spaces/{space['id']}")
    planned = _cli("mirror", "plan", f"src:{source}", f"dst:{target}", "--json", "--config", str(config), cwd=tmp_path)
    document = check_output("mirror-plan", planned.stdout)
    left = document["left_on_target"]
    assert (left[0]["kind"], left[0]["title"]) == ("space", space["title"]) and {item["kind"] for item in left[1:]} <= {"site-space"}, left
    assert not [change for change in document["changes"] if change["action"] == "delete"]
    human = _cli("mirror", "plan", f"src:{source}", f"dst:{target}", "--config", str(config), cwd=tmp_path)
    assert f"left on the target: {len(left)} object(s) the source does not have" in human.stdout and repr(space["title"]) in human.stdout, human.stdout
    # The copy afterwards: equal, exit 0, and its output says what it left.
    again = _cli("mirror", "apply", f"src:{source}", f"dst:{target}", "--config", str(config), cwd=tmp_path)
    assert again.returncode == 0, again.stdout
    assert f"{len(left)} left on target (the source does not have them; copy mode keeps them): equal" in " ".join(again.stdout.split())
    # mirror verify: copy mode by default (left there, exit 0); --mode mirror calls it extra (exit 1).
    verified = _cli("mirror", "verify", f"src:{source}", f"dst:{target}", "--json", "--config", str(config), cwd=tmp_path)
    result = json.loads(verified.stdout)
    assert verified.returncode == 0 and result["verification"]["counts"]["left_on_target"] == len(left)
    strict = _cli("mirror", "verify", f"src:{source}", f"dst:{target}", "--mode", "mirror", "--config", str(config), cwd=tmp_path)
    assert strict.returncode == 1 and f"{len(left)} extra on target" in strict.stdout
