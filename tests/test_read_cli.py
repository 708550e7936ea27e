"""The read-side commands end to end: a real emulator process, the real CLI, real files; the
state on either backend (`backend`: a SQLite file in the state directory, then PostgreSQL)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from syncd.cli import main
from syncd.state import StateStore, StateError
from tests import cli_zygote
from tests.loopback import wait_for
from tests.state_support import use_backend

TOKEN = "cli-token"


@pytest.fixture(scope="module")
def emulator_url() -> Iterator[str]:
    """`syncd emulator serve` as a subprocess on a free port."""
    proc = cli_zygote.launch(
        ["emulator", "serve", "--port", "0", "--json", "--token", TOKEN,
         "--rate-limit", "0", "--generate", "orgs=2,collections=3,spaces=6,pages=4,files=1,sites=1,members=2,teams=1"],
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        report = json.loads(proc.stdout.readline())
        yield report["url"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def state_at(emulator_url: str, backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path | str:
    """The environment of a syncd with tenant `src` on the emulator, working in `tmp_path`;
    where its state is (on `backend`)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNCD_TENANTS__SRC__BASE_URL", emulator_url)
    monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", TOKEN)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    return use_backend(backend, request, monkeypatch, tmp_path / "state")


@pytest.fixture
def env(state_at: Path | str, tmp_path: Path) -> Path:
    """The working directory of that syncd."""
    return tmp_path


def test_sync_twice_status_and_diff(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "src"]) == 0
    out = capsys.readouterr().out
    assert "changes in run 1" in out and "complete" in out
    assert main(["sync", "src"]) == 0
    assert "no changes" in capsys.readouterr().out
    assert main(["status", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["status"] for r in runs] == ["complete", "complete"]
    assert main(["diff", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"from": 1, "to": 2, "changes": []}
    assert main(["diff", "--run", "7"]) == 2
    assert "no run 7" in capsys.readouterr().err


def test_clear_errors(env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["sync", "src:nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "organization 'nope' not found" in err
    assert main(["sync", "other"]) == 2
    assert "unknown tenant" in capsys.readouterr().err
    monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", "a-bad-token")
    assert main(["sync", "src"]) == 1
    err = capsys.readouterr().err
    assert "401" in err and "a-bad-token" not in err and "Traceback" not in err
    assert main(["status"]) == 0  # the failed attempts started no run
    assert "no runs yet" in capsys.readouterr().out
    assert main(["diff", "--db", str(env / "missing.db")]) == 2
    assert "no such mirror file" in capsys.readouterr().err


def test_backup_with_files_then_export_round_trip(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = env / "backups" / "b.db"
    assert main(["backup", "src", "--out", str(out), "--with-files"]) == 0
    printed = capsys.readouterr().out
    assert "0 failed" in printed
    assert main(["backup", "src", "--out", str(out)]) == 2  # never overwritten silently
    manifest = json.loads((env / "backups" / "b.blobs" / "manifest.json").read_text())
    with StateStore(out) as mirror:
        files = list(mirror.current("src", kind="file"))
        pages = list(mirror.current("src", kind="page"))
    assert files and all(manifest[f["id"]]["size"] == f["data"]["size"] for f in files)
    assert main(["export", str(out), str(env / "export")]) == 0
    capsys.readouterr()
    def bare(markdown: str) -> str:  # the export rewrites link destinations only
        return re.sub(r"\]\([^)\s]*\)", "]()", markdown)

    exported = bare("\n".join(p.read_text() for p in (env / "export").rglob("*.md")))
    assert pages and all(bare(page["data"]["markdown"]) in exported for page in pages)
    before = {p: p.read_bytes() for p in (env / "export").rglob("*") if p.is_file()}
    assert main(["export", str(out), str(env / "export")]) == 0
    after = {p: p.read_bytes() for p in (env / "export").rglob("*") if p.is_file()}
    assert before == after
    assert not [p for p in out.parent.iterdir() if ".partial" in p.name]
    assert os.path.getsize(out) > 0


def test_demo_runs_the_main_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--generate", "orgs=1,empty_orgs=2,collections=2,spaces=4,pages=3,files=1,sites=1", "--out", str(out)]) == 0
    raw = capsys.readouterr().out
    printed = " ".join(raw.split())  # as read, whatever the terminal width wrapped
    # Its last lines are commands to paste: each names a program this shell finds (the running
    # syncd by its path, `.venv/bin/syncd`, unless PATH has it), and the one that shows its
    # rename does.
    hints = [shlex.split(line.split("(", 1)[0]) for line in raw.split("Look around:", 1)[1].splitlines() if line.strip()]
    assert [hint[1] for hint in hints] == ["status", "diff", str(out / "export")], raw
    for program, *_ in hints:
        found = shutil.which(program)
        assert found is not None and os.access(found, os.X_OK), (program, raw)
    syncd = shutil.which(hints[0][0])
    assert syncd is not None and Path(syncd).resolve() == Path(sys.executable).with_name("syncd").resolve(), raw  # this syncd
    shown = hints[1]
    renamed = re.search(r"after renaming space '([^']+)'", printed)
    assert shown[1:3] == ["diff", "--db"] and shown[4] == "--run" and renamed, raw
    assert main(shown[1:6]) == 0
    diff_out = capsys.readouterr().out
    assert f'title: "{renamed[1]}" → "Renamed by the demo"' in diff_out, diff_out
    assert "backup" in printed and "re-sync, nothing changed" in printed and "after renaming space" in printed
    assert "copy into the empty organization" in printed and "verify: equal" in printed
    assert "nothing to do" in printed.split("apply again", 1)[1]
    restored = printed.split("restore backup.db into another empty organization", 1)[1]
    assert "4 spaces imported from syncd's content source" in restored and "verify: equal" in restored
    assert "failed" not in restored and "round 2" not in restored, restored  # every import served the first time
    assert (out / "backup.db").exists() and (out / "export" / ".syncd-export").exists()
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "x").write_text("keep me")
    assert main(["demo", "--out", str(tmp_path / "foreign")]) == 2
    assert (tmp_path / "foreign" / "x").read_text() == "keep me"


def _run_statuses(state: Path | str) -> list[str]:
    """Statuses of the runs in the state, oldest first, as another process sees them."""
    try:
        with StateStore(state, readonly=True) as mirror:
            return [str(run["status"]) for run in mirror.runs()]
    except StateError:  # (a file being made)
        return []


def test_ctrl_c_during_sync_keeps_the_previous_snapshot(env: Path, state_at: Path | str, emulator_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "src"]) == 0
    capsys.readouterr()

    def faults(body: bytes) -> None:
        request = urllib.request.Request(emulator_url + "/_emulator/faults", data=body, method="PUT")
        urllib.request.urlopen(request).read()

    # Every answer 250 ms late: a full sync (~270 requests, 8 at a time) then lasts ~9 s after
    # its run row appears, and Ctrl-C goes as soon as it does (an event, not a fixed sleep).
    faults(b'{"latency": 250}')
    try:
        proc = cli_zygote.started(["sync", "src", "--full"])  # SIGINT as a new interpreter has it
        try:
            wait_for("the second run to start", lambda: proc.poll() is not None or _run_statuses(state_at) == ["complete", "running"],
                     timeout=60, interval=0.05)  # fmt: skip
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        faults(b'{"reset": true}')
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert main(["status", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["status"] for r in runs] == ["complete", "cancelled"]
    assert main(["sync", "src"]) == 0
    assert "no changes" in capsys.readouterr().out


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_postgresql_state_that_fails_mid_command_is_one_line(env: Path, state_at: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A table gone from under syncd (a server that went away, a statement timeout: any
    psycopg error after connecting) ends the command in one line, exit 1, not a traceback."""
    assert main(["sync", "src"]) == 0
    with psycopg.connect(state_at, autocommit=True) as conn:
        conn.execute("ALTER TABLE changes RENAME TO changes_gone")
    capsys.readouterr()
    assert main(["sync", "src"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("syncd: error: the PostgreSQL state failed: ") and '"changes" does not exist' in err and err.count("\n") == 1, err
