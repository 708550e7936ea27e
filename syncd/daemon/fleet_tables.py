"""The fleet's tables on PostgreSQL: its runs, replicas, job leases and paused jobs, and what a replica
makes when it starts on a server.

Why here: the daemon owns its tables and hands them to the migration runner
(`syncd.pg.migrations`), as the store (`syncd.state.pg_schema`) and the request budget
(`syncd.pg.budget`) hand theirs. A replica uses all three, so it makes all of them at its start
(`FLEET_MIGRATIONS`), and `syncd state migrate` does too: a server it fills is ready for a fleet.
"""

from __future__ import annotations

from syncd.pg.budget import BUDGET_MIGRATIONS
from syncd.pg.migrations import LEDGER, PgMigration
from syncd.state.pg_schema import MIRROR_MIGRATIONS

__all__ = ["FLEET_MIGRATIONS", "RUN_MIGRATIONS"]

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

_RUN_BACKENDS = """
CREATE TABLE fleet_run_backends (
    run bigint NOT NULL REFERENCES fleet_runs (id) ON DELETE CASCADE,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    backend_start timestamptz NOT NULL,
    PRIMARY KEY (run, attempt, pid, backend_start)
);
"""
"""The server sessions that took a tenant's writer lock for a run's attempt (`syncd.pg.fencing`):
the replica that takes the run over ends them (`pg_terminate_backend`), so the advisory locks
of a frozen or lost holder go at once. A pid with its start time names one session only."""

_PAUSES = """
CREATE TABLE fleet_job_pauses (
    job text PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    paused_by text NOT NULL,
    resumed_at timestamptz,
    resumed_by text
);
ALTER TABLE fleet_runs ADD COLUMN cancel_requested text;
"""
"""Jobs an operator paused (`resumed_at` NULL: paused; kept after a resume, whose time starts the
schedule again from the next slot), and a cancel asked of a running run on any replica (who
asked), which its holder reads at its next pass (`syncd.daemon.replica`)."""

RUN_MIGRATIONS: tuple[PgMigration, ...] = (
    PgMigration("0001-runs", _RUNS),
    PgMigration("0004-run-backends", _RUN_BACKENDS),
    PgMigration("0005-pause-cancel", _PAUSES),
)
"""The daemon's own migrations. Append new ones at the end (and to the ledger); never edit a released one."""

FLEET_MIGRATIONS: tuple[PgMigration, ...] = tuple(
    sorted((*RUN_MIGRATIONS, *MIRROR_MIGRATIONS, *BUDGET_MIGRATIONS), key=lambda m: LEDGER.index(m.name))
)
"""Everything a replica uses on the server (its runs, the mirror, the request budgets), in
release order: what a replica, and `syncd state migrate`, make on a new server."""
