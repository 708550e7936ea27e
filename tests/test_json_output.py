"""`--json` through the installed console script: stdout is exactly one JSON document that
matches the command's schema (`syncd/schemas/`), human text goes to stderr, and the exit
code is the one the command has without `--json`.

One emulator process for the module (a small generated tenant), and the real `syncd`
script for every command that reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syncd.machine_output import schema_names
from tests.console_script import run_installed
from tests.hostile.cli_support import EmulatorProcess, Ran, module_emulator, tenant_env
from tests.schema_support import check_output

GENERATE = "orgs=2,empty_orgs=2,collections=2,spaces=3,pages=2,files=1,sites=1,members=2,teams=1"


emulator = module_emulator(GENERATE)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("json-output")


def syncd(emulator: EmulatorProcess, workdir: Path, *args: str | Path) -> Ran:
    ran = run_installed(*args, env=tenant_env(emulator.url, workdir / "state"), cwd=workdir)
    ran.assert_clean()
    return ran


def json_of(name: str, ran: Ran, code: int = 0) -> dict:
    """The one document on stdout, valid against schemas/NAME.json; the exit code is `code`."""
    assert ran.code == code, ran.show()
    document = check_output(name, ran.stdout)
    assert isinstance(document, dict)
    return document


def test_read_side_json(emulator: EmulatorProcess, workdir: Path) -> None:
    first = json_of("sync", syncd(emulator, workdir, "sync", "src", "--json"))
    assert first["status"] == "complete" and first["scope"] == "src" and first["objects"] > 0
    assert first["changes"]["space"] == {"created": 6}
    emulator.call("PATCH", f"/v1/spaces/{emulator.items(f'/v1/orgs/{emulator.org_ids[0]}/spaces')[0]['id']}", {"title": "Renamed for JSON"})
    second = json_of("sync", syncd(emulator, workdir, "sync", "src", "--json"))
    assert second["run"] == first["run"] + 1 and second["changes"]["space"] == {"updated": 1}

    diff = json_of("diff", syncd(emulator, workdir, "diff", "--json"))
    assert (diff["from"], diff["to"]) == (first["run"], second["run"])
    assert [(c["op"], c["title"]) for c in diff["changes"] if c["kind"] == "space"] == [("updated", "Renamed for JSON")]

    status = json_of("status", syncd(emulator, workdir, "status", "--json"))
    assert [run["id"] for run in status["runs"]] == [first["run"], second["run"]]

    backup = json_of("backup", syncd(emulator, workdir, "backup", "src", "--out", "b.db", "--with-files", "--json"))
    assert backup["file"] == "b.db" and backup["files"]["failed"] == {} and backup["files"]["downloaded"] > 0
    assert backup["emptier"] is None and backup["held_objects"] == backup["objects"]

    export = json_of("export", syncd(emulator, workdir, "export", "b.db", "exported", "--json"))
    assert export["spaces"] == 6 and export["missing_binaries"] == [] and export["written"] == export["files"] + 1


def test_orgs_json_and_table(emulator: EmulatorProcess, workdir: Path) -> None:
    listed = json_of("orgs", syncd(emulator, workdir, "orgs", "src", "--json"))
    assert [(org["id"], org["title"], org["spaces"]) for org in listed["organizations"]] == [
        (emulator.org_ids[0], "Organization 1", 3), (emulator.org_ids[1], "Organization 2", 3),
        (emulator.org_ids[2], "Organization 3", 0), (emulator.org_ids[3], "Organization 4", 0),
    ]  # fmt: skip
    table = syncd(emulator, workdir, "orgs", "src")
    assert table.code == 0 and all(org_id in table.stdout for org_id in emulator.org_ids), table.show()


def test_config_check_json(emulator: EmulatorProcess, workdir: Path) -> None:
    checked = json_of("config-check", syncd(emulator, workdir, "config", "check", "--online", "--json"))
    assert checked["tenants"]["src"]["token"] == "********" and checked["online"]["src"]["ok"] is True
    assert checked["online"]["src"]["user"]["displayName"] == "Emulator Admin"


def test_partial_sync_keeps_exit_3_and_one_document(emulator: EmulatorProcess, workdir: Path) -> None:
    """A listing that fails: exit 3 as without --json, the warning on stderr, stdout still one document."""
    emulator.call("PUT", "/_emulator/forbidden", {"patterns": [r"/v1/orgs/[^/]+/teams"]})
    try:
        ran = syncd(emulator, workdir, "sync", "src", "--db", "partial.db", "--json")
    finally:
        emulator.call("PUT", "/_emulator/forbidden", {"patterns": []})
    document = json_of("sync", ran, code=3)
    assert document["status"] == "partial" and document["failed_listings"] == 4 and len(document["errors"]) == 4  # teams of 4 orgs
    assert "partial run" in ran.stderr and "could not read" in ran.stderr


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
    for name in schema_names():
        assert any(fnmatch.fnmatch(f"schemas/{name}.json", pattern) for pattern in patterns), name


def test_daemon_commands_json(emulator: EmulatorProcess, workdir: Path) -> None:
    from tests.daemon_support import DaemonProcess, daemon_config
    from tests.hostile.cli_support import TOKEN, clean_env

    home = workdir / "daemon"
    home.mkdir()
    config = daemon_config(
        home, emulator.url, TOKEN, retry={"max_attempts": 2, "initial_wait": "0.1s", "max_wait": "0.5s"},
        daemon={"port": 0, "shutdown_deadline": "10s"}, jobs=[{"name": "sync", "kind": "sync", "source": "src"}],
    )  # fmt: skip
    daemon = DaemonProcess.start(config, home / "state")
    try:

        def cli(*args: str) -> Ran:
            ran = run_installed(*args, "--config", config, env=clean_env(), cwd=home)
            ran.assert_clean()
            return ran

        waited = cli("trigger", "sync", "--wait", "--json")
        ended = json_of("trigger", waited)
        assert ended["status"] == "started" and ended["run"]["outcome"] == "succeeded" and ended["run"]["seconds"] is not None
        assert f"run #{ended['run']['id']} started" in waited.stderr  # the human line, on stderr
        started = json_of("trigger", cli("trigger", "sync", "--json"))
        assert started["run"]["job"] == "sync" and started["run"]["id"] > ended["run"]["id"]
        jobs = json_of("jobs", cli("jobs", "--json"))
        (job,) = jobs["jobs"]
        assert job["name"] == "sync" and job["schedule"] == "on trigger only" and job["last_success_at"] is not None
    finally:
        daemon.stop()


def test_readme_links_every_schema() -> None:
    """The README's "Machine output" section names each document's schema, and the links resolve."""
    import re

    root = Path(__file__).parents[1]
    readme = (root / "README.md").read_text()
    section = readme.split("## Machine output", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\]\(syncd/schemas/([\w-]+)\.json\)", section))
    assert linked == set(schema_names()), (sorted(linked), schema_names())
    assert all((root / "syncd" / "schemas" / f"{name}.json").is_file() for name in linked)


def test_write_side_json(emulator: EmulatorProcess, tmp_path: Path) -> None:
    """`mirror apply` and `restore` through the installed script (`mirror plan` and `verify`:
    tests/test_plan_review.py). Into the two empty organizations, with a state folder of its own."""
    source, _, target, restored_into = emulator.org_ids
    applied = json_of("mirror-apply", syncd(emulator, tmp_path, "mirror", "apply", f"src:{source}", f"src:{target}", "--json"))
    assert applied["equal"] is True and applied["writes"] > 0 and applied["mode"] == "copy"
    json_of("backup", syncd(emulator, tmp_path, "backup", f"src:{source}", "--out", "one.db", "--json"))
    restored = json_of("restore", syncd(emulator, tmp_path, "restore", "one.db", f"src:{restored_into}", "--json"))
    assert restored["equal"] is True and restored["writes"] > 0
