"""The merge of a finished run into the current view, for either backend.

Why a module of its own: it is the heart of the mirror (what is created, updated, moved,
deleted, in ONE transaction that `StateStore.finish_run` holds), and its SQL is built once per
dialect (`syncd.state.dialect`): on SQLite it is the text it always was. The statements
take :run and :tenant.

An update records which fields changed (`diff.changed_fields`). On SQLite a Python SQL
function computes them inside the INSERT; PostgreSQL cannot call Python, so the updates are
inserted without them and their fields filled in before the new versions replace the old.

On SQLite the objects are packed as they become current (`syncd_pack`, `syncd.state.packing`),
with their kind's dictionary, trained first when the run staged enough objects of a kind that
has none (`syncd.state.dictionaries.for_run`); a row carried forward is packed already and
stays as it is. Titles and changed fields read them through `syncd_json`.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from syncd.ordering import moved_items
from syncd.state import dictionaries, packing
from syncd.state.dialect import Dialect
from syncd.state.diff import changed_fields
from syncd.state.tables import RESOURCES, index_name

__all__ = ["CHANGES_INSERT", "COLUMNS", "merge_run"]

COLUMNS = "tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash"

CHANGES_INSERT = (
    "INSERT INTO changes (run, tenant, kind, id, op, old_hash, new_hash, old_parent_id, parent_id, "
    "old_position, position, title) "
)

FIELDS_FUNCTION = "syncd_changed_fields"
"""SQL function (kind, old data, new data) -> the `fields` JSON of an update (see `fields_json`)."""


def fields_json(
    volatile: Mapping[str, Iterable[str]], packer: packing.Packer | None = None
) -> Callable[[str, Any, Any], str | None]:
    """The function that records what an update changed, `volatile` fields of each kind
    left out (they are left out of its hash too); `packer` unpacks stored values (SQLite).
    Never raises: a failure inside an SQL function would abort the merge, and a change without
    details is better than no run."""
    decode = packer.json_of if packer is not None else (lambda value: value)

    def fields(kind: str, old: Any, new: Any) -> str | None:
        try:
            changed, omitted = changed_fields(json.loads(decode(old)), json.loads(decode(new)), volatile.get(kind, ()))
            return json.dumps({"changed": changed, "omitted": omitted}, ensure_ascii=False, default=str)
        except (ValueError, TypeError, RecursionError, AttributeError, packing.PackedDataError):
            return None

    return fields


@dataclass(frozen=True)
class _Statements:
    changes: tuple[str, ...]  # created, updated, moved: before the new versions replace the old
    upsert: str
    delete_missing: str
    reordered_groups: str
    group_siblings: str
    after_deletions: tuple[str, ...]
    updated_fields: str  # PostgreSQL: the updates of this run with both versions


@functools.cache
def _statements(d: Dialect, quiet: frozenset[str] = frozenset()) -> _Statements:
    """The merge's statements; changes of `quiet` kinds are not inserted at all (they were
    inserted, then deleted: a tenth of a first crawl's merge)."""
    title = d.title(d.stored_json("s.data"))
    loud = _not_in("s.kind", quiet)
    fields = f"{FIELDS_FUNCTION}(s.kind, r.data, s.data)" if d.sqlite else "NULL"
    changes = (
        # New rows, and rows that come back after having been deleted.
        CHANGES_INSERT
        + f"""SELECT :run, s.tenant, s.kind, s.id, 'created', NULL, s.hash, NULL, s.parent_id, NULL, s.position,
              {title}
       FROM staged s LEFT JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
       WHERE s.run = :run AND (r.id IS NULL OR r.deleted_run IS NOT NULL){loud}
       ORDER BY s.kind, s.id""",
        # The previous version is at hand here: what changed is recorded with the change.
        "INSERT INTO changes (run, tenant, kind, id, op, old_hash, new_hash, old_parent_id, parent_id, "
        "old_position, position, title, fields) "
        + f"""SELECT :run, s.tenant, s.kind, s.id, 'updated', r.hash, s.hash, r.parent_id, s.parent_id,
              r.position, s.position, {title}, {fields}
       FROM staged s JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
       WHERE s.run = :run AND r.deleted_run IS NULL AND r.hash {d.is_not} s.hash{loud}
       ORDER BY s.kind, s.id""",
        # Moves to another parent; moves among the same siblings are found by `_reorders`.
        CHANGES_INSERT
        + f"""SELECT :run, s.tenant, s.kind, s.id, 'moved', r.hash, s.hash, r.parent_id, s.parent_id,
              r.position, s.position, {title}
       FROM staged s JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
       WHERE s.run = :run AND r.deleted_run IS NULL
         AND (r.parent_id {d.is_not} s.parent_id OR r.parent_kind {d.is_not} s.parent_kind){loud}
       ORDER BY s.kind, s.id""",
    )
    # Everything seen becomes current (first_seen_run is kept for rows seen before).
    upsert = f"""INSERT INTO resources ({COLUMNS}, first_seen_run, last_seen_run, deleted_run)
        SELECT {COLUMNS.replace(" data,", " " + d.stored_value("kind", "data") + ",")}, run, run, NULL
        FROM staged WHERE run = :run AND true
        ON CONFLICT (tenant, kind, id) DO UPDATE SET
            org = excluded.org, parent_kind = excluded.parent_kind, parent_id = excluded.parent_id,
            position = excluded.position, listing = excluded.listing, scope = excluded.scope,
            data = excluded.data, hash = excluded.hash, last_seen_run = excluded.last_seen_run,
            deleted_run = NULL"""
    # Sibling groups whose order changed: (kind, parent_kind, parent_id).
    reordered = f"""
SELECT DISTINCT s.kind, s.parent_kind, s.parent_id
FROM staged s JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
WHERE s.run = :run AND r.deleted_run IS NULL AND r.parent_id {d.is_} s.parent_id
  AND r.parent_kind {d.is_} s.parent_kind AND r.position {d.is_not} s.position{loud}
"""
    # The siblings of one group that kept their parent, in their new order, with both positions.
    siblings = f"""
SELECT s.id, r.position AS old_position, s.position, r.hash, s.hash AS new_hash, s.parent_id,
       {title} AS title
FROM staged s JOIN resources r ON r.tenant = s.tenant AND r.kind = s.kind AND r.id = s.id
WHERE s.run = :run AND s.kind = :kind AND s.parent_kind {d.is_} :parent_kind AND s.parent_id {d.is_} :parent_id
  AND r.deleted_run IS NULL AND r.parent_id {d.is_} s.parent_id AND r.parent_kind {d.is_} s.parent_kind
  AND s.position IS NOT NULL AND r.position IS NOT NULL
ORDER BY s.position, s.id
"""
    after = (
        CHANGES_INSERT
        + f"""SELECT :run, tenant, kind, id, 'deleted', hash, NULL, parent_id, parent_id, position, position,
              {d.title(d.stored_json("data"))}
       FROM resources WHERE tenant = :tenant AND deleted_run = :run{_not_in("kind", quiet)}
       ORDER BY {d.sorted_by("kind")}, id""",
        # A scope that lost rows must be read again, unless this run read it completely.
        """DELETE FROM scopes WHERE tenant = :tenant AND scope IN (
           SELECT DISTINCT scope FROM resources
           WHERE tenant = :tenant AND deleted_run = :run AND scope IS NOT NULL)""",
        """INSERT INTO scopes (tenant, scope, token, run)
       SELECT tenant, scope, token, run FROM staged_scopes WHERE run = :run AND true
       ON CONFLICT (tenant, scope) DO UPDATE SET token = excluded.token, run = excluded.run""",
    )
    updated_fields = """
SELECT c.seq, c.kind, r.data, s.data
FROM changes c
JOIN staged s ON s.run = c.run AND s.tenant = c.tenant AND s.kind = c.kind AND s.id = c.id
JOIN resources r ON r.tenant = c.tenant AND r.kind = c.kind AND r.id = c.id
WHERE c.run = :run AND c.op = 'updated'
"""
    return _Statements(changes, upsert, d.delete_missing, reordered, siblings, after, updated_fields)


def _not_in(column: str, kinds: frozenset[str]) -> str:
    """` AND column NOT IN ('a', 'b')` (kind names are the catalog's: quoted all the same)."""
    if not kinds:
        return ""
    names = ", ".join("'" + kind.replace("'", "''") + "'" for kind in sorted(kinds))
    return f" AND {column} NOT IN ({names})"


def merge_run(
    db: Any,
    dialect: Dialect,
    run: int,
    tenant: str,
    volatile: Mapping[str, Iterable[str]],
    quiet: frozenset[str] = frozenset(),
    *,
    staged: int,
) -> None:
    """Record the changes of `run` and make what it read current; inside the caller's
    transaction (`db` is the StateStore's database handle). Kinds in `quiet` are made current
    without changes recorded; `staged`: the rows the run staged (the caller counted them)."""
    sql = _statements(dialect, quiet)
    params = {"run": run, "tenant": tenant}
    _reorders(db, sql, params)
    packer = packing.of(db.conn) if dialect.sqlite else None
    fields = fields_json(volatile, packer)
    if packer is not None:
        db.conn.create_function(FIELDS_FUNCTION, 3, fields, deterministic=True)
        dictionaries.for_run(db.conn, packer, run, tenant)
    for statement in sql.changes:
        db.execute(statement, params)
    if not dialect.sqlite:  # the updates are in, the old versions still there
        found = db.execute(sql.updated_fields, params).fetchall()
        if found:
            db.executemany(
                "UPDATE changes SET fields = ? WHERE seq = ?",
                [(fields(kind, old, new), seq) for seq, kind, old, new in found],
            )
    with _indexes_built_after(db, enabled=dialect.sqlite and _mostly_new(db, staged)):
        db.execute(sql.upsert, params)
    db.execute(sql.delete_missing, params)
    while db.execute(dialect.cascade, params).rowcount:
        pass
    for statement in sql.after_deletions:
        db.execute(statement, params)


def _mostly_new(db: Any, staged: int) -> bool:
    """Whether a run that staged `staged` rows staged more than the file holds (a first crawl,
    the first of a big tenant): most of what the merge writes is new then. The file's rows are
    bounded by its largest rowid (its rows are numbered as they come), which costs no walk."""
    return bool(staged > db.execute("SELECT coalesce(max(rowid), 0) FROM resources").fetchone()[0])


@contextlib.contextmanager
def _indexes_built_after(db: Any, *, enabled: bool) -> Iterator[None]:
    """Without `resources`' secondary indexes while the body writes, built again after it (in
    the caller's transaction: a failure takes the drop back too), when `enabled`.

    Why: a first crawl's rows reach each secondary index in an order of their own (a listing's,
    a parent's), a page here and a page there; a million of them dirtied more pages than the
    cache holds, written to the write-ahead log again and again, and left an eighth of the indexes'
    pages empty. Built after, each index is one sort written in order (SQLite only: at 1.1
    million objects, bench/crawl.py --objects, the merge's statements took 16.3 s, against 18.0 s
    for the release before issue 44 writing into its indexes, and the file 30 bytes an object
    less than with them written into)."""
    if not enabled:
        yield
        return
    for statement in RESOURCES.current_indexes:
        db.execute(f"DROP INDEX {index_name(statement)}")
    yield
    for statement in RESOURCES.current_indexes:
        db.execute(statement)


def _reorders(db: Any, sql: _Statements, params: Mapping[str, Any]) -> None:
    """Log as moved only the fewest siblings whose moves explain a new order."""
    for kind, parent_kind, parent_id in db.execute(sql.reordered_groups, params).fetchall():
        group = dict(params, kind=kind, parent_kind=parent_kind, parent_id=parent_id)
        siblings = list(db.query(sql.group_siblings, group))
        moved = set(moved_items([r["id"] for r in siblings], {r["id"]: r["old_position"] for r in siblings}))
        for r in siblings:
            if r["id"] in moved:
                db.execute(
                    CHANGES_INSERT + "VALUES (?, ?, ?, ?, 'moved', ?, ?, ?, ?, ?, ?, ?)",
                    [params["run"], params["tenant"], kind, r["id"], r["hash"], r["new_hash"],
                     r["parent_id"], r["parent_id"], r["old_position"], r["position"], r["title"]],
                )
