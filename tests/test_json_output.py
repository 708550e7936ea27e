"""`--json` through the installed console script: stdout is exactly one JSON document that
matches the command's schema (`syncd/schemas/`), human text goes to stderr, and the exit
code is the one the command has without `--json`.

One emulator process for the module (a small generated tenant), and `syncd` as a process of
its own for every command that reports: the installed console script for one (`orgs --json`),
forked from the suite's CLI zygote for the others (tests/cli_zygote.py: the same `main`, without
an interpreter start each). The commands that keep state (sync, diff, status, the
write side, the daemon's runs) run on both backends (`backend`: the SQLite file in the state
directory, then a PostgreSQL schema in `SYNCD_STATE_URL`); the others run once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from syncd.commands.machine_output import schema_names
from syncd.state import StateStore
from tests.console_script import run_installed
from tests.hostile.cli_support import EmulatorProcess, Ran, module_emulator, run_cli, tenant_env
from tests.schema_support import check_output
from tests.state_support import is_pg, use_backend

GENERATE = "orgs=2,empty_orgs=4,collections=2,spaces=3,pages=2,files=1,sites=1,members=2,teams=1"


emulator = module_emulator(GENERATE)


@dataclass(frozen=True)
class Home:
    """A syncd's working directory (its state directory is `dir/state`) and where its state is."""

    dir: Path
    state: Path | str

    def env(self, url: str) -> dict[str, str]:
        """The environment of its commands: tenant `src` at `url`; clean_env drops SYNCD_*, so a
        PostgreSQL state's URL is given again."""
        env = tenant_env(url, self.dir / "state")
        if is_pg(self.state):
            env["SYNCD_STATE_URL"] = str(self.state)
        return env


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """Shared by the tests that keep no state."""
    path = tmp_path_factory.mktemp("json-output")
    return Home(path, path / "state" / "syncd.db")


@pytest.fixture
def home(backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Home:
    """A test's own working directory, its state on `backend`."""
    return Home(tmp_path, use_backend(backend, request, monkeypatch, tmp_path / "state"))


def syncd(emulator: EmulatorProcess, home: Home, *args: str | Path, installed: bool = False) -> Ran:
    """`syncd ARGS` as a process of its own; through the installed console script when `installed`."""
    run = run_installed if installed else run_cli
    ran = run(*args, env=home.env(emulator.url), cwd=home.dir)
    ran.assert_clean()
    return ran


def json_of(name: str, ran: Ran, code: int = 0) -> dict:
    """The one document on stdout, valid against schemas/NAME.json; the exit code is `code`."""
    assert ran.code == code, ran.show()
    document = check_output(name, ran.stdout)
    assert isinstance(document, dict)
    return document


def test_read_side_json(emulator: EmulatorProcess, home: Home) -> None:
    first = json_of("sync", syncd(emulator, home, "sync", "src", "--json"))
    assert first["status"] == "complete" and first["scope"] == "src" and first["objects"] > 0
    assert first["changes"]["space"] == {"created": 6}
    space = emulator.items(f"/v1/orgs/{emulator.org_ids[0]}/spaces")[0]
    renamed = f"{space['title']}, renamed for JSON"  # (the emulator is the module's: each backend renames anew)
    emulator.call("PATCH", f"/v1/spaces/{space['id']}", {"title": renamed})
    second = json_of("sync", syncd(emulator, home, "sync", "src", "--json"))
    assert second["run"] == first["run"] + 1 and second["changes"]["space"] == {"updated": 1}

    diff = json_of("diff", syncd(emulator, home, "diff", "--json"))
    assert (diff["from"], diff["to"]) == (first["run"], second["run"])
    assert [(c["op"], c["title"]) for c in diff["changes"] if c["kind"] == "space"] == [("updated", renamed)]

    status = json_of("status", syncd(emulator, home, "status", "--json"))
    assert [run["id"] for run in status["runs"]] == [first["run"], second["run"]]


def test_backup_and_export_json(emulator: EmulatorProcess, workdir: Home) -> None:
    """A backup file and its export: the artifact, not the state (once)."""
    backup = json_of("backup", syncd(emulator, workdir, "backup", "src", "--out", "b.db", "--with-files", "--json"))
    assert backup["file"] == "b.db" and backup["files"]["failed"] == {} and backup["files"]["downloaded"] > 0
    assert backup["emptier"] is None and backup["held_objects"] == backup["objects"]

    export = json_of("export", syncd(emulator, workdir, "export", "b.db", "exported", "--json"))
    assert export["spaces"] == 6 and export["missing_binaries"] == [] and export["written"] == export["files"] + 1


def test_orgs_json_and_table(emulator: EmulatorProcess, workdir: Home) -> None:
    listed = json_of("orgs", syncd(emulator, workdir, "orgs", "src", "--json", installed=True))
    assert [(org["id"], org["title"], org["spaces"]) for org in listed["organizations"]] == [
        (emulator.org_ids[0], "Organization 1", 3), (emulator.org_ids[1], "Organization 2", 3),
        *((org_id, f"Organization {number}", 0) for number, org_id in enumerate(emulator.org_ids[2:], 3)),
    ]  # fmt: skip
    assert len(listed["organizations"]) == 6
    table = syncd(emulator, workdir, "orgs", "src")
    assert table.code == 0 and all(org_id in table.stdout for org_id in emulator.org_ids), table.show()


def test_config_check_json(emulator: EmulatorProcess, workdir: Home) -> None:
    checked = json_of("config-check", syncd(emulator, workdir, "config", "check", "--online", "--json"))
    assert checked["tenants"]["src"]["token"] == "********" and checked["online"]["src"]["ok"] is True
    assert checked["online"]["src"]["user"]["displayName"] == "Emulator Admin"


def test_partial_sync_keeps_exit_3_and_one_document(emulator: EmulatorProcess, home: Home) -> None:
    """A listing that fails: exit 3 as without --json, the warning on stderr, stdout still one document."""
    emulator.call("PUT", "/_emulator/forbidden", {"patterns": [r"/v1/orgs/[^/]+/teams"]})
    try:
        ran = syncd(emulator, home, "sync", "src", "--json")
    finally:
        emulator.call("PUT", "/_emulator/forbidden", {"patterns": []})
    document = json_of("sync", ran, code=3)
    assert document["status"] == "partial" and document["failed_listings"] == 6 and len(document["errors"]) == 6  # teams of 6 orgs
    assert "partial run" in ran.stderr and "could not read" in ran.stderr
    with StateStore(home.state, readonly=True) as mirror:
        assert [(run["id"], run["status"]) for run in mirror.runs()] == [(document["run"], "partial")]


def test_every_schema_is_a_valid_draft_2020_12_schema() -> None:
    from jsonschema import Draft202012Validator

    names = schema_names()
    assert {"sync", "diff", "status", "backup", "export"} <= set(names)
    for name in names:
        document = json.loads((Path(__file__).parents[1] / "syncd" / "schemas" / f"{name}.json").read_text())
        Draft202012Validator.check_schema(document)
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema" and document.get("title"), name


def test_schemas_are_package_data() -> None:
    """An installed (not editable) package has them: pyproject's package-data covers each file."""
    import fnmatch
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["syncd"]
    names = schema_names()
    assert {"sync", "diff", "status", "backup", "export", "mirror-plan"} <= set(names), names
    for name in names:
        assert any(fnmatch.fnmatch(f"schemas/{name}.json", pattern) for pattern in patterns), name


def test_daemon_commands_json(emulator: EmulatorProcess, home: Home) -> None:
    """On PostgreSQL the daemon is a fleet replica (it inherits SYNCD_STATE_URL from use_backend)."""
    from tests.daemon_support import DaemonProcess, daemon_config
    from tests.hostile.cli_support import TOKEN, clean_env

    config = daemon_config(
        home.dir, emulator.url, TOKEN, retry={"max_attempts": 2, "initial_wait": "0.1s", "max_wait": "0.5s"},
        daemon={"port": 0, "shutdown_deadline": "10s"}, jobs=[{"name": "sync", "kind": "sync", "source": "src"}],
    )  # fmt: skip
    daemon = DaemonProcess.start(config, home.dir / "state")
    try:
        same_state = {"SYNCD_STATE_URL": str(home.state)} if is_pg(home.state) else {}

        def cli(*args: str) -> Ran:
            ran = run_cli(*args, "--config", config, env=clean_env(**same_state), cwd=home.dir)
            ran.assert_clean()
            return ran

        waited = cli("trigger", "sync", "--wait", "--json")
        ended = json_of("trigger", waited)
        assert ended["status"] == "started" and ended["run"]["outcome"] == "succeeded" and ended["run"]["seconds"] is not None
        assert f"run #{ended['run']['id']} started" in waited.stderr  # the human line, on stderr
        with StateStore(home.state, readonly=True) as mirror:  # the job synced into the backend's state
            assert [(run["job"], run["status"]) for run in mirror.runs()] == [("sync", "complete")]
        started = json_of("trigger", cli("trigger", "sync", "--json"))
        assert started["run"]["job"] == "sync" and started["run"]["id"] > ended["run"]["id"]
        jobs = json_of("jobs", cli("jobs", "--json"))
        (job,) = jobs["jobs"]
        assert job["name"] == "sync" and job["schedule"] == "on trigger only" and job["last_success_at"] is not None
    finally:
        daemon.stop()


def test_write_side_json(emulator: EmulatorProcess, home: Home) -> None:
    """`mirror apply` and `restore` through the installed script (`mirror plan` and `verify`:
    tests/test_plan_review.py). Into two organizations still empty (the other backend's run
    filled two others), with a state of its own."""
    source = emulator.org_ids[0]
    target, restored_into = [org for org in emulator.org_ids if not emulator.items(f"/v1/orgs/{org}/spaces")][:2]
    applied = json_of("mirror-apply", syncd(emulator, home, "mirror", "apply", f"src:{source}", f"src:{target}", "--json"))
    assert applied["equal"] is True and applied["writes"] > 0 and applied["mode"] == "copy"
    json_of("backup", syncd(emulator, home, "backup", f"src:{source}", "--out", "one.db", "--json"))
    restored = json_of("restore", syncd(emulator, home, "restore", "one.db", f"src:{restored_into}", "--json"))
    assert restored["equal"] is True and restored["writes"] > 0
