"""`--json`: what a command reports, as one JSON document on stdout, for scripts and `jq`.

The rule every reporting command follows: with `--json`, stdout carries exactly one JSON
document (a stream would be JSON lines) and nothing else; progress, warnings and errors go to
stderr (`human_console`), so `syncd sync src --json | jq .status` works whatever happened;
exit codes are the same as without `--json`. Each document has a JSON Schema (draft
2020-12) in `syncd/schemas/<command>.json`, shipped in the package (`schema`), and the
JSON output reference (docs: Reference › JSON output) shows each. `json.dumps` escapes every
control character (ASCII output), so server text is safe in it as it is.
"""

from __future__ import annotations

import json
import sys
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

from rich.console import Console

from syncd.safe_text import console as make_console

__all__ = ["emit", "human_console", "schema", "schema_file", "schema_names"]


def emit(document: Any) -> None:
    """Write `document` to stdout as the command's one JSON document."""
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    sys.stdout.flush()


def human_console(as_json: bool, console: Console | None = None) -> Console:
    """Where a command's human text goes: `console` (stdout) normally, stderr with `--json`."""
    if as_json:
        return make_console(stderr=True)
    return console if console is not None else make_console()


def schema_file(name: str) -> Traversable:
    """`syncd/schemas/<name>.json` inside the installed package."""
    return files("syncd").joinpath("schemas", f"{name}.json")


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the `--json` output of command `name` (`sync`, `config-check`...)."""
    return json.loads(schema_file(name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def schema_names() -> list[str]:
    """Every schema the package ships, by name."""
    return sorted(entry.name.removesuffix(".json") for entry in files("syncd").joinpath("schemas").iterdir() if entry.name.endswith(".json"))
