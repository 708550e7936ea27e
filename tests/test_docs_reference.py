"""The reference pages cannot drift from the code (issue 42): every command, option and argument
`--help` lists, every setting of the models and of the example configurations, every route of
the control API, every metric and every `--json` schema is on its page, with a description.

What each test expects is read from the code or the files directly (the help as printed, the
models' fields, the TOML files, the route tables, the registry, the schema folder), not from
the generators, so a generator that skips something fails here. No server is started.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from syncd.cli import main
from syncd.reference.cli import cli_reference
from syncd.reference.metrics import metrics_reference
from syncd.reference.routes import routes_reference
from syncd.reference.schemas import schemas_reference
from syncd.reference.settings import settings_reference

ROOT = Path(__file__).resolve().parent.parent


def _sections(page: str, level: str) -> dict[str, str]:
    """The page's sections at heading `level` (`##`), by their heading's text without backticks."""
    found: dict[str, str] = {}
    for chunk in re.split(rf"^{level} ", page, flags=re.MULTILINE)[1:]:
        heading, _, body = chunk.partition("\n")
        found[heading.strip().strip("`").strip()] = body
    return found


def _description_of(body: str) -> str:
    """A setting's, route's or metric's description: the text between its heading and its facts."""
    text = body.split("\n- Type:", 1)[0].split("\nNeeds:", 1)[0]
    return " ".join(text.split())


# ----- the command line -------------------------------------------------------------------------


def _panel_rows(text: str) -> list[tuple[str, list[str]]]:
    """Each row of `--help`'s panels: the panel's title (Options, Arguments, Commands) and the
    row's leading cells (names, short names, value type, help text), split at runs of spaces."""
    rows: list[tuple[str, list[str]]] = []
    panel = ""
    for line in text.splitlines():
        if line.startswith("╭"):
            panel = line.strip("╭╮─ ")
            continue
        if not line.startswith("│ "):
            continue
        rest = line[2:].rstrip("│ ")
        rest = rest[1:] if rest.startswith("*") else rest  # a required one
        if not rest.strip() or len(rest) - len(rest.lstrip()) > 5:
            continue  # the next line of a help text: names start at most 5 in (after the column of `*`)
        rows.append((panel, re.split(r"\s{2,}", rest.strip())))
    return rows


def _cells(row: str) -> list[str]:
    """A markdown table row's cells: split at each pipe that is neither escaped nor in a code span."""
    cells, current, in_code, previous = [], "", False, ""
    for char in row.strip()[1:-1]:
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code and previous != "\\":
            cells.append(current.strip())
            current = ""
        else:
            current += char
        previous = char
    return [*cells, current.strip()]


def _documented(body: str) -> dict[str, str]:
    """A command's section of the CLI reference: each name of its tables' rows -> the row's description."""
    rows: dict[str, str] = {}
    for line in body.splitlines():
        if line.startswith("| ") and not line.startswith("| Name |"):
            cells = _cells(line)
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = cells[2]
    return rows


def _help_of(path: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*path, "--help"]) == 0, path
    return capsys.readouterr().out


def test_every_command_option_and_argument_help_lists_is_in_the_cli_reference(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # a row a line: no name wraps
    sections = _sections(cli_reference(), "##")
    pending: list[list[str]] = [[]]
    seen = {"Options": 0, "Arguments": 0, "Commands": 0}
    while pending:
        path = pending.pop(0)
        name = " ".join(["syncd", *path])
        assert name in sections, f"{name} is not in the CLI reference"
        body = sections[name]
        assert body.split("```text", 1)[0].strip(), f"{name} has no description in the CLI reference"
        documented = _documented(body)
        for panel, cells in _panel_rows(_help_of(path, capsys)):
            seen[panel] += 1
            if panel == "Commands":
                pending.append([*path, cells[0]])
                assert f"`{cells[0]}`](#" in body, f"{name}: command {cells[0]} is not listed"
                continue
            names = [cell for cell in cells if cell.startswith("-")] if panel == "Options" else cells[:1]
            assert names, (name, panel, cells)
            for listed in (part for cell in names for part in cell.split("/")):
                assert listed in documented, f"{name}: {listed} is not in the CLI reference"
                assert documented[listed], f"{name}: {listed} has no description in the CLI reference"
    assert seen["Options"] > 100 and seen["Arguments"] > 10 and seen["Commands"] > 20, seen  # the walk read the panels


# ----- the configuration ------------------------------------------------------------------------

# Each settings model of syncd.config and where its keys are in the file: a new model must be
# placed here (the test fails until it is), and then its keys must be on the page.
KEY_PREFIXES = {
    "Settings": "",
    "RetryConfig": "retry.",
    "TenantConfig": "tenants.NAME.",
    "DaemonConfig": "daemon.",
    "ContentSourceConfig": "content_source.",
    "FleetConfig": "fleet.",
    "Schedule": "jobs[].schedule.",
    "JobBase": "jobs[].",
    "SyncJob": "jobs[].",
    "BackupJob": "jobs[].",
    "MirrorJob": "jobs[].",
    "ExportJob": "jobs[].",
    "StorageConfig": "storage.NAME.",
}


def _settings_models() -> list[type[BaseModel]]:
    import importlib
    import pkgutil

    import syncd.config

    found: dict[str, type[BaseModel]] = {}
    for module_info in pkgutil.iter_modules(syncd.config.__path__):
        module = importlib.import_module(f"syncd.config.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__ and value.model_fields:
                found[value.__name__] = value
    return list(found.values())


def _setting_sections() -> dict[str, str]:
    return _sections(settings_reference(), "###")


def test_every_setting_of_every_model_is_in_the_configuration_reference() -> None:
    sections = _setting_sections()
    models = _settings_models()
    assert {model.__name__ for model in models} == set(KEY_PREFIXES), "place each settings model in KEY_PREFIXES"
    for model in models:
        for name in model.model_fields:
            key = KEY_PREFIXES[model.__name__] + name
            assert key in sections, f"{model.__name__}.{name}: {key} is not in the configuration reference"
            body = sections[key]
            assert _description_of(body), f"{key} has no description (a Field description or an attribute docstring)"
            for fact in ("- Type: ", "- Default: ", "- Environment: "):
                assert fact in body, (key, fact)


def _toml_keys(data: Any, prefix: str = "") -> set[str]:
    """The key paths of a TOML document, as the reference writes them (`tenants.NAME.token`, `jobs[].schedule.every`)."""
    keys: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}{key}"
            keys.add(path)
            if path in ("tenants", "storage") and isinstance(value, dict):  # tables by name: [tenants.NAME], [storage.NAME]
                for named in value.values():
                    keys |= _toml_keys(named, f"{path}.NAME.")
            elif isinstance(value, dict):
                keys |= _toml_keys(value, path + ".")
            elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
                for item in value:
                    keys |= _toml_keys(item, path + "[].")
    return keys


_COMMENTED_KEY = re.compile(r"^# ([a-z_]+) = ")
_TABLE = re.compile(r"^\[\[?([a-z_.]+)\]\]?")


def _commented_keys(text: str) -> set[str]:
    """The settings a file shows commented out (`# token = "..."` in `[daemon]`)."""
    keys, table = set(), ""
    for line in text.splitlines():
        header = _TABLE.match(line)
        if header:
            name = header.group(1)
            named = next((f"{group}.NAME." for group in ("tenants", "storage") if name.startswith(f"{group}.")), None)
            table = "jobs[]." if line.startswith("[[") else (named or name + ".")
            continue
        found = _COMMENTED_KEY.match(line)
        if found:
            keys.add(table + found.group(1))
    return keys


EXAMPLES = sorted((ROOT / "config").glob("*.toml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_every_key_of_the_example_configurations_is_in_the_configuration_reference(example: Path) -> None:
    sections = _setting_sections()
    text = example.read_text(encoding="utf-8")
    keys = _toml_keys(tomllib.loads(text)) | _commented_keys(text)
    assert len(keys) > 10
    missing = sorted(key for key in keys if key not in sections)
    assert not missing, f"{example.name}: not in the configuration reference: {missing}"
    assert all(_description_of(sections[key]) for key in keys)


def test_secrets_show_no_value_in_the_configuration_reference() -> None:
    sections = _setting_sections()
    for key in ("tenants.NAME.token", "daemon.token", "state_url"):
        assert "- Default: none (a secret: its value is never shown)" in sections[key], key
    assert "SYNCD_TENANTS__NAME__TOKEN" in sections["tenants.NAME.token"]
    assert "in `SYNCD_JOBS`" in sections["jobs[].schedule.every"]


# ----- the control API, the metrics, the schemas ------------------------------------------------


def _declared_routes() -> list[tuple[str, str]]:
    """(method, path) of every route the control API and its page declare."""
    from syncd.daemon import control
    from syncd.daemon.ui import pages

    found = []
    for table, prefix in ((control.routes, ""), (pages.routes, "/ui")):
        for route in table:
            path = re.sub(r"\{(\w+):.*\}", r"{\1}", route.path)  # `{id:[0-9]{1,18}}` is answered as `{id}`
            found.append((route.method, prefix + path))
    return found


def test_every_route_of_the_control_api_is_in_its_reference() -> None:
    sections = _sections(routes_reference(), "###")
    declared = _declared_routes()
    assert len(declared) > 20
    for method, path in declared:
        heading = f"{method} {path}"
        assert heading in sections, f"{heading} is not in the control API reference"
        assert _description_of(sections[heading]), f"{heading} has no description (its handler's docstring)"
        assert "Needs: " in sections[heading]
    assert "nothing" in sections["GET /healthz"].split("Needs:")[1] and "bearer" in sections["GET /jobs"].split("Needs:")[1]
    assert "GET /ui/static/{file}" in sections


def test_every_metric_is_in_its_reference() -> None:
    from syncd.daemon.metrics import DaemonMetrics

    sections = _sections(metrics_reference(), "###")
    families = [family for family in DaemonMetrics().registry.collect() if family.name.startswith("syncd_")]
    assert len(families) > 10
    for family in families:
        assert family.name in sections, f"{family.name} is not in the metrics reference"
        assert family.documentation.strip(), f"{family.name} has no HELP text"
        assert " ".join(family.documentation.split()) in _description_of(sections[family.name]).replace("\\", ""), family.name


def test_every_schema_is_in_the_json_output_reference() -> None:
    import json

    page = schemas_reference()
    sections = _sections(page, "##")
    files = sorted((ROOT / "syncd" / "schemas").glob("*.json"))
    assert len(files) > 10
    for path in files:
        schema = json.loads(path.read_text(encoding="utf-8"))
        assert schema["title"] in sections, f"{path.name} is not in the JSON output reference"
        body = sections[schema["title"]]
        assert f"`syncd/schemas/{path.name}`" in body
        assert schema["description"].split()[0] in body
        for field in schema.get("properties", {}):
            assert f"| `{field}` |" in body, (path.name, field)
