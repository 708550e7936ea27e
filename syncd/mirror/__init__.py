"""The SQLite mirror: snapshots of what the API holds, their runs and their changes.

Modules: `store` (the `Mirror`), `rows` (`Row`, `content_hash`), `diff` (pure change
arithmetic), `schema` (named migrations), `lock` (one writer process), `errors`.

Errors: MirrorError (SyncdError, exit 2)
          ├── NewerStateError   the file was written by a newer syncd
          └── MirrorBusyError   another live process is writing a run into it
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
