"""The copy behind `syncd state migrate` (`syncd.state.migrate_state`): tables from the open
SQLite sources into one PostgreSQL transaction, and the checks run before it commits.

Why apart from the command's module: this part only moves and compares rows; deciding whether
to copy at all (live writers, open runs, the sources' files) is `migrate_state`'s.
Verification reads the server through the same transaction (`_View`: the StateStore's own read
methods), so a mismatch is found before anything is committed.

What else the state directory holds moves in the same transaction as a `StatePart` the command
hands in (the daemon's run history: `syncd.daemon.history_copy`): this layer copies the mirror
and knows nothing of the daemon.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any, Protocol

from syncd.errors import SyncdError
from syncd.pg.migrations import PgMigration
from syncd.state.dialect import POSTGRES
from syncd.state.errors import StateError
from syncd.state.packing import PackedDataError
from syncd.state.pg_database import PgDatabase
from syncd.state.reads import StoreReads
from syncd.state.rows import stored_of_hex
from syncd.state.store import StateStore
from syncd.state.tables import HASH_COLUMNS, MIRROR

__all__ = [
    "BATCH",
    "MIRROR_TABLES",
    "MigrationMismatch",
    "Progress",
    "StateCopier",
    "StateMigration",
    "StatePart",
    "TableCount",
    "move_sequence",
]

MIRROR_TABLES = tuple(table.name for table in MIRROR)
"""The state file's tables, in an order the foreign keys accept (runs first)."""
_SKIPPED = ("migrations", "sqlite_sequence", "dictionaries")
"""The file's own bookkeeping: the server records its migrations in `fleet_migrations`; the
dictionaries the file's objects are packed with stay there (they go as JSON, unpacked)."""
_COUNTERS = {"runs": "id", "changes": "seq"}
_COLUMNS_OF = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?"
BATCH = 5000
"""Rows per COPY: each is one statement, well inside the connection's statement timeout."""
Progress = Callable[[str, int, int], None]
"""(step, rows done, rows in all) after each batch: a table's copy, then its check."""


class MigrationMismatch(SyncdError):
    """What PostgreSQL holds after the copy is not what the file holds (nothing was committed)."""

    exit_code = 1


@dataclass(frozen=True)
class TableCount:
    table: str
    source: str
    """The file it came from: `syncd.db` (or the state file's name) or `daemon.db`."""
    rows: int
    copied: int


@dataclass
class StateMigration:
    """What `migrate_state` copied and checked."""

    source: Path
    daemon_history: Path | None
    target: str
    tables: list[TableCount] = field(default_factory=list)
    objects: dict[str, dict[str, int]] = field(default_factory=dict)
    """tenant -> kind -> current objects, the same in the file and on the server."""
    open_runs: list[int] = field(default_factory=list)
    closed_daemon_runs: int = 0
    """Runs of the daemon's history left queued or running, closed by the copy."""
    replaced_nul: int = 0
    next_run_id: int = 1
    next_daemon_run_id: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "daemon_history": None if self.daemon_history is None else str(self.daemon_history),
            "target": self.target,
            "tables": [{"table": t.table, "source": t.source, "rows": t.rows, "copied": t.copied} for t in self.tables],
            "objects": self.objects,
            "open_runs": self.open_runs,
            "closed_daemon_runs": self.closed_daemon_runs,
            "replaced_nul": self.replaced_nul,
            "next_run_id": self.next_run_id,
            "next_daemon_run_id": self.next_daemon_run_id,
            "verified": True,
        }


class StatePart(Protocol):
    """Another part of the state directory that moves with the mirror, in its transaction (the
    daemon's run history, `syncd.daemon.history_copy`), handed in by the command."""

    path: Path | None
    """The file it copies from; None: nothing to copy (its tables are still claimed empty)."""
    tables: tuple[str, ...]
    """Its tables on the server, claimed empty with the mirror's."""
    migrations: tuple[PgMigration, ...]
    """What the server must hold for them (made before the copy, with the mirror's)."""

    def open(self) -> None:
        """Read the file as one snapshot; StateError when it is unusable."""
        ...

    def copy(self, db: PgDatabase, report: StateMigration, progress: Progress) -> None:
        """Copy its rows in `db`'s transaction; count them in `report.tables`."""
        ...

    def verify(self, db: PgDatabase) -> None:
        """MigrationMismatch unless the server holds what the file holds."""
        ...

    def check_unchanged(self) -> None:
        """StateError when the file was written while it was being copied."""
        ...

    def close(self) -> None: ...


def move_sequence(db: PgDatabase, table: str, column: str, floor: int) -> int:
    """Move `table.column`'s sequence past `floor` and every id held; the next id it gives."""
    top = max(floor, db.execute(f"SELECT coalesce(max({column}), 0) FROM {table}").fetchone()[0])
    if top > 0:
        db.execute("SELECT setval(pg_get_serial_sequence(?, ?), ?)", [table, column, top])
    return top + 1


class _Digest:
    """Rows as a multiset: their number and the sum of their hashes (order does not matter)."""

    def __init__(self) -> None:
        self.count = 0
        self.total = 0

    def add(self, row: Sequence[Any]) -> None:
        self.count += 1
        digest = hashlib.blake2b(repr(tuple(row)).encode(), digest_size=16).digest()
        self.total = (self.total + int.from_bytes(digest)) & ((1 << 128) - 1)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Digest) and (self.count, self.total) == (other.count, other.total)

    __hash__ = None  # type: ignore[assignment]


class _View(StoreReads):
    """The StateStore's read methods over the copying transaction: what the server will hold."""

    def __init__(self, db: PgDatabase, where: str) -> None:
        self.db, self.where, self.path, self.dialect = db, where, where, POSTGRES
        self.packer = None


class StateCopier:
    """One migration: the open sources, the server's transaction, and what was counted."""

    def __init__(self, store: StateStore, part: StatePart | None, db: PgDatabase, report: StateMigration, progress: Progress) -> None:
        self.store, self.part, self.db, self.report, self.progress = store, part, db, report, progress
        self.src = store.db.conn
        self.digests: dict[str, tuple[list[str], _Digest]] = {}

    def claim_empty_target(self) -> None:
        """Refuse a state that holds rows; keep writers and other migrations out until the commit
        (a writer's INSERT waits for the lock, then its ids come after the copied ones)."""
        tables = (*MIRROR_TABLES, *(self.part.tables if self.part is not None else ()))
        self.db.execute(f"LOCK TABLE {', '.join(tables)} IN SHARE ROW EXCLUSIVE MODE")
        held = [t for t in tables if self.db.execute(f"SELECT EXISTS (SELECT 1 FROM {t})").fetchone()[0]]
        if held:
            raise StateError(
                f"the PostgreSQL state at {self.report.target} already holds a mirror or run history (rows in {', '.join(held)}): "
                "syncd state migrate fills an empty state only; nothing was copied"
            )

    def _clean(self, row: Sequence[Any], table: str, columns: list[str]) -> tuple[Any, ...]:
        out = []
        # A file older than its migration 0008 (read as it is) holds hashes in hex: they go in
        # the form the server stores (its "mirror-0003" ran before the copy, and a run after it
        # must find an unchanged object unchanged).
        hashes = HASH_COLUMNS.get(table, ())
        for name, value in zip(columns, row, strict=True):
            if name in hashes:
                value = stored_of_hex(value)
            if isinstance(value, bytes) and table == "resources" and name == "data":
                value = self._unpacked(value, columns, row)
            if isinstance(value, str) and "\x00" in value:
                value = value.replace("\x00", "\ufffd")
                self.report.replaced_nul += 1
            elif isinstance(value, bytes):
                raise StateError(f"{self.store.where}: {table}.{name} holds binary data, which syncd never writes: the file is damaged")
            out.append(value)
        return tuple(out)

    def _unpacked(self, value: bytes, columns: list[str], values: Sequence[Any]) -> str:
        """An object's JSON packed in the file (`syncd.state.packing`) as the text PostgreSQL
        keeps; StateError naming the object (its row: `columns`, `values`) when it does not unpack."""
        try:
            assert self.store.packer is not None
            return self.store.packer.text(value)  # (decoded a piece at a time, as every read of a packed object)
        except (PackedDataError, UnicodeDecodeError) as exc:
            row = dict(zip(columns, values, strict=True))
            raise StateError(
                f"{self.store.where}: the data of {row.get('kind')} {row.get('id')} is packed but does not unpack: {exc}: "
                "the file is damaged; nothing was copied"
            ) from None

    def copy_mirror(self) -> None:
        names = [row[0] for row in self.src.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        unknown = [n for n in names if n not in MIRROR_TABLES and n not in _SKIPPED and not n.startswith("sqlite_")]
        if unknown:
            raise StateError(f"{self.store.where} holds a table the PostgreSQL state has no place for ({unknown[0]!r}): upgrade syncd")
        label = self.store.path.name if isinstance(self.store.path, Path) else "syncd.db"
        for table in (t for t in MIRROR_TABLES if t in names):
            have = {r[0] for r in self.db.execute(_COLUMNS_OF, [table]).fetchall()}
            columns = [row[1] for row in self.src.execute(f"PRAGMA table_info({table})")]
            extra = [c for c in columns if c not in have]
            if extra:
                raise StateError(f"{self.store.where}: column {table}.{extra[0]} has no place in the PostgreSQL state: upgrade syncd")
            total = self.src.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            digest, done = _Digest(), 0
            cursor = self.src.execute(f"SELECT {', '.join(columns)} FROM {table}")
            while batch := cursor.fetchmany(BATCH):
                rows = [self._clean(row, table, columns) for row in batch]
                with self.db.conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                        digest.add(row)
                done += len(rows)
                self.progress(table, done, total)
            self.digests[table] = (columns, digest)
            copied = self.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            self.report.tables.append(TableCount(table, label, total, copied))
        nexts = {table: move_sequence(self.db, table, column, self._sqlite_counter(table)) for table, column in _COUNTERS.items()}
        self.report.next_run_id = nexts["runs"]

    def copy_part(self) -> None:
        if self.part is not None:
            self.part.copy(self.db, self.report, self.progress)

    def _sqlite_counter(self, table: str) -> int:
        try:
            row = self.src.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", [table]).fetchone()
        except sqlite3.OperationalError:  # a file that never used AUTOINCREMENT
            return 0
        return int(row[0]) if row and isinstance(row[0], int) else 0

    def verify(self) -> None:
        """MigrationMismatch unless the server now holds what the file holds (module docstring)."""
        for count in self.report.tables:
            if count.rows != count.copied:
                raise MigrationMismatch(
                    f"verification failed, nothing was copied: table {count.table} has {count.rows} rows in {count.source}, "
                    f"{count.copied} in PostgreSQL"
                )
        for table, (columns, wanted) in self.digests.items():
            got = _Digest()
            with self.db.conn.cursor(name=f"verify_{table}") as cur:
                cur.itersize = BATCH
                cur.execute(f"SELECT {', '.join(columns)} FROM {table}")
                for row in cur:
                    got.add(row)
                    if got.count % BATCH == 0:
                        self.progress(f"checking {table}", got.count, wanted.count)
            if got != wanted:
                raise MigrationMismatch(
                    f"verification failed, nothing was copied: the rows of table {table} differ between the file and PostgreSQL"
                )
        if self.part is not None:
            self.part.verify(self.db)
        self._verify_views()

    def _verify_views(self) -> None:
        """Each tenant's counts, current rows and scope tokens, read as the StateStore reads them."""
        view = _View(self.db, self.report.target)
        tenants = {r[0] for r in self.src.execute("SELECT DISTINCT tenant FROM runs UNION SELECT DISTINCT tenant FROM resources")}
        for tenant in sorted(tenants | {r[0] for r in self.db.execute("SELECT DISTINCT tenant FROM resources").fetchall()}):
            counts = self.store.counts(tenant)
            self.progress(f"checking the current objects of {tenant}", 0, sum(counts.values()))
            if view.counts(tenant) != counts:
                raise MigrationMismatch(f"verification failed, nothing was copied: tenant {tenant}: the current objects per kind differ")
            for kind in counts:
                for mine, theirs in zip_longest(self.store.current(tenant, kind), view.current(tenant, kind)):
                    if mine is None or theirs is None or _no_nul(mine) != theirs:
                        which = mine or theirs or {}
                        raise MigrationMismatch(
                            f"verification failed, nothing was copied: tenant {tenant}: the current {kind} {which.get('id')} differs"
                        )
            if view.scope_tokens(tenant) != {_no_nul(k): _no_nul(v) for k, v in self.store.scope_tokens(tenant).items()}:
                raise MigrationMismatch(f"verification failed, nothing was copied: tenant {tenant}: the scopes' change tokens differ")
            if counts:
                self.report.objects[tenant] = counts


def _no_nul(value: Any) -> Any:
    """A value of the file as the copy stored it (NUL as U+FFFD in the row's text columns, the
    hash in the form stored since 0008)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {key: (item if key == "data" else stored_of_hex(item) if key == "hash" else _no_nul(item)) for key, item in value.items()}
    return value
