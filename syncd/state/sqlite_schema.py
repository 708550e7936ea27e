"""The schema of the state file, built by named, transactional migrations.

Why named migrations: a state file outlives the syncd that wrote it. Each migration runs
once, in its own `BEGIN IMMEDIATE` transaction together with the row that records it in
`migrations(name, applied_at)`, so a crash mid-upgrade leaves the file as it was and two
processes opening an old file at once do not both upgrade it. A file that names a migration
this syncd does not know was written by a newer syncd: refuse it rather than guess.

Append new migrations at the end of `MIGRATIONS`; never edit or reorder a released one.

A file opened read-only (`StateStore(path, readonly=True)`: a backup being exported, restored or
looked at) is never migrated: `check_readable` reads it as it is when the migrations the read
side needs (`READ_NEEDS`) are there, and refuses it in one line otherwise.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlite_utils import Database

from syncd.state.errors import StateError, NewerStateError

__all__ = ["MIGRATIONS", "READ_NEEDS", "Migration", "applied_migrations", "check_readable", "migrate", "utc_now"]


@dataclass(frozen=True)
class Migration:
    """One schema step: `name` is recorded in `migrations`, `apply` changes the schema."""

    name: str
    apply: Callable[[Database], None]


_SNAPSHOTS = """
-- One row per crawl (or later, per write job). Ids only grow (AUTOINCREMENT): changes,
-- id maps and journals refer to them.
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    tenant TEXT NOT NULL,
    scope_ref TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'complete', 'partial', 'failed', 'cancelled')),
    stats TEXT CHECK (stats IS NULL OR json_valid(stats)),
    reason TEXT,
    pid INTEGER,
    host TEXT
);
CREATE INDEX runs_by_tenant ON runs (tenant, status, id);

-- The current view (deleted_run IS NULL) plus the tombstones of what was deleted.
CREATE TABLE resources (
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    org TEXT,
    parent_kind TEXT,
    parent_id TEXT,
    position INTEGER,
    listing TEXT,
    scope TEXT,
    data TEXT NOT NULL CHECK (json_valid(data)),
    hash TEXT NOT NULL,
    first_seen_run INTEGER NOT NULL,
    last_seen_run INTEGER NOT NULL,
    deleted_run INTEGER,
    PRIMARY KEY (tenant, kind, id)
);
CREATE INDEX resources_current_by_kind ON resources (tenant, kind, parent_kind, parent_id, position)
    WHERE deleted_run IS NULL;
CREATE INDEX resources_current_by_org ON resources (tenant, org, kind) WHERE deleted_run IS NULL;
CREATE INDEX resources_current_by_scope ON resources (tenant, scope) WHERE deleted_run IS NULL;
CREATE INDEX resources_current_by_listing ON resources (tenant, listing) WHERE deleted_run IS NULL;
CREATE INDEX resources_by_parent ON resources (tenant, parent_id, parent_kind, position);
CREATE INDEX resources_deleted ON resources (tenant, deleted_run) WHERE deleted_run IS NOT NULL;

-- Rows read by a running run; merged into resources when it finishes, dropped otherwise.
CREATE TABLE staged (
    run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    org TEXT,
    parent_kind TEXT,
    parent_id TEXT,
    position INTEGER,
    listing TEXT,
    scope TEXT,
    data TEXT NOT NULL CHECK (json_valid(data)),
    hash TEXT NOT NULL,
    PRIMARY KEY (run, tenant, kind, id)
);

-- Which lists a run read, and how it went. Only an 'ok' listing can delete rows.
-- Failed listings are kept after the run finishes (what was unknown, and why).
CREATE TABLE listings (
    run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    listing TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error TEXT,
    PRIMARY KEY (run, tenant, listing)
);

-- The change token (e.g. a space's revision) at which a scope was last read completely,
-- and the staging of those tokens by a running run. A scope's token only becomes current
-- with a run that read the whole scope (or carried it forward), so a partial read is
-- retried next time instead of being skipped for good.
CREATE TABLE scopes (
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    token TEXT NOT NULL,
    run INTEGER NOT NULL,
    PRIMARY KEY (tenant, scope)
);
CREATE TABLE staged_scopes (
    run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    token TEXT NOT NULL,
    PRIMARY KEY (run, tenant, scope)
);

-- What each finished run changed in the current view. Every row carries the state before
-- and after (hash, parent, position), so changes compose across runs (`syncd diff`).
-- seq orders them as they were committed.
CREATE TABLE changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('created', 'updated', 'deleted', 'moved')),
    old_hash TEXT,
    new_hash TEXT,
    old_parent_id TEXT,
    parent_id TEXT,
    old_position INTEGER,
    position INTEGER,
    title TEXT
);
CREATE INDEX changes_by_run ON changes (run, tenant, kind);
CREATE INDEX changes_by_resource ON changes (tenant, kind, id);

-- For people browsing the file with sqlite-utils or Datasette.
CREATE VIEW current_resources AS
    SELECT tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash,
           first_seen_run, last_seen_run
    FROM resources WHERE deleted_run IS NULL;
"""

_IDMAP_PER_ORG = """
-- The id map is per (source organization, target organization) pair, and remembers whether
-- syncd created the target object (only those may be deleted by a mirror) or adopted it.
CREATE TABLE idmap_new (
    source_tenant TEXT NOT NULL,
    source_org TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    source_id TEXT NOT NULL,
    target_tenant TEXT NOT NULL,
    target_org TEXT NOT NULL DEFAULT '',
    target_id TEXT NOT NULL,
    origin TEXT NOT NULL DEFAULT 'created' CHECK (origin IN ('created', 'adopted')),
    run INTEGER,
    PRIMARY KEY (source_tenant, source_org, kind, source_id, target_tenant, target_org)
);
INSERT INTO idmap_new (source_tenant, kind, source_id, target_tenant, target_id, run)
    SELECT source_tenant, kind, source_id, target_tenant, target_id, run FROM idmap;
DROP TABLE idmap;
ALTER TABLE idmap_new RENAME TO idmap;
CREATE INDEX idmap_by_target ON idmap (target_tenant, target_org, kind, target_id);
ALTER TABLE journal ADD COLUMN op_key TEXT;
ALTER TABLE journal ADD COLUMN target_org TEXT;
ALTER TABLE journal ADD COLUMN source_org TEXT;
ALTER TABLE journal ADD COLUMN source_tenant TEXT;
CREATE INDEX journal_by_key ON journal (target_tenant, target_org, op_key);
"""

_JOURNAL_OP = """
-- The whole op (ops.op_to_json) of each intent: a later run reconciles an intent whose effect
-- is unknown with the op's `match`, even when its new plan no longer holds that op.
ALTER TABLE journal ADD COLUMN op TEXT CHECK (op IS NULL OR json_valid(op));
"""

_REPLICATION = """
-- Source id -> target id of everything syncd created or matched on a target.
CREATE TABLE idmap (
    source_tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    source_id TEXT NOT NULL,
    target_tenant TEXT NOT NULL,
    target_id TEXT NOT NULL,
    run INTEGER,
    PRIMARY KEY (source_tenant, kind, source_id, target_tenant)
);
CREATE INDEX idmap_by_target ON idmap (target_tenant, kind, target_id);

-- Write intents of an apply run, written before each call and completed after it.
CREATE TABLE journal (
    run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    target_tenant TEXT NOT NULL,
    kind TEXT,
    source_id TEXT,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    body TEXT CHECK (body IS NULL OR json_valid(body)),
    state TEXT NOT NULL DEFAULT 'planned' CHECK (state IN ('planned', 'sent', 'done', 'failed')),
    result_id TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    updated_at TEXT,
    PRIMARY KEY (run, seq)
);
CREATE INDEX journal_open ON journal (target_tenant, state) WHERE state IN ('planned', 'sent');
"""


_CHANGE_FIELDS = """
-- What an update changed: {"changed": [{"field", "old", "new"}, ...], "omitted": N}, bounded
-- (syncd.state.diff.changed_fields), so `syncd diff` shows old -> new. NULL for other ops,
-- and for the updates recorded before this migration.
ALTER TABLE changes ADD COLUMN fields TEXT CHECK (fields IS NULL OR json_valid(fields));
"""


def _script(sql: str) -> Callable[[Database], None]:
    def apply(db: Database) -> None:
        db.executescript(sql)

    return apply


MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_snapshots", _script(_SNAPSHOTS)),
    Migration("0002_replication", _script(_REPLICATION)),
    Migration("0003_idmap_per_organization", _script(_IDMAP_PER_ORG)),
    Migration("0004_journal_op", _script(_JOURNAL_OP)),
    Migration("0005_change_fields", _script(_CHANGE_FIELDS)),
)


#: The migrations whose tables the read side (runs, resources, changes, scopes) reads: a file
#: that has them is readable without the later ones (they add the write side's tables).
#: Extend it when a migration changes what the read side reads.
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
    applied = applied_migrations(db)
    _check_known(applied, migrations, where)
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
            migration.apply(db)
            db.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", [migration.name, utc_now()])
            db.execute("COMMIT")
        except BaseException:
            if db.conn.in_transaction:
                db.execute("ROLLBACK")
            raise
        done.append(migration.name)
    return done


def check_readable(db: Database, where: str = "", migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Check, without writing, that a file can be read as it is; return its migrations.

    StateError when it holds no syncd tables; NewerStateError when a newer syncd migrated it;
    StateError when it lacks a migration `READ_NEEDS` names (an older syncd wrote it)."""
    if "migrations" not in db.table_names():
        raise StateError(f"{where} is not a syncd mirror or backup (it has no syncd tables)")
    applied = applied_migrations(db)
    _check_known(applied, migrations, where)
    missing = [name for name in READ_NEEDS if name not in applied]
    if missing:
        raise StateError(
            f"state file {where} was written by an older syncd (it lacks migration {missing[0]!r}) and a file "
            "opened read-only is not upgraded: read it with an older syncd, or upgrade a writable copy of it "
            "with a syncd command that writes the file"
        )
    return applied
