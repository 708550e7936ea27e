"""A restore whose content syncd serves imports as many spaces at once as its content source can
serve (`syncd.copy.import_bound`), whatever the apply's concurrency and whatever the service's
importer opens (docs/concepts/open-points.md, row importer-connections: 8 connections an import
under `default`, 32 under `divergent`). With a fixed bound, a dozen imports at once overran
the content source's `max_connections` and imports failed ("Server disconnected"), to be sent
again in later rounds. The real CLI against an emulator process; the content source is made
small (32 connections: two imports of 32 would overrun it) and the spaces large enough (40
pages) for an importer to open all it may.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_zygote import emulator_process
from tests.test_plan_review import run as syncd

SPEC = "orgs=1,empty_orgs=1,collections=1,spaces=4,pages=40,files=1"


@pytest.mark.parametrize("profile", ["default", "divergent"])
def test_a_restore_imports_no_more_at_once_than_its_content_source_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], profile: str
) -> None:
    with emulator_process(token="all", spec=SPEC, seed=46, rate=0, profile=profile) as running:
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
        assert rounds and not rounds[0]["failed"], rounds[0]["failed"]  # every import served in the end
        assert len(rounds) == 1 and report["equal"], rounds
        notes = "\n".join(report["rounds"][0]["apply"]["notes"])
        if profile == "divergent":  # the importer opened 32: one import at a time, and the run says so
            assert "1 at once, 32 connections of the content source ÷ 32 per import" in notes, notes
        else:  # 8 an import: as many at once as the first guess allows, or more; nothing to say
            assert "content imports" not in notes, notes
