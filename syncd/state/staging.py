"""Staging what a run reads: rows, listings, scope tokens, carried rows (a part of `StateStore`).

Why apart: the crawler's side of the contract in `syncd.state.store`'s docstring; each
batch is one transaction so a run's rows reach the database while it reads.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from collections.abc import Callable, Iterable, Iterator
from itertools import groupby, islice
from typing import Any, TypeVar

from syncd import json_codec
from syncd.state.dialect import Dialect
from syncd.state.errors import StateError
from syncd.state.merge import COLUMNS as _COLUMNS
from syncd.state.rows import Row

__all__ = ["Listed", "ScopeCarried", "ScopeRead", "StagedOp", "StagedRow", "StoreStaging", "writes"]

_STAGE = f"""
INSERT INTO staged (run, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run, tenant, kind, id) DO UPDATE SET
    org = excluded.org, parent_kind = excluded.parent_kind, parent_id = excluded.parent_id,
    position = excluded.position, listing = excluded.listing, scope = excluded.scope,
    data = excluded.data, hash = excluded.hash
"""


@functools.cache
def _listed(table: str) -> str:
    """The upsert of a listing's outcome into `table` (`Dialect.run_listings`): a failure sticks."""
    return f"""
INSERT INTO {table} (run, tenant, listing, status, error) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (run, tenant, listing) DO UPDATE SET
    status = CASE WHEN {table}.status = 'failed' THEN 'failed' ELSE excluded.status END,
    error = coalesce({table}.error, excluded.error)
"""


_SCOPE_READ = """
INSERT INTO staged_scopes (run, tenant, scope, token) VALUES (?, ?, ?, ?)
ON CONFLICT (run, tenant, scope) DO UPDATE SET token = excluded.token
"""
_CARRY_ROWS = f"""
INSERT INTO staged (run, {_COLUMNS}) SELECT ?, {_COLUMNS} FROM resources
WHERE tenant = ? AND scope = ? AND deleted_run IS NULL ON CONFLICT DO NOTHING
"""
_CARRY_TOKEN = """
INSERT INTO staged_scopes (run, tenant, scope, token)
SELECT ?, tenant, scope, token FROM scopes WHERE tenant = ? AND scope = ? ON CONFLICT DO NOTHING
"""


@dataclass(frozen=True, slots=True)
class Listed:
    """How reading one listing went (`record_listing`)."""

    listing: str
    ok: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ScopeRead:
    """A scope read completely at a change token (`complete_scope`)."""

    scope: str
    token: str


@dataclass(frozen=True, slots=True)
class ScopeCarried:
    """A scope whose token did not change: its token stays current, and with `rows` its
    current rows are staged as read (`carry_scope`). Without them they stay current all the
    same: nothing of a scope that was not read can be deleted by the run (its listings were
    not read; a row is cascaded only from a parent deleted in the run, and a scope's rows hang
    under its space, which was listed). Copying a million rows to stage them unchanged, then
    back, was nearly all of a no-change re-sync's time."""

    scope: str
    rows: bool = True


class StagedRow(tuple[Any, ...]):
    """A `Row` as its columns (`COLUMNS`' order), its object encoded: what a batch holds while
    it waits (a kilobyte of text rather than the several of a decoded object)."""

    __slots__ = ()

    @classmethod
    def of(cls, row: Row) -> StagedRow:
        return cls((row.tenant, row.kind, row.id, row.org, row.parent_kind, row.parent_id, row.position,
                    row.listing, row.scope, json_codec.compact(row.data), row.hash))  # fmt: skip

    @property
    def tenant(self) -> str:
        return str(self[0])

    @property
    def data(self) -> str:
        """The object's JSON."""
        return str(self[9])


StagedOp = Row | StagedRow | Listed | ScopeRead | ScopeCarried
"""One thing a run stages; `write_staged` writes a sequence of them in order."""

_WRITES = TypeVar("_WRITES", bound=Callable[..., Any])


def writes(method: _WRITES) -> _WRITES:
    """Mark a method that writes the file: it raises StateError on a read-only StateStore."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.readonly:
            raise StateError(f"{self.where} is open read-only: {method.__name__} would write it")
        return method(self, *args, **kwargs)

    return guarded  # type: ignore[return-value]


class StoreStaging:
    """The staging methods of `StateStore`."""

    db: Any
    dialect: Dialect
    where: str
    readonly: bool
    batch_size: int
    _lock: threading.RLock

    def _tenant_of(self, run: int, tenant: str | None = None) -> str:
        raise NotImplementedError  # `StateStore` knows its open runs

    def _json(self, text: str, what: str) -> Any:
        raise NotImplementedError  # `StoreReads`

    def _executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if self.dialect.sqlite:
            self.db.conn.executemany(sql, rows)
        else:
            self.db.executemany(sql, rows)

    def _tenant_of(self, run: int, tenant: str | None = None) -> str:
        owner = self._active.get(run)
        if owner is None:
            raise StateError(f"run {run} is not open in this process")
        if tenant is not None and tenant != owner:
            raise StateError(f"run {run} is a run of tenant {owner!r}, not {tenant!r}")
        return owner

    @writes
    def stage(self, run: int, rows: Iterable[Row]) -> int:
        """Write rows read by `run`, one transaction per batch; returns how many.

        Streams: holds one batch in memory whatever the size of `rows`.
        """
        total = 0
        iterator = iter(rows)
        while batch := list(islice(iterator, self.batch_size)):
            self.write_staged(run, batch)
            total += len(batch)
        return total

    @writes
    def record_listing(self, run: int, tenant: str, listing: str, ok: bool, error: str | None = None) -> None:
        """Say how reading one list went. `ok` means: every row of it was staged in this run.

        A failure is sticky within the run: once a list failed, its rows are unknown.
        """
        self._tenant_of(run, tenant)
        self.write_staged(run, [Listed(listing, ok, error)])

    @writes
    def complete_scope(self, run: int, tenant: str, scope: str, token: str) -> None:
        """Say that `scope` was read completely at change token `token` in this run.

        The token becomes current with the run, and lets a later run skip the scope
        (`scope_tokens` + `carry_scope`) while the token does not change.
        """
        self._tenant_of(run, tenant)
        self.write_staged(run, [ScopeRead(scope, str(token))])

    @writes
    def carry_scope(self, run: int, tenant: str, scope: str) -> int:
        """Count the current rows of `scope` as read, unchanged, by `run`; returns how many.

        For a scope whose change token did not change: its lists are not read again.
        Rows staged for the scope in this run (before or after) win over carried ones.
        """
        self._tenant_of(run, tenant)
        return self.write_staged(run, [ScopeCarried(scope)])

    @writes
    def write_staged(self, run: int, ops: Iterable[StagedOp]) -> int:
        """Write what `run` read, in order, in ONE transaction: rows, how listings went, scopes
        read or carried (the methods above, batched: `syncd.read.staging_queue` sends a crawl's
        work this way, a few transactions a second instead of one a page). Returns the rows
        staged and carried."""
        tenant = self._tenant_of(run)
        written = 0
        with self._lock, self.db.atomic():
            for op_type, group in groupby(ops, key=type):
                if op_type is Row or op_type is StagedRow:
                    params = []
                    for row in group:
                        staged = row if isinstance(row, StagedRow) else StagedRow.of(row)
                        if staged.tenant != tenant:
                            raise StateError(f"run {run} is a run of tenant {tenant!r}, got a row of {staged.tenant!r}")
                        params.append((run, *staged))
                    self._executemany(_STAGE, params)
                    written += len(params)
                elif op_type is Listed:
                    self._executemany(_listed(self.dialect.run_listings), [(run, tenant, op.listing, "ok" if op.ok else "failed",
                                                 None if op.ok else (op.error or "failed")) for op in group])  # fmt: skip
                elif op_type is ScopeRead:
                    self._executemany(_SCOPE_READ, [(run, tenant, op.scope, op.token) for op in group])
                elif op_type is ScopeCarried:
                    for op in group:
                        if op.rows:
                            written += self.db.execute(_CARRY_ROWS, [run, tenant, op.scope]).rowcount
                        self.db.execute(_CARRY_TOKEN, [run, tenant, op.scope])
                else:
                    raise TypeError(f"not something a run stages: {op_type.__name__}")
        return written

    def staged_rows(self, run: int, org: str, kinds: Iterable[str]) -> Iterator[dict[str, Any]]:
        """Rows `run` staged for one organization, of these kinds (`data` decoded), for a
        scoped crawl to decide what it keeps (`syncd.read.crawl_scope`)."""
        kinds = sorted(set(kinds))
        marks = ", ".join("?" * len(kinds))
        with self._lock:
            found = self.db.execute(
                f"SELECT kind, id, parent_kind, parent_id, scope, data FROM staged WHERE run = ? AND org = ? AND kind IN ({marks})",
                [run, org, *kinds],
            ).fetchall()
        for kind, row_id, parent_kind, parent_id, scope, data in found:
            yield {"kind": kind, "id": row_id, "parent_kind": parent_kind, "parent_id": parent_id, "scope": scope,
                   "data": self._json(data, f"{kind} {row_id}")}  # fmt: skip

    @writes
    def unstage(self, run: int, keys: Iterable[tuple[str, str]]) -> int:
        """Forget rows `run` read but does not record (out of a scoped run's scope)."""
        self._tenant_of(run)
        with self._lock, self.db.atomic():
            return sum(self.db.execute("DELETE FROM staged WHERE run = ? AND kind = ? AND id = ?", [run, kind, row_id]).rowcount for kind, row_id in keys)

    @writes
    def carry_rows(self, run: int, tenant: str, keys: Iterable[tuple[str, str]]) -> int:
        """Count these current rows as read, unchanged, by `run` (rows it staged win): what a
        scoped run leaves out keeps the state the mirror had, and is not deleted."""
        self._tenant_of(run, tenant)
        with self._lock, self.db.atomic():
            return sum(
                self.db.execute(
                    f"INSERT INTO staged (run, {_COLUMNS}) SELECT ?, {_COLUMNS} FROM resources "
                    "WHERE tenant = ? AND kind = ? AND id = ? AND deleted_run IS NULL ON CONFLICT DO NOTHING",
                    [run, tenant, kind, row_id],
                ).rowcount
                for kind, row_id in keys
            )

