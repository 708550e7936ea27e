"""The mirror's tables on PostgreSQL: the same tables as the SQLite state file, in their
current shape (a new server needs no history), applied as the PostgreSQL migration
"mirror-0001" (`syncd.pg.migrations`) when a StateStore first opens the server.

The tables are written once for both engines (`syncd.state.tables`) and rendered here in
PostgreSQL's words (`syncd.state.dialect.POSTGRES`: why these types). Append new steps as new
migrations (and to `syncd.pg.migrations.LEDGER`); never change this one in effect once released
(`tests/released_schema.py` holds it as released).
"""

from __future__ import annotations

from syncd.pg.migrations import PgMigration
from syncd.state.dialect import POSTGRES
from syncd.state.tables import CHANGES, CURRENT_RESOURCES, MIRROR

__all__ = ["MIRROR_MIGRATIONS", "MIRROR_TABLES"]


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

MIRROR_MIGRATIONS: tuple[PgMigration, ...] = (PgMigration("mirror-0001", MIRROR_TABLES),)
"""The store's migrations on PostgreSQL, applied when a StateStore opens the server to write."""
