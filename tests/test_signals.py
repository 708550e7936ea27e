"""A one-shot command stopped by SIGTERM or SIGINT marks its run cancelled, keeps its state
consistent, says so in one line and exits 143 / 130.

`syncd` runs as a process of its own (forked from the suite's CLI zygote, tests/cli_zygote.py)
against an emulator slowed by its latency fault; the
signal goes once the run is under way, seen in the state (never after a fixed sleep). The
commands that keep state run on both backends (`backend`); a backup and an export write
files, not state, and run once."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncd.cli import main
from syncd.state import StateStore
from syncd.state.errors import StateError
from tests import cli_zygote
from tests.hostile.cli_support import clean_env
from tests.loopback import wait_for
from tests.state_support import count_rows, is_pg, use_backend
from tests.thread_emulator import TOKEN, ThreadEmulator, module_thread_emulator

SPEC = "orgs=1,empty_orgs=2,collections=2,spaces=4,pages=2,files=1,sites=0"
"""An empty organization for each backend's mirror apply: the module's emulator keeps what the other copied."""


emulator = module_thread_emulator(SPEC)


@pytest.fixture
def slow(emulator: ThreadEmulator) -> Iterator[ThreadEmulator]:
    """Every answer 150 ms late, while the test runs."""
    emulator.admin("PUT", "/faults", {"latency": 150})
    try:
        yield emulator
    finally:
        emulator.admin("PUT", "/faults", {"reset": True})


def _runs(state: Path | str) -> list[dict[str, Any]]:
    """The state mirror's runs (id, job, status, reason), oldest first; [] before it has any."""
    if not is_pg(state) and not Path(state).exists():
        return []
    if is_pg(state) and not count_rows(state, "information_schema.tables", "table_schema = current_schema() AND table_name = 'runs'"):
        return []  # not made yet
    try:
        with StateStore(state, readonly=True) as mirror:
            runs = sorted(mirror.runs(), key=lambda run: run["id"])
    except (StateError, sqlite3.OperationalError):  # the file is there, its tables are being made
        return []
    return [{key: run[key] for key in ("id", "job", "status", "reason")} for run in runs]


@pytest.fixture
def state(backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path | str:
    """Where the commands keep their state: `tmp_path/state/syncd.db`, or a PostgreSQL schema."""
    return use_backend(backend, request, monkeypatch, tmp_path / "state")


def _stopped(args: list[str], state_dir: Path, state: Path | str, url: str, signum: int, started: Any) -> tuple[int, str, list[dict[str, Any]]]:
    """Run `syncd ARGS`, send `signum` once `started(runs)` holds; (exit code, stderr, runs)."""
    env = clean_env(SYNCD_TENANTS__SRC__BASE_URL=url, SYNCD_TENANTS__SRC__TOKEN=TOKEN, SYNCD_STATE_DIR=str(state_dir))
    if is_pg(state):
        env["SYNCD_STATE_URL"] = str(state)
    proc = cli_zygote.started(args, env=env)
    try:
        wait_for("the run to start", lambda: proc.poll() is not None or started(_runs(state)), timeout=60, interval=0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err, _runs(state)


def _said(err: str) -> list[str]:
    """stderr without log lines (progress, retries)."""
    return [line for line in err.splitlines() if line.strip() and not line[:2].isdigit()]


def test_sigterm_cancels_a_sync_run_and_exits_143(slow: ThreadEmulator, tmp_path: Path, state: Path | str) -> None:
    code, err, runs = _stopped(["sync", "src"], tmp_path / "state", state, slow.url, signal.SIGTERM,
                               lambda runs: any(r["status"] == "running" for r in runs))  # fmt: skip
    assert code == 143, err
    assert _said(err) == ["syncd: interrupted by SIGTERM: the run is marked cancelled, what it had finished is kept"], err
    assert [(r["job"], r["status"]) for r in runs] == [("sync", "cancelled")]
    assert count_rows(state, "staged") == 0  # nothing of the run is left staged
    assert count_rows(state, "resources") == 0


def test_sigint_cancels_a_mirror_apply_run_and_exits_130(slow: ThreadEmulator, tmp_path: Path, state: Path | str) -> None:
    source, target = slow.org_ids[0], slow.org_ids[-2 if is_pg(state) else -1]
    code, err, runs = _stopped(["mirror", "apply", f"src:{source}", f"src:{target}"], tmp_path / "state", state, slow.url, signal.SIGINT,
                               lambda runs: any(r["job"] == "apply" and r["status"] == "running" for r in runs))  # fmt: skip
    assert code == 130, err
    assert _said(err) == ["syncd: interrupted by SIGINT: the run is marked cancelled, what it had finished is kept"], err
    apply = [r for r in runs if r["job"] == "apply"]
    assert [(r["status"], r["reason"]) for r in apply] == [("cancelled", "apply was interrupted")]
    assert all(r["status"] != "running" for r in runs)
    # What it left is consistent: the next apply settles it and ends with the target equal.
    slow.admin("PUT", "/faults", {"reset": True})
    with pytest.MonkeyPatch.context() as patch:
        _config(tmp_path, patch, slow.url)
        assert main(["mirror", "apply", f"src:{source}", f"src:{target}"]) == 0


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNCD_TENANTS__SRC__BASE_URL", url)
    monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", TOKEN)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))


def test_a_signal_during_a_backup_leaves_the_previous_backup(
    emulator: ThreadEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from syncd.commands.progress import CrawlProgress

    _config(tmp_path, monkeypatch, emulator.url)
    out = tmp_path / "b.db"
    assert main(["backup", "src", "--out", str(out)]) == 0
    before = out.read_bytes()
    update = CrawlProgress.update

    def signalled(self: CrawlProgress, stats: Any, client: Any) -> None:  # SIGTERM to this process, mid-crawl
        update(self, stats, client)
        if sum(stats.objects.values()) and not getattr(self, "sent", False):
            self.sent = True  # type: ignore[attr-defined]
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(CrawlProgress, "update", signalled)
    capsys.readouterr()
    assert main(["backup", "src", "--out", str(out), "--overwrite"]) == 143
    assert capsys.readouterr().err.strip().endswith(f"interrupted by SIGTERM: the unfinished backup is removed, {out} is left as it was")
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_signal_during_an_export_stops_between_spaces(
    emulator: ThreadEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from syncd.commands.progress import ExportProgress

    _config(tmp_path, monkeypatch, emulator.url)
    assert main(["backup", "src", "--out", str(tmp_path / "b.db")]) == 0

    def signalled(self: ExportProgress, done: int, total: int | None, files: int) -> None:
        if done == 1:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(ExportProgress, "update", signalled)
    capsys.readouterr()
    assert main(["export", str(tmp_path / "b.db"), str(tmp_path / "out")]) == 130
    assert "interrupted by SIGINT: the export stopped (every file in" in capsys.readouterr().err
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert written and not [p for p in written if p.name.endswith(".syncd-tmp")]
    assert len([p for p in written if p.name == "space.json"]) == 1
    monkeypatch.undo()
    _config(tmp_path, monkeypatch, emulator.url)
    assert main(["export", str(tmp_path / "b.db"), str(tmp_path / "out")]) == 0  # run again: whole
    spaces = sum(len(emulator.items(f"/v1/orgs/{org}/spaces")) for org in emulator.org_ids)
    assert len(list((tmp_path / "out").rglob("space.json"))) == spaces
