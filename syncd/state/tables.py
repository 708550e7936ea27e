"""The state's tables, written once for both engines: the SQLite file's migrations
(`syncd.state.sqlite_schema`) and the PostgreSQL migration "mirror-0001" (`syncd.state.pg_schema`)
render them, each in its engine's words (`Dialect.column`, `syncd.state.dialect`).

Why one definition: the two backends must hold the same tables, or code above the store would
have to know its backend. Columns are written in SQLite's words plus three of our own, which
the dialect renders: `ID` (a key that only grows: AUTOINCREMENT, an identity), `JSON` (text
checked with `json_valid` on SQLite, `json` on PostgreSQL) and `PACKED` (an object's JSON: a
BLOB on SQLite, packed or text, `syncd.state.packing`; `json` on PostgreSQL); `INTEGER` is
`BIGINT` and `TEXT` byte-ordered (`COLLATE "C"`) on PostgreSQL.

Released migrations never change in effect: these definitions are the tables as first
released (`columns`), then the columns added since (`later`, in the order their migrations
added them) and the columns whose type a migration changed (`retyped`: the table rebuilt). A
new column goes at the end of `later` with a new migration on each engine; the schema tests
compare the rendering against the SQL as released (`tests/released_schema.py`).

Indexes the same way: `indexes` are those first released (SQLite 0001 and PostgreSQL
"mirror-0001" build them; a migration that rebuilds a table recreates the indexes it has at
that step, before 0007 these), `later_indexes` those created since and `dropped` the names
dropped since; `reindex` renders one step (SQLite 0007, PostgreSQL "mirror-0002"),
`current_indexes` what a table has once every step ran. An index's name is never given to
another definition: a changed index is a new one under a new name, so a name says which
definition a file holds. Each current index is there for a query that needs it
(`tests/test_state_indexes.py`; the table in docs/development/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from syncd.state.dialect import Dialect

__all__ = [
    "CHANGES",
    "CURRENT_RESOURCES",
    "DICTIONARIES",
    "HASH_COLUMNS",
    "IDMAP",
    "JOURNAL",
    "LISTINGS",
    "MIRROR",
    "NARROWER_INDEXES",
    "RESOURCES",
    "RUNS",
    "SCOPES",
    "STAGED",
    "STAGED_SCOPES",
    "Table",
    "apart",
    "index_name",
    "stored_hashes",
]


@dataclass(frozen=True)
class Table:
    """One table: `columns` as first released, `keys` (table constraints), the columns added
    since (`later`), the columns given another type since (`retyped`, replacing those of the
    same name), its indexes as first released (whole statements, the same on both
    engines), those created since (`later_indexes`) and the names of those dropped since."""

    name: str
    columns: tuple[str, ...]
    keys: tuple[str, ...] = ()
    later: tuple[str, ...] = ()
    indexes: tuple[str, ...] = ()
    retyped: tuple[str, ...] = ()
    later_indexes: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    def create(self, dialect: Dialect, *, later: bool = True, named: str | None = None, temp: bool = False) -> str:
        """CREATE TABLE in `dialect`'s words: its current shape, or (`later=False`) its first one;
        `named`: under another name (a table rebuilt under a new name, then renamed); `temp`: a
        table of this connection only (SQLite's TEMP)."""
        retyped = {column.split(" ", 1)[0]: column for column in (self.retyped if later else ())}
        first = (retyped.get(column.split(" ", 1)[0], column) for column in self.columns)
        columns = [dialect.column(column) for column in (*first, *(self.later if later else ()))]
        body = ",\n    ".join([*columns, *self.keys])
        return f"CREATE {'TEMP ' if temp else ''}TABLE {named or self.name} (\n    {body}\n);"

    def add_columns(self, dialect: Dialect, *names: str) -> str:
        """ALTER TABLE ... ADD COLUMN for the `later` columns `names` (SQLite's migrations)."""
        by_name = {column.split(" ", 1)[0]: column for column in self.later}
        return "\n".join(f"ALTER TABLE {self.name} ADD COLUMN {dialect.column(by_name[name])};" for name in names)

    def index(self, name: str) -> str:
        """The CREATE INDEX statement of the index `name` (first released or later)."""
        return next(statement for statement in (*self.indexes, *self.later_indexes) if index_name(statement) == name)

    @property
    def current_indexes(self) -> tuple[str, ...]:
        """The indexes the table has once every migration ran."""
        return tuple(statement for statement in (*self.indexes, *self.later_indexes) if index_name(statement) not in self.dropped)

    def reindex(self, *, drop: tuple[str, ...] = (), create: tuple[str, ...] = ()) -> str:
        """One later step of the indexes: DROP INDEX for the `dropped` names `drop` (IF EXISTS:
        indexes are not part of what makes a file syncd's, `syncd.state.sqlite_shape`), then
        the `later_indexes` named `create`."""
        unknown = [name for name in drop if name not in self.dropped] + [
            name for name in create if name not in {index_name(statement) for statement in self.later_indexes}
        ]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not an index {self.name} dropped or created since first released")
        return "\n".join([*(f"DROP INDEX IF EXISTS {name};" for name in drop), *(self.index(name) for name in create)])

    def with_indexes(self, dialect: Dialect) -> str:
        """The table in its current shape, then its indexes as first released (PostgreSQL's
        "mirror-0001"; the later ones are steps of their own)."""
        return "\n".join([self.create(dialect), *self.indexes])


def index_name(statement: str) -> str:
    """The name a CREATE INDEX statement gives."""
    return statement.split(" ", 3)[2]


_RUN = "run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE"
"""The run a row belongs to: it goes with the run."""
_OBJECT = (
    "tenant TEXT NOT NULL",
    "kind TEXT NOT NULL",
    "id TEXT NOT NULL",
    "org TEXT",
    "parent_kind TEXT",
    "parent_id TEXT",
    "position INTEGER",
    "listing TEXT",
    "scope TEXT",
    "data JSON NOT NULL",
    "hash TEXT NOT NULL",
)
"""One object as read: where it sits (org, parent, position), the list it came from, its JSON
and the hash of it (`syncd.state.rows`). A staged row becomes a current one as it is."""

RUNS = Table(
    "runs",
    (
        "id ID",
        "job TEXT NOT NULL",
        "tenant TEXT NOT NULL",
        "scope_ref TEXT NOT NULL",
        "started_at TEXT NOT NULL",
        "finished_at TEXT",
        "status TEXT NOT NULL DEFAULT 'running'\n        CHECK (status IN ('running', 'complete', 'partial', 'failed', 'cancelled'))",
        "stats JSON",
        "reason TEXT",
        "pid INTEGER",
        "host TEXT",
    ),
    indexes=("CREATE INDEX runs_by_tenant ON runs (tenant, status, id);",),
)
"""One row per crawl (or write job). Ids only grow: changes, id maps and journals refer to them."""

RESOURCES = Table(
    "resources",
    (*_OBJECT, "first_seen_run INTEGER NOT NULL", "last_seen_run INTEGER NOT NULL", "deleted_run INTEGER"),
    keys=("PRIMARY KEY (tenant, kind, id)",),
    retyped=("data PACKED NOT NULL",),
    indexes=(
        "CREATE INDEX resources_current_by_kind ON resources (tenant, kind, parent_kind, parent_id, position)\n"
        "    WHERE deleted_run IS NULL;",
        "CREATE INDEX resources_current_by_org ON resources (tenant, org, kind) WHERE deleted_run IS NULL;",
        "CREATE INDEX resources_current_by_scope ON resources (tenant, scope) WHERE deleted_run IS NULL;",
        "CREATE INDEX resources_current_by_listing ON resources (tenant, listing) WHERE deleted_run IS NULL;",
        "CREATE INDEX resources_by_parent ON resources (tenant, parent_id, parent_kind, position);",
        "CREATE INDEX resources_deleted ON resources (tenant, deleted_run) WHERE deleted_run IS NOT NULL;",
    ),
    later_indexes=(
        "CREATE INDEX resources_current_by_parent ON resources (tenant, parent_id, parent_kind, kind)\n"
        "    WHERE deleted_run IS NULL;",
        "CREATE INDEX resources_current_in_scope ON resources (tenant, scope)\n"
        "    WHERE deleted_run IS NULL AND scope IS NOT NULL;",
    ),
    dropped=("resources_current_by_kind", "resources_by_parent", "resources_current_by_scope"),
)
"""The current view (deleted_run IS NULL) plus the tombstones of what was deleted. `data`
(SQLite 0006): each object's JSON packed with its kind's dictionary, or text
(`syncd.state.packing`); PostgreSQL's stays `json`.

Its indexes since 0007 (before it, 89 of a mirror's 1,512 bytes an object went to indexes
no query used, or wider than any needed): the primary key (the merge's upsert and joins, an
object by key, a kind's objects); `resources_current_by_listing` (the merge's deletions: what
a listing read cleanly no longer holds); `resources_current_by_parent` (the cascade to a
deleted object's children, and a parent's children of a kind: the crawl's carried change
requests, the copy's tree), in place of `resources_by_parent` (it held tombstones and
positions no query asks for) and `resources_current_by_kind` (the primary key's prefix serves
a kind, `resources_current_by_org` the counts); `resources_current_by_org` (an organization's
objects and counts, a tenant's counts); `resources_current_in_scope` (a space's objects:
export, a scoped crawl's carried scopes; not the rows of no scope, which `scope = ?` never
asks for); `resources_deleted` (the merge's tombstones of this run). Why the kinds stay in
`resources_current_by_parent`: without them (18 bytes an object less), SQLite takes the copy's
children of a kind through `resources_current_by_org`, every object of the kind for each
parent (docs/development/architecture.md has the table, `tests/test_state_indexes.py` checks
it)."""

STAGED = Table("staged", (_RUN, *_OBJECT), keys=("PRIMARY KEY (run, tenant, kind, id)",))
"""Rows read by a running run; merged into resources when it finishes, dropped otherwise."""

LISTINGS = Table(
    "listings",
    (_RUN, "tenant TEXT NOT NULL", "listing TEXT NOT NULL", "status TEXT NOT NULL CHECK (status IN ('ok', 'failed'))", "error TEXT"),
    keys=("PRIMARY KEY (run, tenant, listing)",),
)
"""Which lists a run read, and how it went. Only an 'ok' listing can delete rows. Failed
listings are kept after the run finishes (what was unknown, and why)."""

SCOPES = Table(
    "scopes",
    ("tenant TEXT NOT NULL", "scope TEXT NOT NULL", "token TEXT NOT NULL", "run INTEGER NOT NULL"),
    keys=("PRIMARY KEY (tenant, scope)",),
)
"""The change token (e.g. a space's revision) at which a scope was last read completely. A
scope's token only becomes current with a run that read the whole scope (or carried it
forward), so a partial read is retried next time instead of being skipped for good."""

STAGED_SCOPES = Table(
    "staged_scopes",
    (_RUN, "tenant TEXT NOT NULL", "scope TEXT NOT NULL", "token TEXT NOT NULL"),
    keys=("PRIMARY KEY (run, tenant, scope)",),
)
"""The scopes' tokens staged by a running run."""


def apart(table: Table) -> Table:
    """`table` as a TEMP table of a file writer's own connection, which shadows the file's.

    Why: a first crawl staged every object in the file, merged it into `resources`, then deleted
    it, so every object went through the WAL twice, the delete and the vacuum after it were two
    of a merge's largest steps and the file stayed twice the mirror until then. What a run
    stages needs no durability (a run that does not finish is dropped whole); what outlives it is
    copied into the file by the merge (failed listings: `listings` apart is `run_listings`, so that
    the file's own stay in sight of the same connection). Without `REFERENCES runs` (a TEMP table
    cannot refer to the file's tables).

    `data` is checked here: JSON text (`json_valid`, as `resources` checked every object it was
    merged before its values were packed, migration 0006), or a value packed by syncd, carried
    forward from `resources`."""
    columns = tuple(_STAGED_DATA if column == "data JSON NOT NULL" else "run INTEGER NOT NULL" if column == _RUN
                    else column.replace(" JSON ", " TEXT ") for column in table.columns)  # fmt: skip
    return Table(table.name, columns, table.keys, table.later)


_STAGED_DATA = "data PACKED NOT NULL CHECK (typeof(data) = 'blob' OR json_valid(data))"
"""An object's JSON as a file's writer stages it (`apart`): the check of every JSON text that
reaches `resources`, before the merge packs it."""


CHANGES = Table(
    "changes",
    (
        "seq ID",
        _RUN,
        "tenant TEXT NOT NULL",
        "kind TEXT NOT NULL",
        "id TEXT NOT NULL",
        "op TEXT NOT NULL CHECK (op IN ('created', 'updated', 'deleted', 'moved'))",
        "old_hash TEXT",
        "new_hash TEXT",
        "old_parent_id TEXT",
        "parent_id TEXT",
        "old_position INTEGER",
        "position INTEGER",
        "title TEXT",
    ),
    later=("fields JSON",),
    indexes=(
        "CREATE INDEX changes_by_run ON changes (run, tenant, kind);",
        "CREATE INDEX changes_by_resource ON changes (tenant, kind, id);",
    ),
    later_indexes=("CREATE INDEX changes_of_run ON changes (run);",),
    dropped=("changes_by_run", "changes_by_resource"),
)
"""What each finished run changed in the current view. Every row carries the state before and
after (hash, parent, position), so changes compose across runs (`syncd diff`); seq orders them
as they were committed. `fields` (SQLite 0005): what an update changed, {"changed": [{"field",
"old", "new"}, ...], "omitted": N}, bounded (`syncd.state.diff.changed_fields`), so `syncd diff`
shows old -> new; NULL for other ops, and for the updates recorded before it.

One index since 0007, `changes_of_run`: a run's changes, in commit order (seq is the rowid,
the key's tail), their totals, a range of runs for `syncd diff`. No query reads the changes of
one object (`changes_by_resource` was only ever used, wrongly, to walk a tenant's whole history
for a diff)."""

NARROWER_INDEXES = "\n".join(
    [
        RESOURCES.reindex(
            drop=("resources_current_by_kind", "resources_by_parent", "resources_current_by_scope"),
            create=("resources_current_by_parent", "resources_current_in_scope"),
        ),
        CHANGES.reindex(drop=("changes_by_run", "changes_by_resource"), create=("changes_of_run",)),
    ]
)
"""SQLite's 0007 and PostgreSQL's "mirror-0002": only the indexes a query needs, no wider than it
needs (RESOURCES and CHANGES say which query uses which). Only DROP INDEX and CREATE INDEX, so it
composes with a rebuild of a table before it (which recreates the indexes as first released)."""

HASH_COLUMNS: dict[str, tuple[str, ...]] = {"resources": ("hash",), "staged": ("hash",), "changes": ("old_hash", "new_hash")}
"""Table -> its columns that hold an object's hash (`syncd.state.rows`): what `stored_hashes`
converts, and what a copy of a file older than it converts on the way (`syncd.state.state_copy`)."""


def stored_hashes(dialect: Dialect) -> str:
    """SQLite's 0008 and PostgreSQL's "mirror-0003": each hash the mirror holds (`HASH_COLUMNS`)
    in the hex form of before them made the stored form (`syncd.state.rows`: 22 characters), so
    a run after them finds unchanged objects unchanged; any other value stays as it is, so the
    step is a no-op run again."""
    statements = []
    for table, columns in HASH_COLUMNS.items():
        if len(columns) == 1:
            (column,) = columns
            sets, where = f"{column} = {dialect.stored_of_hex(column)}", dialect.hex_hash(column)
        else:
            sets = ",\n    ".join(f"{c} = CASE WHEN {dialect.hex_hash(c)} THEN {dialect.stored_of_hex(c)} ELSE {c} END" for c in columns)
            where = " OR ".join(dialect.hex_hash(c) for c in columns)
        statements.append(f"UPDATE {table} SET {sets}\n    WHERE {where};")
    return "\n".join(statements)


CURRENT_RESOURCES = """CREATE VIEW current_resources AS
    SELECT tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash,
           first_seen_run, last_seen_run
    FROM resources WHERE deleted_run IS NULL;"""
"""For people browsing the state with sqlite-utils, Datasette or psql."""

DICTIONARIES = Table(
    "dictionaries",
    (
        "id INTEGER PRIMARY KEY",
        "kind TEXT NOT NULL",
        "dict BLOB NOT NULL",
        "trained_at TEXT NOT NULL",
        "objects INTEGER NOT NULL",
    ),
)
"""SQLite only (0006): the zstd dictionary of each kind the file's objects are packed with
(`syncd.state.dictionaries`), trained from `objects` of them. Never rewritten: packed values
name their dictionary's id."""

IDMAP = Table(
    "idmap",
    (
        "source_tenant TEXT NOT NULL",
        "source_org TEXT NOT NULL DEFAULT ''",
        "kind TEXT NOT NULL",
        "source_id TEXT NOT NULL",
        "target_tenant TEXT NOT NULL",
        "target_org TEXT NOT NULL DEFAULT ''",
        "target_id TEXT NOT NULL",
        "origin TEXT NOT NULL DEFAULT 'created' CHECK (origin IN ('created', 'adopted'))",
        "run INTEGER",
    ),
    keys=("PRIMARY KEY (source_tenant, source_org, kind, source_id, target_tenant, target_org)",),
    indexes=("CREATE INDEX idmap_by_target ON idmap (target_tenant, target_org, kind, target_id);",),
)
"""Source id -> target id of everything syncd created or matched on a target, per (source
organization, target organization) pair; `origin` says whether syncd created the target object
(only those may be deleted by a mirror) or adopted it. (SQLite's first id map, of 0002, had no
organizations: `sqlite_schema` keeps it.)"""

JOURNAL = Table(
    "journal",
    (
        _RUN,
        "seq INTEGER NOT NULL",
        "target_tenant TEXT NOT NULL",
        "kind TEXT",
        "source_id TEXT",
        "method TEXT NOT NULL",
        "path TEXT NOT NULL",
        "body JSON",
        "state TEXT NOT NULL DEFAULT 'planned' CHECK (state IN ('planned', 'sent', 'done', 'failed'))",
        "result_id TEXT",
        "attempts INTEGER NOT NULL DEFAULT 0",
        "error TEXT",
        "updated_at TEXT",
    ),
    keys=("PRIMARY KEY (run, seq)",),
    later=("op_key TEXT", "target_org TEXT", "source_org TEXT", "source_tenant TEXT", "op JSON"),
    indexes=(
        "CREATE INDEX journal_open ON journal (target_tenant, state) WHERE state IN ('planned', 'sent');",
        "CREATE INDEX journal_by_key ON journal (target_tenant, target_org, op_key);",
    ),
)
"""Write intents of an apply run, written before each call and completed after it. `op`
(SQLite 0004): the whole op (`ops.op_to_json`) of each intent: a later run reconciles an intent
whose effect is unknown with the op's `match`, even when its new plan no longer holds that op."""

MIRROR: tuple[Table, ...] = (RUNS, RESOURCES, STAGED, LISTINGS, SCOPES, STAGED_SCOPES, CHANGES, IDMAP, JOURNAL)
"""Every table of the state, in an order the foreign keys accept (runs first)."""
