"""The state's table definitions as they were released, frozen: what the schema tests compare
the rendered SQL (`syncd.state.tables`, rendered per dialect) against.

Why a frozen copy: a released migration must never change in effect, and the code now renders
its SQL from one definition of each table. The SQLite scripts below are migrations 0001-0008 of
the state file as released (0006 and 0008 call syncd's SQL functions `syncd_pack` and
`syncd_stored_hash`, which every connection syncd opens has: `syncd.state.packing`);
`PG_MIRROR_0001`, `PG_MIRROR_0002` and `PG_MIRROR_0003` are the PostgreSQL migrations
"mirror-0001" to "mirror-0003" as released. Never edit them: a test that fails against them means
the rendering changed a released migration.
"""

from __future__ import annotations

SQLITE_0001_SNAPSHOTS = """
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

SQLITE_0002_REPLICATION = """
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

SQLITE_0003_IDMAP_PER_ORGANIZATION = """
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

SQLITE_0004_JOURNAL_OP = """
-- The whole op (ops.op_to_json) of each intent: a later run reconciles an intent whose effect
-- is unknown with the op's `match`, even when its new plan no longer holds that op.
ALTER TABLE journal ADD COLUMN op TEXT CHECK (op IS NULL OR json_valid(op));
"""

SQLITE_0005_CHANGE_FIELDS = """
-- What an update changed: {"changed": [{"field", "old", "new"}, ...], "omitted": N}, bounded
-- (syncd.state.diff.changed_fields), so `syncd diff` shows old -> new. NULL for other ops,
-- and for the updates recorded before this migration.
ALTER TABLE changes ADD COLUMN fields TEXT CHECK (fields IS NULL OR json_valid(fields));
"""

SQLITE_0006_PACKED_OBJECTS = """
-- Each object's JSON packed with zstd and a dictionary of its kind (syncd.state.packing). The
-- dictionaries are trained in Python from the file's own objects right after this table is made
-- (syncd.state.dictionaries.for_file), then resources is rebuilt with data BLOB (packed, or text
-- where that is shorter; no json_valid check: what reaches it is checked as it is staged), its
-- rows packed on the way, then its indexes as the file had them (these six), and its view.
CREATE TABLE dictionaries (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    dict BLOB NOT NULL,
    trained_at TEXT NOT NULL,
    objects INTEGER NOT NULL
);
DROP VIEW current_resources;
ALTER TABLE resources RENAME TO resources_text;
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
    data BLOB NOT NULL,
    hash TEXT NOT NULL,
    first_seen_run INTEGER NOT NULL,
    last_seen_run INTEGER NOT NULL,
    deleted_run INTEGER,
    PRIMARY KEY (tenant, kind, id)
);
INSERT INTO resources (tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash, first_seen_run, last_seen_run, deleted_run)
    SELECT tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, syncd_pack(kind, data), hash, first_seen_run, last_seen_run, deleted_run FROM resources_text;
DROP TABLE resources_text;
CREATE INDEX resources_current_by_kind ON resources (tenant, kind, parent_kind, parent_id, position)
    WHERE deleted_run IS NULL;
CREATE INDEX resources_current_by_org ON resources (tenant, org, kind) WHERE deleted_run IS NULL;
CREATE INDEX resources_current_by_scope ON resources (tenant, scope) WHERE deleted_run IS NULL;
CREATE INDEX resources_current_by_listing ON resources (tenant, listing) WHERE deleted_run IS NULL;
CREATE INDEX resources_by_parent ON resources (tenant, parent_id, parent_kind, position);
CREATE INDEX resources_deleted ON resources (tenant, deleted_run) WHERE deleted_run IS NOT NULL;
CREATE VIEW current_resources AS
    SELECT tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash,
           first_seen_run, last_seen_run
    FROM resources WHERE deleted_run IS NULL;
"""

SQLITE_0007_NARROWER_INDEXES = """
-- Only the indexes a query needs, no wider than it needs (issue 44). By parent: current rows
-- only, with their kind (the cascade, children of a kind), not their position; the primary
-- key serves a kind's objects, resources_current_by_org the counts. By scope: only rows that
-- have one. Changes by run alone: seq, the rowid, orders them within it.
DROP INDEX IF EXISTS resources_current_by_kind;
DROP INDEX IF EXISTS resources_by_parent;
DROP INDEX IF EXISTS resources_current_by_scope;
CREATE INDEX resources_current_by_parent ON resources (tenant, parent_id, parent_kind, kind)
    WHERE deleted_run IS NULL;
CREATE INDEX resources_current_in_scope ON resources (tenant, scope)
    WHERE deleted_run IS NULL AND scope IS NOT NULL;
DROP INDEX IF EXISTS changes_by_run;
DROP INDEX IF EXISTS changes_by_resource;
CREATE INDEX changes_of_run ON changes (run);
"""

SQLITE_0008_STORED_HASHES = """
-- Each hash the file holds (issue 44) in the form stored since: the first 128 bits of the
-- sha256 as base64url without padding, 22 characters, not 64 hex (syncd.state.rows). Only
-- hashes of 64 hex characters are converted, so running it again changes nothing. SQLite has
-- no base64: syncd_stored_hash is syncd's (syncd.state.rows.stored_of_hex).
UPDATE resources SET hash = syncd_stored_hash(hash)
    WHERE (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*');
UPDATE staged SET hash = syncd_stored_hash(hash)
    WHERE (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*');
UPDATE changes SET old_hash = CASE WHEN (length(old_hash) = 64 AND old_hash NOT GLOB '*[^0-9a-f]*') THEN syncd_stored_hash(old_hash) ELSE old_hash END,
    new_hash = CASE WHEN (length(new_hash) = 64 AND new_hash NOT GLOB '*[^0-9a-f]*') THEN syncd_stored_hash(new_hash) ELSE new_hash END
    WHERE (length(old_hash) = 64 AND old_hash NOT GLOB '*[^0-9a-f]*') OR (length(new_hash) = 64 AND new_hash NOT GLOB '*[^0-9a-f]*');
"""

_PG_TABLES = """
CREATE TABLE runs (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    job TEXT NOT NULL,
    tenant TEXT NOT NULL,
    scope_ref TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'complete', 'partial', 'failed', 'cancelled')),
    stats JSON,
    reason TEXT,
    pid BIGINT,
    host TEXT
);
CREATE INDEX runs_by_tenant ON runs (tenant, status, id);

CREATE TABLE resources (
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    org TEXT,
    parent_kind TEXT,
    parent_id TEXT,
    position BIGINT,
    listing TEXT,
    scope TEXT,
    data JSON NOT NULL,
    hash TEXT NOT NULL,
    first_seen_run BIGINT NOT NULL,
    last_seen_run BIGINT NOT NULL,
    deleted_run BIGINT,
    PRIMARY KEY (tenant, kind, id)
);
CREATE INDEX resources_current_by_kind ON resources (tenant, kind, parent_kind, parent_id, position)
    WHERE deleted_run IS NULL;
CREATE INDEX resources_current_by_org ON resources (tenant, org, kind) WHERE deleted_run IS NULL;
CREATE INDEX resources_current_by_scope ON resources (tenant, scope) WHERE deleted_run IS NULL;
CREATE INDEX resources_current_by_listing ON resources (tenant, listing) WHERE deleted_run IS NULL;
CREATE INDEX resources_by_parent ON resources (tenant, parent_id, parent_kind, position);
CREATE INDEX resources_deleted ON resources (tenant, deleted_run) WHERE deleted_run IS NOT NULL;

CREATE TABLE staged (
    run BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    org TEXT,
    parent_kind TEXT,
    parent_id TEXT,
    position BIGINT,
    listing TEXT,
    scope TEXT,
    data JSON NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (run, tenant, kind, id)
);

CREATE TABLE listings (
    run BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    listing TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error TEXT,
    PRIMARY KEY (run, tenant, listing)
);

CREATE TABLE scopes (
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    token TEXT NOT NULL,
    run BIGINT NOT NULL,
    PRIMARY KEY (tenant, scope)
);
CREATE TABLE staged_scopes (
    run BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    token TEXT NOT NULL,
    PRIMARY KEY (run, tenant, scope)
);

CREATE TABLE changes (
    seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('created', 'updated', 'deleted', 'moved')),
    old_hash TEXT,
    new_hash TEXT,
    old_parent_id TEXT,
    parent_id TEXT,
    old_position BIGINT,
    position BIGINT,
    title TEXT,
    fields JSON
);
CREATE INDEX changes_by_run ON changes (run, tenant, kind);
CREATE INDEX changes_by_resource ON changes (tenant, kind, id);

CREATE VIEW current_resources AS
    SELECT tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash,
           first_seen_run, last_seen_run
    FROM resources WHERE deleted_run IS NULL;

CREATE TABLE idmap (
    source_tenant TEXT NOT NULL,
    source_org TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    source_id TEXT NOT NULL,
    target_tenant TEXT NOT NULL,
    target_org TEXT NOT NULL DEFAULT '',
    target_id TEXT NOT NULL,
    origin TEXT NOT NULL DEFAULT 'created' CHECK (origin IN ('created', 'adopted')),
    run BIGINT,
    PRIMARY KEY (source_tenant, source_org, kind, source_id, target_tenant, target_org)
);
CREATE INDEX idmap_by_target ON idmap (target_tenant, target_org, kind, target_id);

CREATE TABLE journal (
    run BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    target_tenant TEXT NOT NULL,
    kind TEXT,
    source_id TEXT,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    body JSON,
    state TEXT NOT NULL DEFAULT 'planned' CHECK (state IN ('planned', 'sent', 'done', 'failed')),
    result_id TEXT,
    attempts BIGINT NOT NULL DEFAULT 0,
    error TEXT,
    updated_at TEXT,
    op_key TEXT,
    target_org TEXT,
    source_org TEXT,
    source_tenant TEXT,
    op JSON,
    PRIMARY KEY (run, seq)
);
CREATE INDEX journal_open ON journal (target_tenant, state) WHERE state IN ('planned', 'sent');
CREATE INDEX journal_by_key ON journal (target_tenant, target_org, op_key);
"""

PG_MIRROR_0001 = _PG_TABLES.replace(" TEXT", ' TEXT COLLATE "C"')

PG_MIRROR_0002 = """
DROP INDEX IF EXISTS resources_current_by_kind;
DROP INDEX IF EXISTS resources_by_parent;
DROP INDEX IF EXISTS resources_current_by_scope;
CREATE INDEX resources_current_by_parent ON resources (tenant, parent_id, parent_kind, kind)
    WHERE deleted_run IS NULL;
CREATE INDEX resources_current_in_scope ON resources (tenant, scope)
    WHERE deleted_run IS NULL AND scope IS NOT NULL;
DROP INDEX IF EXISTS changes_by_run;
DROP INDEX IF EXISTS changes_by_resource;
CREATE INDEX changes_of_run ON changes (run);
"""

PG_MIRROR_0003 = """
UPDATE resources SET hash = rtrim(translate(encode(decode(left(hash, 32), 'hex'), 'base64'), '+/', '-_'), '=')
    WHERE (length(hash) = 64 AND hash ~ '^[0-9a-f]*$');
UPDATE staged SET hash = rtrim(translate(encode(decode(left(hash, 32), 'hex'), 'base64'), '+/', '-_'), '=')
    WHERE (length(hash) = 64 AND hash ~ '^[0-9a-f]*$');
UPDATE changes SET old_hash = CASE WHEN (length(old_hash) = 64 AND old_hash ~ '^[0-9a-f]*$') THEN rtrim(translate(encode(decode(left(old_hash, 32), 'hex'), 'base64'), '+/', '-_'), '=') ELSE old_hash END,
    new_hash = CASE WHEN (length(new_hash) = 64 AND new_hash ~ '^[0-9a-f]*$') THEN rtrim(translate(encode(decode(left(new_hash, 32), 'hex'), 'base64'), '+/', '-_'), '=') ELSE new_hash END
    WHERE (length(old_hash) = 64 AND old_hash ~ '^[0-9a-f]*$') OR (length(new_hash) = 64 AND new_hash ~ '^[0-9a-f]*$');
"""

SQLITE_MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_snapshots", SQLITE_0001_SNAPSHOTS),
    ("0002_replication", SQLITE_0002_REPLICATION),
    ("0003_idmap_per_organization", SQLITE_0003_IDMAP_PER_ORGANIZATION),
    ("0004_journal_op", SQLITE_0004_JOURNAL_OP),
    ("0005_change_fields", SQLITE_0005_CHANGE_FIELDS),
    ("0006_packed_objects", SQLITE_0006_PACKED_OBJECTS),
    ("0007_narrower_indexes", SQLITE_0007_NARROWER_INDEXES),
    ("0008_stored_hashes", SQLITE_0008_STORED_HASHES),
)
"""(name, script) of each released migration of the state file, in order."""
