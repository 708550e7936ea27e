"""Reading the mirror: the current view, runs and their changes (a part of `StateStore`).

The same SQL on both backends but for what `self.dialect` gives (the order of `current`,
a JSON field, a title); rows come back as they do from SQLite, JSON as text decoded here. On
SQLite an object's JSON may be packed (`syncd.state.packing`): `_json` unpacks it, and SQL reads
it through `syncd_json`; a file older than packing holds text, read as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from syncd import json_codec
from syncd.state.dialect import Dialect
from syncd.state.diff import ChangeSummary, compose, summarise
from syncd.state.errors import StateError
from syncd.state.merge import COLUMNS as _COLUMNS
from syncd.state.packing import PackedDataError, Packer

_KEY_COLUMNS = "tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, first_seen_run, last_seen_run"

__all__ = ["FINISHED", "StoreReads"]

_KINDS = """
WITH RECURSIVE k(kind) AS (
    SELECT (SELECT min(kind) FROM resources WHERE tenant = ? AND kind > '')
    UNION ALL
    SELECT (SELECT min(kind) FROM resources WHERE tenant = ? AND kind > k.kind) FROM k WHERE k.kind IS NOT NULL
)
SELECT kind FROM k WHERE kind IS NOT NULL
"""
"""A tenant's kinds, in order: the first one after each (after '' first), one seek of the
primary key each (a loose index scan), until there is none. (Both terms take the column's
collation, byte order on PostgreSQL too.)"""

#: Statuses of runs whose rows were merged into the current view.
FINISHED = ("complete", "partial")


def _decode_fields(row: dict[str, Any]) -> dict[str, Any]:
    """`fields` of a change row as `fields` (a list, or None when not recorded) and
    `fields_omitted`; rows of a file older than the column get None."""
    raw = row.pop("fields", None)
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict) and isinstance(value.get("changed"), list):
        row["fields"], row["fields_omitted"] = value["changed"], int(value.get("omitted") or 0)
    else:
        row["fields"], row["fields_omitted"] = None, 0
    return row


class StoreReads:
    """The read methods of `StateStore` (it holds the connection, dialect and names)."""

    db: Any
    dialect: Dialect
    path: Path | str
    where: str
    packer: Packer | None
    """Unpacks the file's objects (SQLite); None on PostgreSQL, where nothing is packed."""

    # -- reading the current view ----------------------------------------------------------

    def _scalar(self, sql: str, params: Iterable[Any]) -> Any:
        row = self.db.execute(sql, list(params)).fetchone()
        return None if row is None else row[0]

    def current(
        self,
        tenant: str,
        kind: str | None = None,
        org: str | None = None,
        parent_id: str | None = None,
        scope: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Current rows (columns, `data` decoded), by kind, parent and position; streamed."""
        cursor = self._current_cursor(f"{_COLUMNS}, first_seen_run, last_seen_run", tenant, kind, org, parent_id, scope)
        names = [column[0] for column in cursor.description]
        for values in cursor:
            row = dict(zip(names, values, strict=True))
            row["data"] = self._json(row["data"], f"{row['kind']} {row['id']}")
            yield row

    def current_keys(
        self,
        tenant: str,
        kind: str | None = None,
        org: str | None = None,
        parent_id: str | None = None,
        scope: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """`current` without `data` (nor `hash`), in the same order; each object is read on its
        own (`current_value`). Why: SQLite sorts whole rows, so the sort of `current` holds a
        copy of every object it sorts (a 150 MB page, several times over); this one sorts keys."""
        cursor = self._current_cursor(_KEY_COLUMNS, tenant, kind, org, parent_id, scope)
        names = [column[0] for column in cursor.description]
        for values in cursor:
            yield dict(zip(names, values, strict=True))

    def _current_cursor(
        self, columns: str, tenant: str, kind: str | None, org: str | None, parent_id: str | None, scope: str | None
    ) -> Any:
        where, params = ["tenant = ?", "deleted_run IS NULL"], [tenant]
        for column, value in (("kind", kind), ("org", org), ("parent_id", parent_id), ("scope", scope)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        return self.db.execute(f"SELECT {columns} FROM resources WHERE {' AND '.join(where)} " + self.dialect.current_order, params)

    def current_value(self, tenant: str, kind: str, id: str) -> dict[str, Any] | None:
        """The current object (its JSON) or None when absent or deleted."""
        data = self._scalar(
            "SELECT data FROM resources WHERE tenant = ? AND kind = ? AND id = ? AND deleted_run IS NULL",
            [tenant, kind, id],
        )
        return None if data is None else self._json(data, f"{kind} {id}")

    def current_tokens(self, tenant: str, kind: str, field: str) -> dict[str, Any]:
        """id -> value of `field` (dotted path) of every current object of a kind.

        This is the latest value READ; whether the scope it governs was read completely at
        that value is what `scope_tokens` says — use that one to decide skipping.
        """
        d = self.dialect
        rows = self.db.execute(
            f"SELECT id, {d.field_value(d.stored_json('data'))} FROM resources WHERE tenant = ? AND kind = ? AND deleted_run IS NULL",
            [d.field_param(field), tenant, kind],
        )
        return {row_id: d.field_result(value) for row_id, value in rows.fetchall()}

    def scope_tokens(self, tenant: str, prefix: str = "") -> dict[str, str]:
        """scope -> token at which the scope was last read completely (see `complete_scope`)."""
        rows = self.db.execute(
            "SELECT scope, token FROM scopes WHERE tenant = ? AND substr(scope, 1, ?) = ?",
            [tenant, len(prefix), prefix],
        )
        return dict(rows.fetchall())

    def counts(self, tenant: str, org: str | None = None) -> dict[str, int]:
        """kind -> number of current rows, in the order of the kinds.

        Counted per organization and kind, in the order of `resources_current_by_org`, whose
        entries are all a count reads: grouped by kind alone, SQLite walks the primary key
        (it gives that order) and reads every row of the tenant (4 times as long)."""
        sql = "SELECT kind, count(*) FROM resources WHERE tenant = ? AND deleted_run IS NULL"
        params: list[Any] = [tenant]
        if org is not None:
            sql += " AND org = ?"
            params.append(org)
        counts: dict[str, int] = {}
        for kind, count in self.db.execute(sql + " GROUP BY org, kind", params).fetchall():
            counts[kind] = counts.get(kind, 0) + count
        return dict(sorted(counts.items()))

    # -- runs and changes ------------------------------------------------------------------

    def _json(self, text: str | bytes, what: str) -> Any:
        """`text` decoded (unpacked first when it is packed); StateError (one line) when the file
        holds something that is not JSON, JSON nested too deeply to decode, or a packed value
        that does not unpack (a damaged or hand-made file)."""
        try:
            if isinstance(text, bytes):
                if self.packer is None:
                    raise PackedDataError("binary, where JSON text is stored")
                text = self.packer.text(text)
            return json_codec.loads(text)
        except PackedDataError as exc:
            why = f"packed but does not unpack: {exc}"
        except RecursionError:
            why = "JSON nested too deeply to read"
        except (TypeError, ValueError) as exc:
            why = f"not JSON ({exc})"
        raise StateError(f"{self.where}: the data of {what} is {why}: the file is damaged or was not written by syncd")

    def _run_row(self, row: dict[str, Any]) -> dict[str, Any]:
        row["stats"] = self._json(row["stats"], f"run {row['id']}") if row["stats"] else {}
        return row

    def run(self, run: int) -> dict[str, Any] | None:
        rows = list(self.db.query("SELECT * FROM runs WHERE id = ?", [run]))
        return self._run_row(rows[0]) if rows else None

    def runs(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """Every run (optionally of one tenant), oldest first, `stats` decoded."""
        if tenant is None:
            rows = self.db.query("SELECT * FROM runs ORDER BY id")
        else:
            rows = self.db.query("SELECT * FROM runs WHERE tenant = ? ORDER BY id", [tenant])
        return [self._run_row(row) for row in rows]

    def last_complete_run(
        self, tenant: str, scope_ref: str | None = None, include_partial: bool = True
    ) -> dict[str, Any] | None:
        """The newest run whose rows were merged (complete, or partial unless excluded)."""
        statuses = FINISHED if include_partial else ("complete",)
        sql = f"SELECT * FROM runs WHERE tenant = ? AND status IN ({', '.join('?' * len(statuses))})"
        params: list[Any] = [tenant, *statuses]
        if scope_ref is not None:
            sql += " AND scope_ref = ?"
            params.append(scope_ref)
        rows = list(self.db.query(sql + " ORDER BY id DESC LIMIT 1", params))
        return self._run_row(rows[0]) if rows else None

    def changes(self, run_b: int, run_a: int | None = None) -> list[dict[str, Any]]:
        """Changes recorded by run b alone, or by the runs of b's tenant in (a, b], in commit order;
        an update's `fields` lists what changed (None when not recorded), see `diff.changed_fields`."""
        if run_a is None:
            rows = self.db.query("SELECT * FROM changes WHERE run = ? ORDER BY seq", [run_b])
        else:
            tenant = self._scalar("SELECT tenant FROM runs WHERE id = ?", [run_b])
            rows = self.db.query(
                "SELECT * FROM changes WHERE tenant = ? AND run > ? AND run <= ? ORDER BY seq",
                [tenant, run_a, run_b],
            )
        return [_decode_fields(row) for row in rows]

    def summary(self, run: int) -> ChangeSummary:
        """Totals per kind and op of the changes recorded by one run (counted by the database:
        a first crawl of a million objects has as many)."""
        return summarise(self.db.query("SELECT kind, op, count(*) AS count FROM changes WHERE run = ? GROUP BY kind, op", [run]))

    def diff(self, run_a: int, run_b: int) -> list[dict[str, Any]]:
        """Net changes from the snapshot of run a to that of run b (a older than b, same tenant)."""
        a, b = self.run(run_a), self.run(run_b)
        for number, row in ((run_a, a), (run_b, b)):
            if row is None:
                raise StateError(f"no run {number} in {self.where}")
            if row["status"] not in FINISHED:
                raise StateError(f"run {number} is {row['status']}: it has no snapshot to compare")
        assert a is not None and b is not None
        if a["tenant"] != b["tenant"]:
            raise StateError(f"runs {run_a} and {run_b} are of different tenants")
        if run_a >= run_b:
            raise StateError(f"run {run_a} must be older than run {run_b}")
        return compose(self.changes(run_b, run_a))

    def kinds(self, tenant: str) -> list[str]:
        """The kinds of `tenant`'s objects (current or deleted), one seek of the primary key
        each: what lets a lookup by id alone (`location`) search the key (tenant, kind, id)
        rather than walk the tenant."""
        rows = self.db.execute(_KINDS, [tenant, tenant]).fetchall()
        return [kind for (kind,) in rows]

    def location(self, tenant: str, id: str | None, depth: int = 12) -> str:
        """`Org / Collection / Space`: the titles from the organization down to the object
        `id` (current or deleted; "?" for one the file does not hold), for a person reading
        where something moved from and to. Empty for None (no parent).

        By the primary key: the first object among the tenant's kinds (its id is all a change
        says of a parent), each parent above it by the kind its child names. (By id alone it
        walked the whole tenant for each title: a third of a second at 100,000 objects.)"""
        parts: list[str] = []
        seen: set[str] = set()
        kinds: list[str] | None = None  # the tenant's, read when a parent's kind is not known
        kind: str | None = None  # the kind of `id`, as its child names it
        while id is not None and id not in seen and len(parts) < depth:
            seen.add(id)
            if kind is None and kinds is None:
                kinds = self.kinds(tenant) or [""]
            wanted = [kind] if kind is not None else kinds or [""]
            row = self.db.execute(
                f"SELECT parent_id, {self.dialect.title(self.dialect.stored_json('data'))}, kind, parent_kind FROM resources "
                f"WHERE tenant = ? AND kind IN ({', '.join('?' * len(wanted))}) AND id = ? "
                "ORDER BY deleted_run IS NOT NULL LIMIT 1",
                [tenant, *wanted, id],
            ).fetchone()
            if row is None:
                parts.append("?")
                break
            parts.append(str(row[1]) if row[1] is not None else f"{row[2]} {id}")
            id, kind = row[0], row[3]
        return " / ".join(reversed(parts))

