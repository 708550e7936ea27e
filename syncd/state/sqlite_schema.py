"""The schema of the state file, built by named, transactional migrations.

Why named migrations: a state file outlives the syncd that wrote it. Each migration runs
once, in its own `BEGIN IMMEDIATE` transaction together with the row that records it in
`migrations(name, applied_at)`, so a crash mid-upgrade leaves the file as it was and two
processes opening an old file at once do not both upgrade it. A file that names a migration
this syncd does not know was written by a newer syncd: refuse it rather than guess.

Append new migrations at the end of `MIGRATIONS`; never edit or reorder a released one. The
tables are written once for both engines (`syncd.state.tables`); the migrations below render
them as each step made them, and `tests/released_schema.py` holds the SQL as released.

A file opened read-only (`StateStore(path, readonly=True)`: a backup being exported, restored or
looked at) is never migrated: `check_readable` reads it as it is when the migrations the read
side needs (`READ_NEEDS`) are there, and refuses it in one line otherwise. So a file from before
0006 (objects as JSON text) is read as it is, and packed by the first syncd that writes it.

Migrations may call syncd's SQL functions (`syncd.state.packing`: 0006 packs with `syncd_pack`,
0008 shortens the hashes with `syncd_stored_hash`): every connection syncd opens to a state file
has them, and a migration installs them on one that lacks them (a schema built in memory,
`made_shape`).

Either way a file is syncd's only when its schema is the one its migrations made
(`check_made_by_syncd`, `syncd.state.sqlite_shape`): its `migrations` table is the file's word,
its schema is what SQLite runs.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from sqlite_utils import Database

from syncd.logging import get_logger
from syncd.state import dictionaries, packing
from syncd.state.dialect import SQLITE
from syncd.state.errors import StateError, NewerStateError
from syncd.state.sqlite_shape import Shape, shape_of, what_differs
from syncd.state.tables import (
    CHANGES,
    CURRENT_RESOURCES,
    DICTIONARIES,
    IDMAP,
    JOURNAL,
    LISTINGS,
    NARROWER_INDEXES,
    RESOURCES,
    RUNS,
    SCOPES,
    STAGED,
    STAGED_SCOPES,
    stored_hashes,
)

__all__ = [
    "MIGRATIONS",
    "PACKED",
    "READ_NEEDS",
    "Migration",
    "applied_migrations",
    "check_made_by_syncd",
    "check_readable",
    "made_shape",
    "migrate",
    "utc_now",
]


_LOG = get_logger("syncd.state")


@dataclass(frozen=True)
class Migration:
    """One schema step: `name` is recorded in `migrations`, `apply` changes the schema."""

    name: str
    apply: Callable[[Database], None]
    rewrites: bool = False
    """It rewrites every object of the file: a minute or more on a big one, so the operator is
    told before and after (`migrate`), not left with a command that says nothing."""


def _sql(*statements: str) -> str:
    return "\n".join(statements) + "\n"


_SNAPSHOTS = _sql(
    RUNS.create(SQLITE),
    *RUNS.indexes,
    RESOURCES.create(SQLITE, later=False),
    *RESOURCES.indexes,
    STAGED.create(SQLITE),
    LISTINGS.create(SQLITE),
    SCOPES.create(SQLITE),
    STAGED_SCOPES.create(SQLITE),
    CHANGES.create(SQLITE, later=False),
    *CHANGES.indexes,
    CURRENT_RESOURCES,
)
"""The mirror: runs, their objects (current and staged), lists, scopes and changes."""

_REPLICATION = _sql(
    """CREATE TABLE idmap (
    source_tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    source_id TEXT NOT NULL,
    target_tenant TEXT NOT NULL,
    target_id TEXT NOT NULL,
    run INTEGER,
    PRIMARY KEY (source_tenant, kind, source_id, target_tenant)
);""",
    "CREATE INDEX idmap_by_target ON idmap (target_tenant, kind, target_id);",
    JOURNAL.create(SQLITE, later=False),
    JOURNAL.index("journal_open"),
)
"""The write side: the first id map (one per tenant pair, replaced by 0003: only files keep this
history) and the journal of write intents."""

_IDMAP_PER_ORG = _sql(
    IDMAP.create(SQLITE, named="idmap_new"),
    """INSERT INTO idmap_new (source_tenant, kind, source_id, target_tenant, target_id, run)
    SELECT source_tenant, kind, source_id, target_tenant, target_id, run FROM idmap;""",
    "DROP TABLE idmap;",
    "ALTER TABLE idmap_new RENAME TO idmap;",
    IDMAP.index("idmap_by_target"),
    JOURNAL.add_columns(SQLITE, "op_key", "target_org", "source_org", "source_tenant"),
    JOURNAL.index("journal_by_key"),
)
"""The id map per (source organization, target organization) pair, with its origin; the
journal's intents keyed by their op and organizations."""

_JOURNAL_OP = _sql(JOURNAL.add_columns(SQLITE, "op"))
_CHANGE_FIELDS = _sql(CHANGES.add_columns(SQLITE, "fields"))
_NARROWER_INDEXES = _sql(NARROWER_INDEXES)


_STORED = "tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash, first_seen_run, last_seen_run, deleted_run"
_REPACK = _sql(
    "DROP VIEW current_resources;",
    "ALTER TABLE resources RENAME TO resources_text;",
    RESOURCES.create(SQLITE),
    f"INSERT INTO resources ({_STORED})\n    SELECT {_STORED.replace(' data,', ' ' + SQLITE.stored_value('kind', 'data') + ',')} FROM resources_text;",
    "DROP TABLE resources_text;",
)


def _packed_objects(db: Database) -> None:
    """0006: each object's JSON packed with a zstd dictionary of its kind (`syncd.state.packing`).

    The dictionaries are trained from the file's own objects (`dictionaries.for_file`), then
    `resources` is rebuilt with `data BLOB` (packed, or text where that is shorter; no
    `json_valid` check: what reaches it is checked as it is staged) and its rows packed on the
    way, in this migration's transaction; its indexes as the file had them, then its view."""
    packer = packing.of(db.conn)
    indexes = [row[0] for row in db.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'resources' AND sql IS NOT NULL ORDER BY rowid"
    ).fetchall()]  # fmt: skip
    db.execute(DICTIONARIES.create(SQLITE))
    dictionaries.for_file(db.conn, packer)
    for statement in [*_REPACK_STATEMENTS, *indexes, CURRENT_RESOURCES]:
        db.execute(statement)


def _script(sql: str) -> Callable[[Database], None]:
    """A migration that runs `sql`, split into statements once. Why not `executescript`: inside
    the migration's transaction sqlite-utils splits the script in Python at every call, and a
    fleet's backups make a new file each (a twelfth of a replica's CPU went there)."""
    statements = split_statements(sql)

    def apply(db: Database) -> None:
        for statement in statements:
            db.execute(statement)

    return apply


def split_statements(sql: str) -> list[str]:
    """The statements of a script, split where SQLite says one is complete (a `;` inside a
    string or a trigger's body does not end one)."""
    statements, current = [], ""
    for piece in sql.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \t\n;"):
                statements.append(current.strip())
            current = ""
    if current.strip(" \t\n;"):
        raise ValueError(f"an incomplete statement ends the script: {current.strip()[:80]!r}")
    return statements


def _stored_hashes(db: Database) -> None:
    """0008: every hash the file holds in the form stored since (`syncd.state.tables.stored_hashes`),
    by `syncd_stored_hash`, installed first on a connection that lacks it (`made_shape`'s)."""
    packing.install_plain(db.conn)
    for statement in _STORED_HASH_STATEMENTS:
        db.execute(statement)


_REPACK_STATEMENTS = split_statements(_REPACK)
_STORED_HASH_STATEMENTS = split_statements(stored_hashes(SQLITE))
PACKED = "0006_packed_objects"
"""The migration that packs the objects (`_packed_objects`)."""

MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_snapshots", _script(_SNAPSHOTS)),
    Migration("0002_replication", _script(_REPLICATION)),
    Migration("0003_idmap_per_organization", _script(_IDMAP_PER_ORG)),
    Migration("0004_journal_op", _script(_JOURNAL_OP)),
    Migration("0005_change_fields", _script(_CHANGE_FIELDS)),
    Migration(PACKED, _packed_objects, rewrites=True),
    Migration("0007_narrower_indexes", _script(_NARROWER_INDEXES)),
    Migration("0008_stored_hashes", _stored_hashes, rewrites=True),
)


#: The migrations whose tables the read side (runs, resources, changes, scopes) reads: a file
#: that has them is readable without the later ones (they add the write side's tables; 0006
#: packs the objects, and the read side reads packed and text values alike: `syncd.state.packing`).
#: Extend it when a migration changes what the read side reads. (Not for 0008: a file before it
#: holds its hashes in hex, which the read side shows as they are and compares only with each other.)
READ_NEEDS: tuple[str, ...] = ("0001_snapshots",)


def utc_now() -> str:
    """ISO 8601 UTC timestamp with milliseconds, as every timestamp in the state file."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def applied_migrations(db: Database) -> list[str]:
    """Names recorded in the file, oldest first (empty for a new file)."""
    if "migrations" not in db.table_names():
        return []
    return [row["name"] for row in db.query("SELECT name FROM migrations ORDER BY rowid")]


def _check_known(names: Sequence[str], migrations: Sequence[Migration], where: str) -> None:
    known = {m.name for m in migrations}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise NewerStateError(
            f"state file {where} was written by a newer syncd (unknown migration {unknown[0]!r}); "
            "upgrade syncd to use it"
        )


def migrate(db: Database, migrations: Sequence[Migration] = MIGRATIONS, where: str = "") -> list[str]:
    """Apply the pending migrations, each in its own transaction; return their names."""
    with _one_snapshot(db):  # (another process may be upgrading the file: its names and tables as of one commit)
        applied = applied_migrations(db)
        _check_known(applied, migrations, where)
        if applied:  # (none: a new file, or another program's, where creating syncd's tables fails on one of its own)
            check_made_by_syncd(db, applied, where, migrations)
    done: list[str] = []
    for migration in migrations:
        if migration.name in applied:
            continue  # the common case takes no write lock: readers open while a run writes
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
            # Re-read inside the write lock: another process may have just applied it.
            if db.execute("SELECT 1 FROM migrations WHERE name = ?", [migration.name]).fetchone():
                db.execute("ROLLBACK")
                continue
            told = _tell_upgrading(db, migration, where)
            migration.apply(db)
            db.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", [migration.name, utc_now()])
            db.execute("COMMIT")
        except BaseException:
            if db.conn.in_transaction:
                db.execute("ROLLBACK")
            raise
        if told is not None:
            _LOG.info("state.upgraded", file=where, migration=migration.name, seconds=round(time.monotonic() - told, 1))
        done.append(migration.name)
    return done


def _tell_upgrading(db: Database, migration: Migration, where: str) -> float | None:
    """Say that `migration` rewrites the objects of the file `where`, when it has some; the time
    it started, or None when nothing was said."""
    if not migration.rewrites or not where:
        return None
    objects = db.execute("SELECT coalesce(max(rowid), 0) FROM resources").fetchone()[0]  # (no walk: numbered as they came)
    if not objects:
        return None
    _LOG.info("state.upgrading", file=where, migration=migration.name, objects=objects,
              note="this syncd stores objects differently: it rewrites each once, in one transaction")  # fmt: skip
    return time.monotonic()


@functools.lru_cache(maxsize=16)
def made_shape(migrations: tuple[Migration, ...]) -> Shape:
    """The schema `migrations` make in a new file (built in memory, once per list)."""
    conn = sqlite3.connect(":memory:")
    try:
        migrate(Database(conn, execute_plugins=False), migrations)
        return shape_of(conn)
    finally:
        conn.close()


def check_made_by_syncd(
    db: Database, applied: Sequence[str], where: str = "", migrations: Sequence[Migration] = MIGRATIONS
) -> None:
    """StateError (one line) unless the file's schema is the one syncd's migrations `applied`
    (known ones: see `_check_known`) made: a prefix of `migrations`, in order, and the tables,
    views and triggers they make, as `syncd.state.sqlite_shape` compares them."""
    made = tuple(migrations[: len(applied)])
    if [m.name for m in made] != list(applied):
        raise StateError(f"{where} is not a syncd mirror or backup: its migrations are not the ones syncd applies, in their order")
    expected = made_shape(made)
    wrong = what_differs(shape_of(db.conn, columns_of=expected.tables.keys()), expected)
    if wrong is not None:
        raise StateError(f"{where} is not a syncd mirror or backup: {wrong}")


def check_readable(db: Database, where: str = "", migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Check, without writing, that a file can be read as it is; return its migrations.

    StateError when it holds no syncd tables; NewerStateError when a newer syncd migrated it;
    StateError when it lacks a migration `READ_NEEDS` names (an older syncd wrote it), or when
    its schema is not the one its migrations made (`check_made_by_syncd`)."""
    with _one_snapshot(db):
        if "migrations" not in db.table_names():
            raise StateError(f"{where} is not a syncd mirror or backup (it has no syncd tables)")
        applied = applied_migrations(db)
        _check_known(applied, migrations, where)
        _check_read_needs(applied, where)
        check_made_by_syncd(db, applied, where, migrations)
    return applied


def _check_read_needs(applied: Sequence[str], where: str) -> None:
    missing = [name for name in READ_NEEDS if name not in applied]
    if missing:
        raise StateError(
            f"state file {where} was written by an older syncd (it lacks migration {missing[0]!r}) and a file "
            "opened read-only is not upgraded: read it with an older syncd, or upgrade a writable copy of it "
            "with a syncd command that writes the file"
        )


@contextlib.contextmanager
def _one_snapshot(db: Database) -> Iterator[None]:
    """The reads of the block from one snapshot of the file: in the caller's transaction, or
    in a read transaction of the block's own (which takes no write lock)."""
    if db.conn.in_transaction:
        yield
        return
    db.execute("BEGIN")
    try:
        yield
    finally:
        if db.conn.in_transaction:
            db.execute("COMMIT")
