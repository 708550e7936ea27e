"""The `--json` output's reference page, read from the JSON Schemas the package ships
(`syncd/schemas/*.json`, the ones the tests validate every command's output against): per
document its command, description, top-level fields and the whole schema.
"""

from __future__ import annotations

import json
from typing import Any

from syncd.commands.machine_output import schema, schema_names
from syncd.reference.markdown import cell, code, paragraphs, table

__all__ = ["schemas_reference"]

INTRO = """\
Every command that reports takes `--json`. With it, stdout carries exactly one JSON document
(ASCII, indented; nothing before or after it), so `syncd sync src --json | jq .status` works
whatever happened; progress, warnings and the lines about what could not be read go to
stderr, and the exit status is the one the command has without `--json` (a partial sync still
exits 3, with its document). On an error there is no document: stderr has the one line
(`config check --json` lists a configuration's problems in its document).

Each document has a JSON Schema (draft 2020-12) in `syncd/schemas/`, installed with the package
(`importlib.resources.files("syncd") / "schemas"`); the test suite validates every command's
output against it. This page is generated from those files when the site is built: for each, the
fields at the top of the document, then the whole schema. `syncd emulator serve --json` prints
its start-up report as one JSON line, without a schema.
"""


def _type(spec: dict[str, Any]) -> str:
    """A property's type in a few words: `integer`, `string or null`, `one of "a", "b"`, `array of object`."""
    if "const" in spec:
        return "always " + code(json.dumps(spec["const"]))
    if "enum" in spec:
        return "one of " + ", ".join(code(json.dumps(value)) for value in spec["enum"])
    if "$ref" in spec:
        return code(spec["$ref"].rsplit("/", 1)[-1]) + " (see the schema)"
    for combined in ("oneOf", "anyOf"):
        if combined in spec:
            return " or ".join(_type(option) for option in spec[combined])
    kind = spec.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array" and isinstance(spec.get("items"), dict):
        return "array of " + _type(spec["items"])
    return str(kind) if kind else "any"


def _fields(document: dict[str, Any]) -> str:
    required = set(document.get("required", []))
    rows = [
        [code(name), cell(_type(spec)), "yes" if name in required else "", cell(spec.get("description", ""))]
        for name, spec in document.get("properties", {}).items()
    ]
    return table(["Field", "Type", "Always there", "Description"], rows) if rows else ""


def _section(name: str) -> str:
    document = schema(name)
    whole = json.dumps(document, indent=2, ensure_ascii=False)
    parts = [
        f"## {code(document.get('title', name))}",
        paragraphs(document.get("description", "")),
        f"Schema: {code(f'syncd/schemas/{name}.json')}" + (f", {code(document['$id'])}" if "$id" in document else ""),
        _fields(document),
        '??? note "The whole schema"\n\n' + "\n".join("    " + line for line in ["```json", *whole.splitlines(), "```"]),
    ]
    return "\n\n".join(part for part in parts if part)


def schemas_reference() -> str:
    """The page: an introduction, then a section per schema, by file name."""
    return "# JSON output\n\n" + INTRO + "\n" + "\n\n".join(_section(name) for name in schema_names()) + "\n"
