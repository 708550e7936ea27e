"""`syncd orgs TENANT`, and organizations addressed by their exact title (`src:Organization 1`)
where unambiguous: an id always wins, a shared title is refused with the candidates' ids.
The CLI in-process against an emulator served by a thread. The tests whose commands keep
syncd's state (`stored`) run on both backends: a SQLite file, then PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syncd.cli import main
from syncd.state import StateStore
from tests.state_support import use_backend
from tests.thread_emulator import ThreadEmulator, module_thread_emulator, use_tenants

SPEC = "orgs=2,empty_orgs=1,collections=1,spaces=2,pages=1"


emulator = module_thread_emulator(SPEC)


@pytest.fixture
def env(emulator: ThreadEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    use_tenants(monkeypatch, emulator.url, tmp_path / "state", "SRC", "DST")
    monkeypatch.setenv("SYNCD_LOG_LEVEL", "warning")
    monkeypatch.setenv("COLUMNS", "120")
    return tmp_path


@pytest.fixture
def stored(env: Path, backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path | str:
    """Where the commands keep syncd's state, on `backend`."""
    return use_backend(backend, request, monkeypatch, env / "state")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def scope_refs(db: Path | str) -> list[str]:
    with StateStore(db, readonly=True) as mirror:
        return [run["scope_ref"] for run in mirror.runs()]


def test_orgs_lists_what_the_token_sees(env: Path, emulator: ThreadEmulator, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, empty = emulator.org_ids
    code, out, err = run(capsys, "orgs", "src")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.split() and line.split()[0] in emulator.org_ids]
    assert rows == [[first, "Organization", "1", "2"], [second, "Organization", "2", "2"], [empty, "Organization", "3", "0"]]
    monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", "org2-token")  # its owner sees one organization
    code, out, _ = run(capsys, "orgs", "src", "--json")
    assert code == 0 and json.loads(out) == {"tenant": "src", "organizations": [{"id": second, "title": "Organization 2", "spaces": 2}]}
    monkeypatch.setenv("SYNCD_TENANTS__SRC__TOKEN", "not-a-token")
    code, out, err = run(capsys, "orgs", "src")
    assert code == 1 and out == "" and err.count("\n") == 1 and "401" in err and "not-a-token" not in err
    code, _, err = run(capsys, "orgs", f"src:{first}")
    assert code == 2 and "syncd orgs TENANT" in err


def test_a_title_addresses_its_organization(env: Path, stored: Path | str, emulator: ThreadEmulator, capsys: pytest.CaptureFixture[str]) -> None:
    first, second, _ = emulator.org_ids
    assert run(capsys, "sync", "src:Organization 1")[0] == 0
    assert run(capsys, "sync", f"src:{first}")[0] == 0  # the same scope: an unchanged re-sync of it
    assert scope_refs(stored) == [f"src:{first}", f"src:{first}"]
    code, out, err = run(capsys, "backup", "src:Organization 2", "--out", "two.db", "--json")
    assert code == 0, err
    assert json.loads(out)["scope"] == f"src:{second}" and scope_refs(env / "two.db") == [f"src:{second}"]
    code, _, err = run(capsys, "sync", "src:Organization 9")
    assert code == 2 and err.strip().splitlines() == [
        "syncd: error: organization 'Organization 9' not found on tenant 'src' (no id or title the token can see; `syncd orgs src` lists them)"
    ]


# One backend: its one sync goes to a SQLite file of its own (--db), not to syncd's state.
def test_a_shared_title_is_refused_and_an_id_wins(env: Path, emulator: ThreadEmulator, capsys: pytest.CaptureFixture[str]) -> None:
    first, second, empty = emulator.org_ids
    emulator.api("PATCH", f"/v1/orgs/{empty}", {"title": "Organization 2"})
    try:
        code, _, err = run(capsys, "sync", "src:Organization 2")
        assert code == 2 and err.strip().splitlines() == [
            f"syncd: error: 2 organizations on tenant 'src' are titled 'Organization 2': {', '.join(sorted([second, empty]))}; "
            "address one by its id"
        ]
        emulator.api("PATCH", f"/v1/orgs/{empty}", {"title": first})  # titled like another organization's id
        assert run(capsys, "sync", f"src:{first}", "--db", "id.db")[0] == 0
        assert scope_refs(env / "id.db") == [f"src:{first}"]  # the id, not the organization titled so
    finally:
        emulator.api("PATCH", f"/v1/orgs/{empty}", {"title": "Organization 3"})


@pytest.mark.usefixtures("stored")  # the plan reads both sides into the state
def test_mirror_sides_are_addressed_by_title(env: Path, emulator: ThreadEmulator, capsys: pytest.CaptureFixture[str]) -> None:
    first, _, empty = emulator.org_ids
    code, out, err = run(capsys, "mirror", "plan", "src:Organization 1", "dst:Organization 3", "--json")
    assert code == 2, err  # changes pending: the empty organization lacks everything
    assert json.loads(out)
    code, _, err = run(capsys, "mirror", "plan", "src:Organization 1", f"src:{first}")
    assert code == 2 and "the source and the target are the same organization" in err


def test_orgs_into_a_narrow_pipe_prints_every_id_whole(env: Path, emulator: ThreadEmulator) -> None:
    """`syncd orgs src | cat` with COLUMNS=30 (a process of its own, not on a terminal): each
    organization a line, its id and title whole, where a terminal that narrow folds them."""
    from tests.hostile.cli_support import clean_env, run_cli
    from tests.thread_emulator import TOKEN

    tenant = {"SYNCD_TENANTS__SRC__BASE_URL": emulator.url, "SYNCD_TENANTS__SRC__TOKEN": TOKEN, "SYNCD_LOG_LEVEL": "warning"}
    ran = run_cli("orgs", "src", env=clean_env(COLUMNS="30", **tenant), cwd=env)
    assert ran.code == 0, ran.show()
    rows = [line.split() for line in ran.stdout.splitlines() if line.split() and line.split()[0] in emulator.org_ids]
    first, second, empty = emulator.org_ids
    assert rows == [[first, "Organization", "1", "2"], [second, "Organization", "2", "2"], [empty, "Organization", "3", "0"]], ran.show()
