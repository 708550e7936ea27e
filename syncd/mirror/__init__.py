"""The mirror: snapshots of what the API holds, their runs and their changes, in a SQLite
file or in the PostgreSQL state (`Mirror(state_url)`, issue 13).

Modules: `store` (the `Mirror`; `reads`, `staging`, `holds` and `merge` are its parts), `rows`
(`Row`, `content_hash`), `diff` (pure change arithmetic), `schema` (named migrations of the
file), `sqlite_file` (opening it), `lock` (one writer process of a file), `dialect` (the
statements that differ between the engines), `pg`, `pg_schema` and `pg_writers` (the
PostgreSQL backend; one writer process per tenant), `errors`.

Errors: MirrorError (SyncdError, exit 2)
          ├── NewerStateError   the file was written by a newer syncd
          └── MirrorBusyError   another live process is writing a run into it (of the tenant)
"""

from syncd.mirror.diff import OPS, ChangeSummary, compose, summarise
from syncd.mirror.errors import MirrorBusyError, MirrorError, NewerStateError
from syncd.mirror.rows import Row, canonical_json, content_hash
from syncd.mirror.schema import MIGRATIONS, Migration, applied_migrations, migrate
from syncd.mirror.store import FINISHED, Mirror

__all__ = [
    "FINISHED",
    "MIGRATIONS",
    "OPS",
    "ChangeSummary",
    "Migration",
    "Mirror",
    "MirrorBusyError",
    "MirrorError",
    "NewerStateError",
    "Row",
    "applied_migrations",
    "canonical_json",
    "compose",
    "content_hash",
    "migrate",
    "summarise",
]
