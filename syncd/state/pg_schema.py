"""The mirror's tables on PostgreSQL: the same tables as the SQLite state file, in their
current shape (a new server needs no history), applied as the PostgreSQL migration
"mirror-0001" (`syncd.pg.migrations`) when a StateStore first opens the server, then the later
steps ("mirror-0002": the indexes the queries need, as the SQLite file's 0007; "mirror-0003": the
hashes in the form stored since, as its 0008).

The tables are written once for both engines (`syncd.state.tables`) and rendered here in
PostgreSQL's words (`syncd.state.dialect.POSTGRES`: why these types). Append new steps as new
migrations (and to `syncd.pg.migrations.LEDGER`); never change this one in effect once released
(`tests/released_schema.py` holds it as released).
"""

from __future__ import annotations

from syncd.pg.migrations import PgMigration
from syncd.state.dialect import POSTGRES
from syncd.state.tables import CHANGES, CURRENT_RESOURCES, MIRROR, NARROWER_INDEXES, stored_hashes

__all__ = ["MIRROR_0002", "MIRROR_0003", "MIRROR_MIGRATIONS", "MIRROR_TABLES"]


def _tables() -> str:
    """Every table with its indexes, the view after the tables it reads."""
    parts = []
    for table in MIRROR:
        parts.append(table.with_indexes(POSTGRES))
        if table is CHANGES:
            parts.append(CURRENT_RESOURCES)
    return "\n\n".join(parts) + "\n"


MIRROR_TABLES = _tables()
"""The SQL of migration "mirror-0001"."""

MIRROR_0002 = NARROWER_INDEXES + "\n"
"""The SQL of migration "mirror-0002": the indexes of the SQLite file's 0007, the same statements
(the same queries run on both engines). A new server runs it right after "mirror-0001", some of
whose indexes it drops: the price of never changing a released migration, paid once on empty
tables."""

MIRROR_0003 = stored_hashes(POSTGRES) + "\n"
"""The SQL of migration "mirror-0003": every hash the state holds in hex (64 characters) in the
form stored since (22: `syncd.state.rows`), in SQL, as the SQLite file's 0008 does with Python's
function; a new server runs it on empty tables."""

MIRROR_MIGRATIONS: tuple[PgMigration, ...] = (
    PgMigration("mirror-0001", MIRROR_TABLES),
    PgMigration("mirror-0002", MIRROR_0002),
    PgMigration("mirror-0003", MIRROR_0003),
)
"""The store's migrations on PostgreSQL, applied when a StateStore opens the server to write."""
