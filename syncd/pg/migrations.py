"""Tables on the PostgreSQL state, built by named, transactional migrations.

The same rules as the SQLite state file's (`syncd.state.sqlite_schema`): each migration runs
once, in one transaction with the row that records it in `fleet_migrations`; a server that names a
migration this syncd does not know was upgraded by a newer syncd and is refused. Replicas
starting together take a transaction-level advisory lock first, so only one of them upgrades
and the others find the work done.

Why a runner and a ledger here, and the SQL with its owners: this layer imports nothing above
it. Each owner hands `migrate` its own tables (the store's mirror, `syncd.state.pg_schema`; the
budget's, `syncd.pg.budget`; the fleet's runs, `syncd.daemon.fleet_tables`), and creates them
when it first uses the server. `LEDGER` names every migration this syncd knows, whoever owns
it: a server is refused for a name missing from it, whichever owner looks, and owners' lists
handed together are applied in its order.

Tables live in the connection's current schema (`search_path`): one server can hold several
fleets, and each test its own.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import psycopg

from syncd.pg.connect import PgError

__all__ = ["LEDGER", "PgMigration", "applied_migrations", "migrate", "unknown_migrations"]

_LOCK_KEY = 0x5359_4E43_4400_0001  # "SYNCD" + 1: the advisory lock that serialises upgrades


@dataclass(frozen=True)
class PgMigration:
    name: str
    sql: str


LEDGER: tuple[str, ...] = (
    "0001-runs",  # the fleet's runs, replicas and job leases (syncd.daemon.fleet_tables)
    "mirror-0001",  # the mirror, id map and journal (syncd.state.pg_schema)
    "0002-token-budgets",  # the shared request budgets (syncd.pg.budget)
    "0003-budget-key-secret",  # (syncd.pg.budget)
    "0004-run-backends",  # the server sessions of a run (syncd.daemon.fleet_tables)
    "0005-pause-cancel",  # paused jobs, a cancel asked of a run (syncd.daemon.fleet_tables)
    "mirror-0002",  # the mirror's indexes the queries need (syncd.state.pg_schema)
    "mirror-0003",  # the mirror's hashes in the shorter form stored since (syncd.state.pg_schema)
)
"""Every migration this syncd knows, in release order. Append a new one here and to its owner's
list; never rename, edit or reorder a released one."""


def applied_migrations(conn: psycopg.Connection) -> list[str]:
    """The names the server records, oldest first (empty for a new server)."""
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass('fleet_migrations') IS NOT NULL")
        row = cur.fetchone()
        if not row or not row[0]:
            return []
        cur.execute("SELECT name FROM fleet_migrations ORDER BY applied_at, name")
        return [name for (name,) in cur.fetchall()]


def unknown_migrations(applied: Sequence[str], known: Collection[str] = LEDGER) -> list[str]:
    """The applied names this syncd does not know: a newer syncd upgraded the server."""
    return [name for name in applied if name not in known]


def migrate(conn: psycopg.Connection, migrations: Sequence[PgMigration], *, known: Sequence[str] = LEDGER) -> list[str]:
    """Apply what is missing of `migrations` (owners' lists together: each name once), in
    `known`'s order; returns the names applied now. `known`: every name this syncd knows (the
    ledger). `conn` must be in autocommit mode (each migration is its own transaction)."""
    strays = [m.name for m in migrations if m.name not in known]
    if strays:
        raise ValueError(f"migration {strays[0]!r} is missing from the ledger (syncd.pg.migrations.LEDGER)")
    todo = sorted(dict.fromkeys(migrations), key=lambda m: known.index(m.name))
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS fleet_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )
        done = applied_migrations(conn)
        unknown = unknown_migrations(done, known)
        if unknown:
            raise PgError(
                f"the PostgreSQL state was upgraded by a newer syncd (migration {unknown[0]!r} is unknown here): upgrade syncd"
            )
        for migration in todo:
            if migration.name in done:
                continue
            with conn.transaction():  # a savepoint: a failing step names itself
                try:
                    conn.execute(migration.sql)
                except psycopg.Error as exc:
                    raise PgError(f"migration {migration.name!r} of the PostgreSQL state failed: {exc}".splitlines()[0]) from None
                conn.execute("INSERT INTO fleet_migrations (name) VALUES (%s)", (migration.name,))
            applied_now.append(migration.name)
    return applied_now
