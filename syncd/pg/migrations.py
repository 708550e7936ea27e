"""The shared state's tables on PostgreSQL, built by named, transactional migrations.

The same rules as the SQLite state file's (`syncd.state.sqlite_schema`): each migration runs once,
in one transaction with the row that records it in `fleet_migrations`; a server that names a
migration this syncd does not know was upgraded by a newer syncd and is refused. Replicas
starting together take a transaction-level advisory lock first, so only one of them upgrades
and the others find the work done.

Tables live in the connection's current schema (`search_path`): one server can hold several
fleets, and each test its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from syncd.pg.connect import PgError
from syncd.state.pg_schema import MIRROR_TABLES

__all__ = ["FLEET_MIGRATIONS", "FleetMigration", "applied_fleet_migrations", "migrate_fleet"]

_LOCK_KEY = 0x5359_4E43_4400_0001  # "SYNCD" + 1: the advisory lock that serialises upgrades


@dataclass(frozen=True)
class FleetMigration:
    name: str
    sql: str


_RUNS = """
CREATE TABLE fleet_replicas (
    replica text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    control_url text,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    lease_until timestamptz NOT NULL
);
CREATE TABLE fleet_runs (
    id bigserial PRIMARY KEY,
    job text NOT NULL,
    kind text NOT NULL,
    reason text NOT NULL,
    queued_at timestamptz NOT NULL,
    started_at timestamptz,
    ended_at timestamptz,
    outcome text NOT NULL DEFAULT 'queued'
        CHECK (outcome IN ('queued', 'running', 'succeeded', 'partial', 'failed', 'cancelled')),
    error text,
    summary jsonb NOT NULL DEFAULT '{}',
    replica text,
    taken_from text,
    attempt integer NOT NULL DEFAULT 0,
    lease_until timestamptz,
    heartbeat_at timestamptz,
    due_at timestamptz,
    not_before timestamptz,
    UNIQUE (job, due_at)
);
CREATE INDEX fleet_runs_job ON fleet_runs (job, id);
CREATE INDEX fleet_runs_open ON fleet_runs (job) WHERE outcome IN ('queued', 'running');
CREATE UNIQUE INDEX fleet_runs_one_queued_trigger ON fleet_runs (job)
    WHERE reason = 'trigger' AND outcome = 'queued' AND replica IS NULL;
CREATE TABLE fleet_job_leases (
    job text PRIMARY KEY,
    run bigint NOT NULL,
    replica text NOT NULL,
    lease_until timestamptz NOT NULL
);
"""
"""Runs of every replica (`syncd.daemon.fleet_runs`), the replicas, and one lease per running job
(`syncd.daemon.leases`): a cron slot is unique per job, one trigger per job waits at a time."""

_TOKEN_BUDGETS = """
CREATE TABLE token_budgets (
    key text PRIMARY KEY CHECK (key ~ '^[0-9a-f]{64}$'),
    rate_limit integer, remaining integer, reset_at timestamptz, observed_at timestamptz,
    anchor_ticket bigint NOT NULL DEFAULT 0, anchor_pending integer NOT NULL DEFAULT 0,
    tickets bigint NOT NULL DEFAULT 0, credit integer NOT NULL DEFAULT 0,
    refused bigint NOT NULL DEFAULT 0, unlimited boolean NOT NULL DEFAULT false,
    refill_rate double precision, caution double precision NOT NULL DEFAULT 0,
    no_guess_until timestamptz,
    base_ticket bigint, base_remaining integer, base_at timestamptz, base_reset timestamptz,
    base_refused bigint,
    blocked_until timestamptz, probe_until timestamptz,
    bucket_tokens double precision, bucket_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""
"""The request budget each API token shares across replicas (`syncd.pg.budget`); the key
is a hash of the base URL and the token, never the token (an HMAC since 0003)."""

_BUDGET_KEY_SECRET = """
CREATE TABLE fleet_secrets (
    name text PRIMARY KEY,
    secret bytea NOT NULL CHECK (length(secret) >= 32),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
DELETE FROM token_budgets;
"""
"""Secrets of this state database, made at first use (`syncd.pg.budget.budget_secret`): the
key of `token_budgets` rows is an HMAC under one. The rows keyed by a plain sha256 go: a guessed
token could be confirmed against them, and they hold only pacing figures the next answers rebuild."""

_RUN_BACKENDS = """
CREATE TABLE fleet_run_backends (
    run bigint NOT NULL REFERENCES fleet_runs (id) ON DELETE CASCADE,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    backend_start timestamptz NOT NULL,
    PRIMARY KEY (run, attempt, pid, backend_start)
);
"""
"""The server sessions that took a tenant's writer lock for a run's attempt (`syncd.fencing`):
the replica that takes the run over ends them (`pg_terminate_backend`), so the advisory locks
of a frozen or lost holder go at once. A pid with its start time names one session only."""

FLEET_MIGRATIONS: tuple[FleetMigration, ...] = (
    FleetMigration("0001-runs", _RUNS),
    FleetMigration("mirror-0001", MIRROR_TABLES),  # the mirror, id map and journal (syncd.state.pg_schema)
    FleetMigration("0002-token-budgets", _TOKEN_BUDGETS),
    FleetMigration("0003-budget-key-secret", _BUDGET_KEY_SECRET),
    FleetMigration("0004-run-backends", _RUN_BACKENDS),
)
"""Append new migrations at the end; never edit or reorder a released one."""


def applied_fleet_migrations(conn: psycopg.Connection) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass('fleet_migrations') IS NOT NULL")
        row = cur.fetchone()
        if not row or not row[0]:
            return []
        cur.execute("SELECT name FROM fleet_migrations ORDER BY applied_at, name")
        return [name for (name,) in cur.fetchall()]


def migrate_fleet(conn: psycopg.Connection, migrations: tuple[FleetMigration, ...] | None = None) -> list[str]:
    """Apply what is missing; returns the names applied now. `conn` must be in autocommit mode
    (each migration is its own transaction)."""
    todo = FLEET_MIGRATIONS if migrations is None else migrations
    known = {m.name for m in todo}
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS fleet_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )
        done = applied_fleet_migrations(conn)
        unknown = [name for name in done if name not in known]
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
