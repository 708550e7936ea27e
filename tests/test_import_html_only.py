"""Content through any website importer (issue 40): a backup whose pages use every block of the
platform's markdown restores through an importer that reads only the HTML and keeps the title's
`<h1>` in the content (rows `import-reads-markdown-alternate` and `import-first-heading`, both
divergent), and through the default one that reads the markdown alternate and drops it.

What must hold whichever importer the service has: the restore ends equal (exit 0) in one round
of imports, every page carries its title once, every page says what the source's says (words
and structure: `syncd.copy.meaning`), every file is there once, and a second restore writes
nothing. The property test (`tests/test_profile_property.py`) plays the same under random mixes
of the open points, with a cross-token copy beside the restore.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncd.cli import main
from syncd.copy.meaning import meaning
from tests.cli_zygote import emulator_process
from tests.loopback import EmulatorClient

TOKEN = "html-only-token"
SPEC = "orgs=1,empty_orgs=2,collections=2,spaces=4,pages=4,files=2"
BLOCKS = {
    "a hint": r"\{%\s*hint\b",
    "tabs": r"\{%\s*tabs\s*%\}",
    "a code block with a title": r"\{%\s*code\b[^%]*title=",
    "a code block with a language": r"^```[A-Za-z]",
    "a table": r"^\|.*\|\s*$",
    "an image with a caption": r"<figcaption>",
    "an expandable": r"<details>",
    "an embed": r"\{%\s*embed\b",
    "math": r"\$\$",
    "a link to a page": r"\]\((?!https?:|\.gitbook/|#)[^)\s]+\)",
    "a link to a file": r"\]\(\.gitbook/assets/[^)]+\)",
}
"""The blocks real pages of the platform carry, as its markdown writes them: the generated
organization must use each of them somewhere."""


@pytest.fixture(params=["divergent", "default"])
def emulator(request: pytest.FixtureRequest) -> Iterator[EmulatorClient]:
    with emulator_process(token=TOKEN, spec=SPEC, seed=40, rate=0, profile=request.param) as running:
        client = EmulatorClient(running.url, running.report, TOKEN)
        expected = "divergent" if request.param == "divergent" else "default"
        assert client.profile_row("import-reads-markdown-alternate") == expected
        assert client.profile_row("import-first-heading") == expected
        yield client


@pytest.fixture
def env(emulator: EmulatorClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNCD_TENANTS__EMU__BASE_URL", emulator.url)
    monkeypatch.setenv("SYNCD_TENANTS__EMU__TOKEN", TOKEN)
    monkeypatch.setenv("SYNCD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("SYNCD_STATE_URL", raising=False)
    return tmp_path


def pages_of(emulator: EmulatorClient, org: str) -> dict[str, dict[str, Any]]:
    """The organization's pages by their path in the canonical dump (collections, space, pages)."""
    dump = emulator.admin("GET", f"/_emulator/orgs/{org}/dump")
    return {row["path"]: row["data"] for row in dump["kinds"]["page"]}


def files_of(emulator: EmulatorClient, org: str) -> list[str]:
    dump = emulator.admin("GET", f"/_emulator/orgs/{org}/dump")
    return sorted(row["path"] for row in dump["kinds"]["file"])


def title_headings(page: dict[str, Any]) -> int:
    """How often the page's markdown has its own title as a level-1 heading."""
    title = " ".join(str(page["title"]).split())
    found = re.findall(r"^\s{0,3}#\s+(.*?)\s*#*\s*$", page.get("markdown") or "", flags=re.M)
    return sum(1 for text in found if " ".join(text.split()) == title)


def restore(backup: Path, org: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["restore", str(backup), f"emu:{org}", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_every_block_restores_through_the_importer_the_service_has(
    emulator: EmulatorClient, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = emulator.orgs[0], emulator.orgs[1]
    source_pages = pages_of(emulator, src)
    everything = "\n".join(page.get("markdown") or "" for page in source_pages.values())
    missing = [name for name, pattern in BLOCKS.items() if not re.search(pattern, everything, flags=re.M)]
    assert not missing, f"the generated pages use no {', '.join(missing)}"
    assert any(title_headings(page) == 1 for page in source_pages.values())  # pages that begin with their title, as real ones do

    backup = env / "backup.db"
    assert main(["backup", f"emu:{src}", "--out", str(backup), "--with-files"]) == 0
    done = restore(backup, dst, capsys)
    assert done["equal"], done["verification"]
    assert len([r for r in done["rounds"] if (r["apply"] or {}).get("writes")]) == 1, done["rounds"]  # one round of imports, nothing after

    target_pages = pages_of(emulator, dst)
    assert sorted(target_pages) == sorted(source_pages)  # every page, where the source has it
    for path, page in target_pages.items():
        assert title_headings(page) <= 1, f"{path}: the title twice:\n{page.get('markdown')}"
        said, source = meaning(page.get("markdown"), page["title"]), meaning(source_pages[path].get("markdown"), page["title"])
        assert said == source, f"{path}: the words or structure differ"
    target_files = files_of(emulator, dst)
    assert target_files == files_of(emulator, src)
    assert not [name for name, n in Counter(target_files).items() if n > 1]  # every file once

    writes = emulator.writes()
    again = restore(backup, dst, capsys)
    assert again["equal"] and again["writes"] == 0 and emulator.writes() == writes  # a second restore sends nothing
