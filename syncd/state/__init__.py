"""The local store: what the user configures as `state_dir` (a SQLite file) or `state_url` (a
PostgreSQL a fleet shares): snapshots of what the API holds, their runs and their changes, the
id maps and journals of copies. Users call it "the mirror file"; in the code "mirror" is only
the copy mode (`syncd mirror ...`).

Modules: `store` (the `StateStore`; `reads`, `staging`, `holds` and `merge` are its parts),
`location` (the backend chosen once: a file or a server), `rows` (`Row`, `stored_hash`, `content_hash`), `diff`
(pure change arithmetic), `tables` (every table, written once for both engines), `dialect` (what
differs between the engines: statements and column types), `sqlite_schema` (named migrations of
the file), `sqlite_file` (opening it), `packing` and `dictionaries` (each object's JSON packed
with zstd and a dictionary of its kind, in the file), `lock` (one writer process of a file), `pg_database`,
`pg_schema` and `pg_writers` (the PostgreSQL backend; one writer process per tenant),
`state_copy` and `migrate_state` (`syncd state migrate`: a file into a server; the daemon's
history is handed in by the command), `errors`.

Errors: StateError (SyncdError, exit 2)
          ├── NewerStateError   the file was written by a newer syncd
          ├── StateBusyError   another live process is writing a run into it (of the tenant)
          └── PackedDataError  a packed object that does not unpack (`packing`)
"""

from syncd.state.diff import OPS, ChangeSummary, compose, summarise
from syncd.state.errors import NewerStateError, StateBusyError, StateError
from syncd.state.rows import Row, canonical_json, content_hash, stored_hash
from syncd.state.sqlite_schema import MIGRATIONS, Migration, applied_migrations, migrate
from syncd.state.store import FINISHED, StateStore

__all__ = [
    "FINISHED",
    "MIGRATIONS",
    "OPS",
    "ChangeSummary",
    "Migration",
    "StateStore",
    "StateBusyError",
    "StateError",
    "NewerStateError",
    "Row",
    "applied_migrations",
    "canonical_json",
    "compose",
    "content_hash",
    "migrate",
    "stored_hash",
    "summarise",
]
