"""Checking `--json` output against the JSON Schemas syncd ships (`syncd/schemas/`).

`one_document(stdout)` is the document a command printed, and fails unless stdout holds
exactly one JSON document (no human line before or after it); `assert_valid(name, doc)`
validates it against `syncd/schemas/<name>.json` (draft 2020-12, formats checked) and lists
every mismatch at once."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

from syncd.commands.machine_output import schema


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schema(name), format_checker=FormatChecker())


def one_document(stdout: str) -> Any:
    """The one JSON document `stdout` holds (json.loads refuses anything before or after it)."""
    assert stdout.strip(), "nothing on stdout"
    try:
        return json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"stdout is not exactly one JSON document ({exc}):\n{stdout[:2000]}") from None


def assert_valid(name: str, document: Any) -> None:
    """`document` matches `syncd/schemas/<name>.json`; else every mismatch, with its place."""
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    problems = [f"  {'/'.join(map(str, e.absolute_path)) or '$'}: {e.message[:300]}" for e in errors]
    assert not problems, f"--json output does not match schemas/{name}.json:\n" + "\n".join(problems[:40])


def check_output(name: str, stdout: str) -> Any:
    """`one_document(stdout)`, validated against schema `name`: the document."""
    document = one_document(stdout)
    assert_valid(name, document)
    return document
