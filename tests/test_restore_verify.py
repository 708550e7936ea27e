"""`syncd mirror verify FILE.db TENANT:ORG` (issue 39): an organization compared with the
backup a restore wrote into it, through the ids that restore recorded, long after the restore's
own closing verify has ended. The real CLI against an emulator process under `default`,
`divergent` and a `mixed` profile: a backup, a restore into an empty organization addressed by
its title, then the verify command the restore printed, pasted as printed; then one page
changed on the target, as a user of the app would, and the verify names that page. A verify
against an organization no restore of the file wrote says so in one line (exit 2).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncd.commands.invocation import syncd_command

from tests.cli_zygote import emulator_process
from tests.loopback import EmulatorClient
from tests.schema_support import check_output
from tests.state_support import is_pg, use_backend
from tests.test_plan_review import run as syncd
from tests.thread_emulator import use_tenants

SPEC = "orgs=1,empty_orgs=2,collections=2,spaces=3,pages=3,files=1,sites=1,sections=2"
PROFILES = ["default", "divergent", "mixed:39"]


@pytest.fixture(params=PROFILES)
def emulator(request: pytest.FixtureRequest) -> Iterator[EmulatorClient]:
    with emulator_process(token="all", spec=SPEC, seed=39, rate=0, profile=request.param) as running:
        yield EmulatorClient(running.url, running.report, "all")


@pytest.fixture
def env(emulator: EmulatorClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory (with a space in its name: every path printed must be quoted) and
    one tenant, `emu`, on the emulator."""
    work = tmp_path / "my work"
    work.mkdir()
    monkeypatch.chdir(work)
    use_tenants(monkeypatch, emulator.url, work / "state", "EMU", token="all")
    monkeypatch.setenv("NO_COLOR", "1")
    return work


def backed_up(emulator: EmulatorClient, env: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    backup = env / "acme backup.db"
    code, out, err = syncd(capsys, "backup", f"emu:{emulator.orgs[0]}", "--out", str(backup), "--with-files")
    assert code == 0, out + err
    return backup


def title_of(emulator: EmulatorClient, org: str) -> str:
    return str(emulator.api("GET", f"/v1/orgs/{org}")["title"])


def a_page(emulator: EmulatorClient, org: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A space of the organization and its first page."""
    for space in emulator.api("GET", f"/v1/orgs/{org}/spaces?limit=1000")["items"]:
        pages = emulator.api("GET", f"/v1/spaces/{space['id']}/content/pages")["pages"]
        if pages:
            return space, pages[0]
    raise AssertionError(f"no page in {org}")


def test_a_restore_is_verified_against_its_backup_with_the_command_it_printed(
    emulator: EmulatorClient, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backup = backed_up(emulator, env, capsys)
    dst = emulator.orgs[1]
    target = f"emu:{title_of(emulator, dst)}"  # "emu:Organization 2": by title, as people type it
    code, out, err = syncd(capsys, "restore", str(backup), target)
    assert code == 0, out + err
    hint = out.strip().splitlines()[-1]
    command = f"{syncd_command()} " + shlex.join(["mirror", "verify", str(backup), target])  # syncd as this shell reaches it
    assert hint.endswith(f": {command}"), hint
    pasted = shlex.split(hint.split(": ", 1)[1])

    code, out, err = syncd(capsys, *pasted[1:])
    assert code == 0, out + err
    assert out.strip().splitlines()[-1].endswith(": equal"), out
    code, out, _ = syncd(capsys, *pasted[1:], "--json")
    verified = check_output("mirror-verify", out)
    assert code == 0 and verified["equal"] and verified["verification"]["counts"]["identical"] > 0
    assert verified["source"] == str(backup)

    space, page = a_page(emulator, dst)  # edited in the target, as a user of the app would
    emulator.admin("PATCH", f"/_emulator/spaces/{space['id']}/pages/{page['id']}", {"markdown": "Rewritten after the restore.\n"})
    code, out, err = syncd(capsys, *pasted[1:])
    assert code == 1, out + err
    different = [line for line in out.splitlines() if line.startswith("* ")]
    assert different and all(line.startswith(f"* space {space['title']!r}") for line in different), out
    assert f"differ (markdown): {page['title']}" in out, out  # the page, by its title
    assert not out.strip().splitlines()[-1].endswith(": equal"), out

    code, out, _ = syncd(capsys, *pasted[1:], "--json")
    verified = check_output("mirror-verify", out)
    assert code == 1 and not verified["equal"]
    (entry,) = verified["verification"]["different"]
    assert (entry["kind"], entry["title"], entry["target_id"]) == ("space", space["title"], space["id"])
    assert list(entry["fields"]) == ["pages"] and page["title"] in entry["fields"]["pages"]["source"]


@pytest.mark.parametrize("emulator", ["default"], indirect=True)
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_a_verify_of_a_backup_no_restore_wrote_says_what_to_run(
    emulator: EmulatorClient, env: Path, store: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = use_backend(store, request, monkeypatch, env / "state")
    backup = backed_up(emulator, env, capsys)
    restored, other = emulator.orgs[1], emulator.orgs[2]

    code, _, err = syncd(capsys, "mirror", "verify", str(backup), f"emu:{other}")
    assert code == 2 and err.count("\n") == 1, err
    assert "no restore of" in err and f"{syncd_command()} restore {shlex.quote(str(backup))} emu:{other}" in err, err
    assert is_pg(state) or not Path(state).exists()  # a verify that has nothing to compare makes no state file

    code, out, err = syncd(capsys, "restore", str(backup), f"emu:{restored}", "--json")
    assert code == 0 and check_output("restore", out)["equal"], err  # the hint goes to stderr, stdout is the document
    assert err.strip().splitlines()[-1].endswith(f": {syncd_command()} mirror verify {shlex.quote(str(backup))} emu:{restored}"), err
    assert syncd(capsys, "mirror", "verify", str(backup), f"emu:{restored}")[0] == 0
    for args in (
        [f"emu:{other}"],  # restored into another organization, not this one
        [f"emu:{restored}", "--db", str(env / "elsewhere.db")],  # not the state the restore used
    ):
        code, _, err = syncd(capsys, "mirror", "verify", str(backup), *args, "--json")
        assert code == 2 and err.count("\n") == 1 and "no restore of" in err and "--db" in err, err

    # Argument checks as restore's: a file that is not there, a PostgreSQL URL, --org with a live source.
    code, _, err = syncd(capsys, "mirror", "verify", "missing.db", f"emu:{restored}")
    assert code == 2 and "no such backup file" in err, err
    code, _, err = syncd(capsys, "mirror", "verify", "postgresql://db.example/syncd", f"emu:{restored}")
    assert code == 2 and "reads a backup file" in err, err
    code, _, err = syncd(capsys, "mirror", "verify", f"emu:{emulator.orgs[0]}", f"emu:{restored}", "--org", "x")
    assert code == 2 and "--org" in err, err
