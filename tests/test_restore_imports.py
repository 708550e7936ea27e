"""A restore whose content syncd serves imports as many spaces at once as its content source can
serve, whatever the apply's concurrency (`syncd.copy.writer.imports_at_once`): with the apply at
the in-flight ceiling, a dozen imports at once overran the content source's `max_connections`
and imports failed ("Server disconnected"), to be sent again in later rounds. The real CLI
against an emulator process; the content source is made small (32 connections: 2 imports at
once) so that a dozen spaces would overrun it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_zygote import emulator_process
from tests.test_plan_review import run as syncd

SPEC = "orgs=1,empty_orgs=1,collections=1,spaces=30,pages=2,files=1"


def test_a_restore_sends_no_import_its_content_source_cannot_serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with emulator_process(token="all", spec=SPEC, seed=46, rate=0) as running:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("SYNCD_TENANTS__EMU__BASE_URL", running.url)
        monkeypatch.setenv("SYNCD_TENANTS__EMU__TOKEN", "all")
        monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
        monkeypatch.setenv("SYNCD_CONTENT_SOURCE__MAX_CONNECTIONS", "32")
        ids = [org["id"] for org in running.report["organizations"]]
        code, out, err = syncd(capsys, "backup", f"emu:{ids[0]}", "--out", str(tmp_path / "b.db"), "--with-files")
        assert code == 0, out + err
        code, out, err = syncd(capsys, "restore", str(tmp_path / "b.db"), f"emu:{ids[1]}", "--json")
        assert code == 0, out + err
        report = json.loads(out)
        rounds = [r["apply"] for r in report["rounds"]]
        assert rounds and not rounds[0]["failed"], rounds[0]["failed"]  # every import served: none sent again
        assert len(rounds) == 1 and report["equal"], rounds
