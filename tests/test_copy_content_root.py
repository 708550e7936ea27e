"""A space that must get new content by a fresh space, but that a target site shows at its root
beside sections: no site-space made through the API can stand there (one made without
`sectionId` goes to the default section, spec part 4), so syncd keeps the old space and says why
in one line, before it makes anything. Plays `divergent`, where a site's first section leaves
the root site-spaces where they are (row `first-section`) and an import adds to what a space
holds (row `import-existing-pages`): under `default` a site with sections has no root
site-spaces, and the content goes in place once the tenant is seen to replace.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from syncd.cli import main
from tests.cli_zygote import emulator_process
from tests.test_copy_content import SPEC, import_into, pages, spaces, website
from tests.test_copy_e2e import Emulator


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with emulator_process(token="all", spec=SPEC, seed=11, rate=0, profile="divergent") as running:
        yield Emulator(running.url, running.report, "all")


def test_a_space_at_the_root_of_a_site_with_sections_is_kept_and_said(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, token in (("ONE", "org1-token"), ("THREE", "org3-token")):
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__BASE_URL", emulator.url)
        monkeypatch.setenv(f"SYNCD_TENANTS__{name}__TOKEN", token)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    src, dst = emulator.orgs[0], emulator.orgs[2]
    listed = spaces(emulator, src, "org1-token")
    rooted, other = listed[0], listed[1]
    site = emulator.api("POST", f"/v1/orgs/{src}/sites", {"title": "Rooted docs", "spaces": [rooted["id"]]}, token="org1-token")["id"]
    emulator.api("POST", f"/v1/orgs/{src}/sites/{site}/sections", {"spaceId": other["id"], "title": "Guides"}, token="org1-token")
    assert main(["mirror", "apply", f"one:{src}", f"three:{dst}"]) == 0, capsys.readouterr().out
    target = next(s for s in spaces(emulator, dst, "org3-token") if s["title"] == rooted["title"])

    with website("# Release notes\n\nNew words.\n") as url:
        import_into(emulator, rooted["id"], url)
    capsys.readouterr()
    assert main(["mirror", "apply", f"one:{src}", f"three:{dst}"]) == 1  # partial: the space is not replaced
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "at the root of site" in line)
    assert "which has sections: a new space cannot be put there" in line and "content is not replaced" in line
    now = [s for s in spaces(emulator, dst, "org3-token") if s["title"] == rooted["title"]]
    assert [s["id"] for s in now] == [target["id"]]  # the old space is kept, and no fresh one is left
    assert "Release notes" not in pages(emulator, target["id"], "org3-token")
