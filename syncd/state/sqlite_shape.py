"""Whether a file's schema is the one syncd's migrations made: a file is syncd's only then.

Why: SQLite runs what a file's schema says whenever a table is read. A backup whose `resources`
is a view over an endless recursive query passes `PRAGMA quick_check` (a view has no pages),
then every read of it runs for ever; a generated column runs its expression on each read, a
trigger its body on each write. A file names its migrations in `migrations`, but anyone can
write that table. So the schema is compared with the one those migrations make (built once in
memory by `sqlite_schema.made_shape`):

- each table they make is an ordinary table (not a view, not a virtual table) with the columns
  they made: names, declared types, NOT NULL, defaults, key, none hidden or generated;
- each view they make (`current_resources`) is theirs, word for word;
- no other view, and no trigger (syncd makes none).

What else a file may hold is let be: tables and indexes of its own (syncd never reads them;
an index is read only as a copy of its table's values) and SQLite's statistics (`ANALYZE`).
The migrations must be a prefix of syncd's, in order: a released syncd applies nothing else.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["Shape", "shape_of", "what_differs"]


@dataclass(frozen=True)
class Shape:
    """What of a schema syncd compares: its tables' columns, its views' SQL, its triggers,
    by lower-case name (SQLite's names are case-insensitive)."""

    tables: dict[str, tuple[tuple[object, ...], ...]]
    """Table -> its columns as `PRAGMA table_xinfo` gives them (name, type, notnull, default,
    pk, hidden), in order."""
    kinds: dict[str, str]
    """Name -> `table`, `virtual table`, `view` or `index` (one namespace in SQLite)."""
    views: dict[str, str]
    """View -> its SQL, blanks made one space."""
    triggers: list[str]
    """The triggers' names (a namespace of their own: a trigger may share a table's name)."""
    names: dict[str, str]
    """Lower-case name -> the name as the schema writes it."""


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _named(name: str) -> str:
    """A name from the file, as a message shows it: bounded (the line's control characters go
    where every error line goes, `syncd.cli.error_lines`)."""
    return name if len(name) <= 80 else name[:77] + "..."


def _words(sql: str | None) -> str:
    return re.sub(r"\s+", " ", sql or "").strip()


def shape_of(conn: sqlite3.Connection, columns_of: Collection[str] | None = None) -> Shape:
    """The shape of the main schema of `conn` (reading `sqlite_master` and the tables' columns:
    nothing in the schema runs); the columns of the tables `columns_of` names (lower case), or
    of every table."""
    tables: dict[str, tuple[tuple[object, ...], ...]] = {}
    kinds: dict[str, str] = {}
    views: dict[str, str] = {}
    triggers: list[str] = []
    names: dict[str, str] = {}
    for kind, name, sql in conn.execute("SELECT type, name, sql FROM main.sqlite_master").fetchall():
        if kind == "trigger":
            triggers.append(str(name))
            continue
        key = str(name).lower()
        names[key] = str(name)
        if kind == "table" and _words(sql).upper().startswith("CREATE VIRTUAL TABLE"):
            kind = "virtual table"
        kinds[key] = str(kind)
        if kind == "table" and (columns_of is None or key in columns_of):
            columns = conn.execute(f"PRAGMA main.table_xinfo({_quoted(str(name))})").fetchall()
            tables[key] = tuple(tuple(column[1:]) for column in columns)
        elif kind == "view":
            views[key] = _words(sql)
    return Shape(tables, kinds, views, triggers, names)


def what_differs(actual: Shape, expected: Shape) -> str | None:
    """What in `actual` is not as syncd makes it (the first thing, as a clause), or None."""
    for key, columns in expected.tables.items():
        name = expected.names[key]
        kind = actual.kinds.get(key)
        if kind is None:
            return f"it lacks the table {name}"
        if kind != "table":
            return f"its {name} is a {kind}, where syncd makes a table"
        found = actual.tables[key]
        if found != columns:
            made = {column[0]: column for column in columns}
            there = {column[0]: column for column in found}
            differ = sorted({n for n in made.keys() | there.keys() if made.get(n) != there.get(n)}, key=str)
            shown = ", ".join(_named(str(n)) for n in differ[:5]) + (", ..." if len(differ) > 5 else "")
            return f"its table {name} has other columns than syncd makes ({shown or 'their order'})"
    for key, sql in expected.views.items():
        if actual.kinds.get(key) != "view" or actual.views.get(key) != sql:
            return f"its view {expected.names[key]} is not the one syncd makes"
    for key, kind in actual.kinds.items():
        if kind == "view" and key not in expected.views:
            return f"it has a view {_named(actual.names[key])}, syncd makes none of that name"
    for trigger in actual.triggers:
        if trigger not in expected.triggers:
            return f"it has a trigger {_named(trigger)}, syncd makes none"
    return None
