"""A daemon's `export` job (issue 43, parts 2 and 3): each run reads its source, commits the
export to its Git repository when something changed and pushes it; the run's summary, its page
and the metrics say where the history went (commit and remote); a push to a remote that cannot
be reached fails the run with its reason in words, and the commit stays in the repository.
`syncd serve` as a process of its own, against an emulator process over loopback, a local bare
repository as the remote.
"""

from __future__ import annotations

import html
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncd.daemon.ui.session import make_session
from syncd.emulator.process import EmulatorProcess
from tests import cli_zygote
from tests.daemon_support import DaemonProcess, daemon_config, metric_value
from tests.loopback import EmulatorClient, closed_port
from tests.test_export_git import a_space_with_pages, git_log

TOKEN = "export-job-token"
CONTROL_TOKEN = "control-secret-export"
SPEC = "orgs=1,collections=1,spaces=2,pages=3,files=1"


@pytest.fixture
def emulator() -> Iterator[EmulatorProcess]:
    with cli_zygote.emulator_process(token=TOKEN, spec=SPEC, rate=0, profile="default") as running:
        yield running


def run_job(daemon: DaemonProcess, job: str) -> dict[str, Any]:
    status, answer = daemon.post(f"/jobs/{job}/run")
    assert status == 202, answer
    return daemon.wait_run(answer["run"]["id"], timeout=120)


def page(daemon: DaemonProcess, path: str) -> str:
    assert daemon.token is not None
    request = urllib.request.Request(daemon.url + path, headers={"Cookie": f"syncd_ui={make_session(daemon.token, time.time())}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return html.unescape(answer.read().decode())


def test_an_export_job_commits_each_change_pushes_it_and_says_where(
    tmp_path: Path, emulator: EmulatorProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dulwich.repo import Repo

    monkeypatch.delenv("SYNCD_STATE_URL", raising=False)
    (source,) = (org["id"] for org in emulator.report["organizations"])
    bare = tmp_path / "docs.git"
    Repo.init_bare(str(bare), mkdir=True).close()
    unreachable = f"http://127.0.0.1:{closed_port()}/docs.git"
    config = daemon_config(
        tmp_path, emulator.url, TOKEN,
        retry={"max_attempts": 2, "initial_wait": "0.1s", "max_wait": "0.5s"},
        daemon={"port": 0, "token": CONTROL_TOKEN, "shutdown_deadline": "10s"},
        jobs=[
            {"name": "history", "kind": "export", "source": f"src:{source}", "push": str(bare), "with_files": True},
            {"name": "offline", "kind": "export", "source": f"src:{source}", "push": unreachable, "repository": str(tmp_path / "offline")},
        ],
    )  # fmt: skip
    daemon = DaemonProcess.start(config, tmp_path / "state", token=CONTROL_TOKEN)
    try:
        first = run_job(daemon, "history")
        assert first["outcome"] == "succeeded" and first["reason"] is None, first
        git = first["summary"]["git"]
        assert git["committed"] and git["pushed"] and git["remote"] == str(bare), git
        assert git["repository"] == str(tmp_path / "state" / "exports" / "history")
        assert first["summary"]["files"]["downloaded"] > 0 and first["summary"]["files"]["failed"] == 0, first["summary"]
        assets = list(Path(git["repository"]).glob("**/.gitbook/assets/*"))
        assert assets and all(path.stat().st_size > 0 for path in assets), assets

        api = EmulatorClient(emulator.url, emulator.report, TOKEN)
        space, (edited, _) = a_space_with_pages(api, source)
        api.admin("PATCH", f"/_emulator/spaces/{space['id']}/pages/{edited['id']}", {"markdown": "# Edited by the daemon test\n"})
        second = run_job(daemon, "history")
        assert second["outcome"] == "succeeded" and second["summary"]["git"]["subject"] == "1 page changed in 1 space", second
        unchanged = run_job(daemon, "history")
        assert unchanged["outcome"] == "succeeded" and not unchanged["summary"]["git"]["committed"], unchanged
        commits = [sha for sha, _ in git_log(Path(git["repository"]))]
        assert commits == [second["summary"]["commit"], first["summary"]["commit"]] == [unchanged["summary"]["commit"], git["commit"]]
        with Repo(str(bare)) as remote:
            assert remote.refs[b"refs/heads/main"].decode() == commits[0]

        shown = page(daemon, f"/ui/runs/{second['id']}")
        assert commits[0] in shown and "(new: 1 page changed in 1 space)" in shown and str(bare) in shown and "pushed" in shown, shown

        failed = run_job(daemon, "offline")
        assert failed["outcome"] == "failed", failed
        assert failed["error"].startswith(f"the push to {unreachable} failed: ") and "the next run pushes it" in failed["error"], failed
        assert failed["reason"] == failed["error"]
        kept = failed["summary"]["git"]
        assert kept["committed"] and kept["pushed"] is False and git_log(tmp_path / "offline")[0][0] == kept["commit"]
        assert "not pushed" in page(daemon, f"/ui/runs/{failed['id']}")

        status, metrics = daemon.get("/metrics")
        assert status == 200
        assert metric_value(metrics, "syncd_job_export_commit", job="history", commit=commits[0], remote=str(bare)) == 1.0
        assert metric_value(metrics, "syncd_job_export_unpushed", job="history") == 0.0
        assert metric_value(metrics, "syncd_job_export_commit", job="offline", commit=kept["commit"], remote=unreachable) == 1.0
        assert metric_value(metrics, "syncd_job_export_unpushed", job="offline") == 1.0
    finally:
        daemon.stop()
