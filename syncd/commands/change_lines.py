"""Changes of the mirror as lines a person reads: what was created, deleted, moved from
where to where, and for an update each field old → new.

Why lines and not a table: an update's fields and a move's two places do not fit columns at
80 characters. The lines hold text from the server (titles, field values): print them
through `syncd.safe_text` (never as markup).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from syncd.safe_text import clean
from syncd.state.diff import MAX_VALUE

__all__ = ["CHANGES_SHOWN", "FIELDS_SHOWN", "change_lines", "value_text"]

CHANGES_SHOWN = 50
"""Changes listed unless `--all`: the summary table above counts them all."""
FIELDS_SHOWN = 8
"""Fields listed per update unless `--all`."""
_MARKS = {"created": "+", "updated": "~", "moved": "→", "deleted": "-"}

Locate = Callable[[str, str | None], str]
"""(tenant, id of a parent) -> `Org / Collection`, see `StateStore.location`."""


def value_text(value: Any, cut: bool = False) -> str:
    """A field value: a string in double quotes (as text: no control characters, see
    `syncd.safe_text.clean`), anything else as JSON, so `""`, `null` and `"null"` read apart.
    A `cut` value is already the start of the JSON (see syncd.state.diff.MAX_VALUE)."""
    if cut and isinstance(value, str) and value.endswith("…") and len(value) == MAX_VALUE + 1:
        return clean(value)
    if isinstance(value, str):
        return f'"{clean(value)}"'
    return clean(json.dumps(value, ensure_ascii=False, sort_keys=True))


def _field_line(row: Mapping[str, Any]) -> str:
    cut = bool(row.get("cut"))
    old = "(absent)" if row.get("absent") == "old" else value_text(row.get("old"), cut)
    new = "(absent)" if row.get("absent") == "new" else value_text(row.get("new"), cut)
    return f"    {row['field']}: {old} → {new}"


def _head(change: Mapping[str, Any]) -> str:
    title = change.get("title")
    named = f" {value_text(str(title))}" if title is not None else ""
    return f"{_MARKS.get(change['op'], '?')} {change['op']} {change['kind']}{named} ({change['id']})"


def _move(change: Mapping[str, Any], locate: Locate) -> str:
    tenant = change["tenant"]
    before, after = change.get("old_parent_id"), change.get("parent_id")
    if before != after:
        line = f"    from {locate(tenant, before) or '(top)'} → to {locate(tenant, after) or '(top)'}"
        if change.get("old_position") is not None or change.get("position") is not None:
            line += f", position {change.get('old_position')} → {change.get('position')}"
        return line
    where = locate(tenant, after)
    return f"    position {change.get('old_position')} → {change.get('position')}" + (f" in {where}" if where else "")


def _details(change: Mapping[str, Any], locate: Locate, every: bool) -> list[str]:
    op = change["op"]
    if op == "moved":
        return [_move(change, locate)]
    if op in ("created", "deleted"):
        where = locate(change["tenant"], change.get("parent_id"))
        return [f"    {'in' if op == 'created' else 'was in'} {where}"] if where else []
    fields = change.get("fields")
    if fields is None:
        return ["    (which fields changed was not recorded: the state file is older than this syncd)"]
    shown = fields if every else fields[:FIELDS_SHOWN]
    lines = [_field_line(row) for row in shown]
    more = len(fields) - len(shown) + int(change.get("fields_omitted") or 0)
    if more:
        lines.append(f"    ... and {more} more field(s)" + ("" if every or len(fields) <= FIELDS_SHOWN else " (--all shows them)"))
    return lines


def change_lines(changes: Sequence[Mapping[str, Any]], locate: Locate, *, every: bool = False) -> list[str]:
    """The lines of `changes` (rows of `StateStore.diff`): at most CHANGES_SHOWN changes and
    FIELDS_SHOWN fields each unless `every`, then one line that says how many were left out."""
    shown = changes if every else changes[:CHANGES_SHOWN]
    lines: list[str] = []
    for change in shown:
        lines.append(_head(change))
        lines.extend(_details(change, locate, every))
    if len(shown) < len(changes):
        lines.append(f"... and {len(changes) - len(shown)} more change(s) (--all shows them all, --json as JSON)")
    return lines
