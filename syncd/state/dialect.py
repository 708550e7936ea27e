"""The few SQL statements that differ between the SQLite state file and the PostgreSQL state.

Why one module: the StateStore, its merge and the write side's journal write SQL both engines
accept (`ON CONFLICT`, explicit columns, `?` and `:name` placeholders: the PostgreSQL handle
translates those, see `syncd.state.pg_database`). What cannot be written once lives here, and the
SQLite text is exactly what it was before the second backend, so SQLite plans do not change:

- null-safe comparison: SQLite `a IS b` / `a IS NOT b`, PostgreSQL `IS [NOT] DISTINCT FROM`;
- a JSON field: SQLite `json_extract(d, '$.a.b')` (typed), PostgreSQL `d #>> '{a,b}'` (text);
- `rowid` (SQLite only): the listing-driven deletion and the cascade update through it on
  SQLite, through `UPDATE ... FROM` on PostgreSQL;
- `ORDER BY +kind` (an SQLite index hint, `sorted_by`) and NULLs first (SQLite's order, `NULLS FIRST` on
  PostgreSQL, whose ascending order puts them last);
- the column types of the tables (`syncd.state.tables`, written once in neutral words): values
  must come back as SQLite gives them, so code above the store does not know its backend.
  Text is `COLLATE "C"` on PostgreSQL (byte order, as SQLite sorts and compares); JSON is `json`
  there, which keeps the text as written (key order, spacing) and checks it is JSON, as the
  `json_valid` CHECK does on SQLite; integers are 64-bit on both; timestamps stay ISO text.
  An object's JSON (`PACKED`, `resources.data` since SQLite's migration 0006) is a BLOB or
  text on SQLite (`syncd.state.packing`: packed by `syncd_pack` as the merge stores it, read
  through `syncd_json`), `json` on PostgreSQL, where nothing is packed (`stored_value`,
  `stored_json`); `BLOB` is bytes (`bytea` on PostgreSQL).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["POSTGRES", "SQLITE", "Dialect", "json_path"]

_COLUMN = re.compile(r"(\w+) (ID|INTEGER|TEXT|JSON|PACKED|BLOB)(.*)", re.DOTALL)
"""A column of `syncd.state.tables`: its name, its neutral type, the rest (constraints)."""
_TITLE_FIELDS = ("title", "name", "label", "displayName", "user.displayName", "email", "user.email", "path")


def json_path(field: str) -> str:
    """`a.b` -> `$."a"."b"`: a JSON path that survives odd characters in key names (SQLite)."""
    return "$" + "".join('."' + part.replace('"', '\\"') + '"' for part in field.split("."))


@dataclass(frozen=True)
class Dialect:
    """What differs between the engines; `SQLITE` and `POSTGRES` are the two instances."""

    name: str
    run_listings: str
    """The table of the listings a running run read: SQLite's writer keeps them apart from the
    file's `listings` (`syncd.state.tables.apart`), which holds the failed ones once a run ends."""
    is_: str
    is_not: str
    current_order: str
    delete_missing: str
    cascade: str
    id_type: str
    """`ID`: a key that only grows (never reused after a delete), given when the row is made."""
    integer_type: str
    text_type: str
    json_type: str
    packed_type: str
    blob_type: str

    @property
    def sqlite(self) -> bool:
        return self.name == "sqlite"

    def column(self, definition: str) -> str:
        """A column of `syncd.state.tables` (`name TYPE constraints`, TYPE one of ID, INTEGER,
        TEXT, JSON, PACKED, BLOB) in this engine's words; on SQLite a JSON column is text checked
        by `json_valid`, a PACKED one a BLOB (its JSON is checked before it is packed)."""
        found = _COLUMN.fullmatch(definition)
        if found is None:
            raise ValueError(f"not a column of syncd.state.tables: {definition!r}")
        name, word, rest = found.groups()
        typed = {"ID": self.id_type, "INTEGER": self.integer_type, "TEXT": self.text_type, "JSON": self.json_type,
                 "PACKED": self.packed_type, "BLOB": self.blob_type}[word]
        if word != "JSON" or not self.sqlite:
            return f"{name} {typed}{rest}"
        valid = f"json_valid({name})" if "NOT NULL" in rest else f"{name} IS NULL OR json_valid({name})"
        return f"{name} {typed}{rest} CHECK ({valid})"

    def stored_value(self, kind: str, column: str) -> str:
        """SQL of the value to store in `resources.data` for the JSON in `column` of an object
        of the kind in `kind` (SQL too): packed on SQLite, as it is on PostgreSQL."""
        return f"syncd_pack({kind}, {column})" if self.sqlite else column

    def stored_json(self, column: str) -> str:
        """SQL of the JSON text of a stored object's `column` (packed or not on SQLite; text
        is taken as it is without a call of the Python function: a title reads it up to eight
        times, and a first crawl's merge titles every object)."""
        return f"CASE WHEN typeof({column}) = 'blob' THEN syncd_json({column}) ELSE {column} END" if self.sqlite else column

    def hex_hash(self, column: str) -> str:
        """SQL true when `column` holds a hash in the form of before SQLite's migration 0008
        (PostgreSQL's "mirror-0003"): 64 lowercase hex characters (`syncd.state.rows`)."""
        if self.sqlite:
            return f"(length({column}) = 64 AND {column} NOT GLOB '*[^0-9a-f]*')"
        return f"(length({column}) = 64 AND {column} ~ '^[0-9a-f]*$')"

    def stored_of_hex(self, column: str) -> str:
        """SQL of the stored form of the hex hash in `column`: its first 16 bytes as base64url
        without padding (`syncd.state.rows.stored_of_hex`). SQLite has no base64: Python's
        function, `syncd_stored_hash` (`syncd.state.packing.install_plain`)."""
        if self.sqlite:
            return f"syncd_stored_hash({column})"
        return f"rtrim(translate(encode(decode(left({column}, 32), 'hex'), 'base64'), '+/', '-_'), '=')"

    def sorted_by(self, column: str) -> str:
        """`column` as an ORDER BY term that no index may give in order (`+column` on SQLite):
        without statistics SQLite would rather walk the primary key in that order through a
        whole tenant than search the partial index that finds the few rows asked for and sort
        them (the merge's deleted rows: a tenant's every row read at each merge, issue 44)."""
        return f"+{column}" if self.sqlite else column

    def json_text(self, column: str, field: str) -> str:
        """The SQL value of `field` (dotted, plain key names) of the JSON in `column`."""
        if self.sqlite:
            return f"json_extract({column}, '$.{field}')"
        return f"({column} #>> '{{{','.join(field.split('.'))}}}')"

    def title(self, column: str) -> str:
        """A person's name for the object whose JSON is in `column` (first field present)."""
        return "coalesce(" + ", ".join(self.json_text(column, field) for field in _TITLE_FIELDS) + ")"

    def field_value(self, column: str) -> str:
        """SQL taking one parameter, a dotted field name (see `field_param`): its value in `column`."""
        return f"json_extract({column}, ?)" if self.sqlite else f"({column} #> ?)"

    def field_param(self, field: str) -> Any:
        return json_path(field) if self.sqlite else field.split(".")

    def field_result(self, value: Any) -> Any:
        """The value `field_value` gave, as SQLite's json_extract gives it: objects and lists
        as compact JSON text, true/false as 1/0, other scalars as they are."""
        if self.sqlite or value is None:
            return value
        decoded = json.loads(value)
        if isinstance(decoded, bool):
            return int(decoded)
        if isinstance(decoded, (dict, list)):
            return json.dumps(decoded, ensure_ascii=False, separators=(",", ":"))
        return decoded


SQLITE = Dialect(
    name="sqlite",
    run_listings="run_listings",
    is_="IS",
    is_not="IS NOT",
    # `+kind`: let SQLite pick the index that filters (org, parent, scope), not the one that
    # happens to match the ORDER BY, which would scan the whole tenant.
    current_order="ORDER BY +kind, parent_kind, parent_id, position, id",
    # A row missing from a list read cleanly in this run is gone.
    delete_missing="""UPDATE resources SET deleted_run = :run WHERE rowid IN (
           SELECT r.rowid FROM run_listings l
           CROSS JOIN resources r ON r.tenant = l.tenant AND r.listing = l.listing AND r.deleted_run IS NULL
           WHERE l.run = :run AND l.tenant = :tenant AND l.status = 'ok' AND r.last_seen_run != :run)""",
    # Children of a row deleted in this run are gone too, whatever happened to their lists.
    cascade="""
UPDATE resources SET deleted_run = :run WHERE rowid IN (
    SELECT c.rowid FROM resources p
    CROSS JOIN resources c ON c.tenant = p.tenant AND c.parent_id = p.id AND c.parent_kind = p.kind
    WHERE p.tenant = :tenant AND p.deleted_run = :run
      AND c.deleted_run IS NULL AND c.last_seen_run != :run)
""",
    id_type="INTEGER PRIMARY KEY AUTOINCREMENT",
    integer_type="INTEGER",
    text_type="TEXT",
    json_type="TEXT",
    packed_type="BLOB",
    blob_type="BLOB",
)

POSTGRES = Dialect(
    name="postgresql",
    run_listings="listings",
    is_="IS NOT DISTINCT FROM",
    is_not="IS DISTINCT FROM",
    current_order="ORDER BY kind, parent_kind NULLS FIRST, parent_id NULLS FIRST, position NULLS FIRST, id",
    delete_missing="""UPDATE resources r SET deleted_run = :run FROM listings l
           WHERE r.tenant = l.tenant AND r.listing = l.listing AND r.deleted_run IS NULL
             AND l.run = :run AND l.tenant = :tenant AND l.status = 'ok' AND r.last_seen_run != :run""",
    cascade="""UPDATE resources c SET deleted_run = :run FROM resources p
           WHERE p.tenant = :tenant AND p.deleted_run = :run
             AND c.tenant = p.tenant AND c.parent_id = p.id AND c.parent_kind = p.kind
             AND c.deleted_run IS NULL AND c.last_seen_run != :run""",
    id_type="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    integer_type="BIGINT",
    text_type='TEXT COLLATE "C"',
    json_type="JSON",
    packed_type="JSON",
    blob_type="BYTEA",
)
