"""`--include` / `--exclude` on the commands that read or copy, and how a scoped command tells
what it left out and what it found outside its scope (`syncd.scope`, `syncd.selection`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer
from rich.console import Console

from syncd.safe_text import markup
from syncd.scope import Scope
from syncd.selection import Dependency

__all__ = ["ExcludeOption", "IncludeOption", "SHOWN", "print_scope", "scope_from", "scope_json"]

SHOWN = 20
"""Dependencies printed (all of them are in --json)."""

IncludeOption = typer.Option(
    [], "--include", metavar="PATTERN",
    help="Only collections, spaces and sites whose path (Collection/Sub/Space; a site: its title) matches this glob "
    "(*, **, ?, \\[abc], {a,b}; a leading / anchors at the root). Repeatable.",
)  # fmt: skip
ExcludeOption = typer.Option(
    [], "--exclude", metavar="PATTERN",
    help="Leave out collections, spaces and sites whose path matches this glob (and what is under them). Repeatable; wins over --include.",
)  # fmt: skip


def scope_from(include: Sequence[str] | None, exclude: Sequence[str] | None) -> Scope:
    """The scope of the options; ScopeError (exit 2, one line) for a pattern that cannot be read."""
    return Scope.parse(include or (), exclude or ())


def print_scope(console: Console, scope: Scope, dependencies: Sequence[Dependency], left_out: int | None = None) -> None:
    """One line for the scope, then a warning per dependency outside it (the first SHOWN)."""
    if scope.everything:
        return
    left = f": {left_out} object(s) read and left out" if left_out else ""
    console.print(f"scope: {markup(scope.describe())}{left}")
    for dependency in dependencies[:SHOWN]:
        console.print(f"  [yellow]warning:[/yellow] {markup(dependency.line())}", soft_wrap=True)
    if len(dependencies) > SHOWN:
        console.print(f"  ... and {len(dependencies) - SHOWN} more")


def scope_json(scope: Scope, dependencies: Sequence[Dependency], left_out: int | None = None) -> dict[str, Any]:
    """The keys a scoped command adds to its --json document: `include` and `exclude` (the
    patterns, empty lists for everything), `dependencies` (each `{kind, path, needs_kind,
    needs, reason}`) and, for a crawl, `left_out` (rows read and not recorded)."""
    out: dict[str, Any] = {**scope.to_json(), "dependencies": [d.to_json() for d in dependencies]}
    if left_out is not None:
        out["left_out"] = left_out
    return out
