"""Leases of the fleet: which replica is alive, which replica runs which run of which job.

Every time here is the server's (`clock_timestamp()`), never a replica's: replicas whose clocks
disagree still agree on when a lease ends. A lease is a row with `lease_until`; the holder
renews it (heartbeat) well before it ends, and anyone may take it once it has ended. Renewing
and finishing are fenced: they only touch rows that still name the caller (and its attempt),
so a replica that stalled and lost its run cannot overwrite the replica that took it over.

A takeover also ends the server sessions the previous holder recorded for the run
(`end_sessions`, `syncd.pg.fencing`): a holder that is frozen, not dead, keeps its sessions and
their tenants' advisory locks open, and the new holder would otherwise wait for them.

Lock order, everywhere: the run's row first, then its job's lease row (no deadlocks between
claimers, heartbeats and finishers); claimers never wait on a run row (`SKIP LOCKED`).
Functions take an autocommit connection and return plain rows; `syncd.daemon.fleet_runs` turns them
into records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row

from syncd.daemon.run_history import DIED, NEVER_STARTED
from syncd.logging import get_logger
from syncd.pg.connect import PgError

__all__ = [
    "Replica",
    "claim_run",
    "end_sessions",
    "expire_replica",
    "heartbeat_replica",
    "heartbeat_run",
    "live_replicas",
    "register_replica",
    "retire_replica",
]

log = get_logger("syncd.fleet")
Row = dict[str, Any]
T = TypeVar("T")
_TRIES = 5
"""Attempts of a transaction that PostgreSQL aborted as a deadlock victim (it retries cleanly)."""


@dataclass(frozen=True)
class Replica:
    """One registered daemon; `lease_until` passed means it stopped renewing (dead or cut off)."""

    name: str
    host: str
    pid: int
    control_url: str | None
    started_at: datetime
    heartbeat_at: datetime
    lease_until: datetime


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _replica(row: Row) -> Replica:
    return Replica(
        name=row["replica"],
        host=row["host"],
        pid=row["pid"],
        control_url=row["control_url"],
        started_at=_utc(row["started_at"]),
        heartbeat_at=_utc(row["heartbeat_at"]),
        lease_until=_utc(row["lease_until"]),
    )


class _Again(Exception):
    """The transaction met a row that went away under it: run it again."""


def _retrying(work: Callable[[], T]) -> T:
    """`work` (one transaction) again when PostgreSQL chose it as a deadlock's victim."""
    for attempt in range(_TRIES):
        try:
            return work()
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure, _Again) as exc:
            if attempt == _TRIES - 1:
                raise PgError(f"the PostgreSQL state stayed too busy to finish a step ({type(exc).__name__})") from None
    raise AssertionError("unreachable")


def _dicts(conn: psycopg.Connection) -> psycopg.Cursor[Row]:
    return conn.cursor(row_factory=dict_row)


# -- replicas ---------------------------------------------------------------------------------


def register_replica(
    conn: psycopg.Connection, replica: str, host: str, pid: int, control_url: str | None, lease_seconds: float
) -> Replica:
    """Announce `replica` (this process: `host`, `pid`) for `lease_seconds`.

    A name still held by another live process is refused (two daemons under one name would
    fence each other out). A name last held by another process, now gone, is taken over with
    what that process left: its unleased runs are closed the way `RunLog` closes a dead
    daemon's, and its leased runs' leases end now so any replica takes them over.
    """

    def work() -> Replica:
        with conn.transaction(), _dicts(conn) as cur:
            cur.execute(
                "INSERT INTO fleet_replicas (replica, host, pid, control_url, lease_until) "
                "VALUES (%s, %s, %s, %s, clock_timestamp() + make_interval(secs => %s)) "
                "ON CONFLICT (replica) DO NOTHING RETURNING *",
                (replica, host, pid, control_url, lease_seconds),
            )
            row = cur.fetchone()
            if row is not None:
                _recover(conn, replica)
                return _replica(row)
            cur.execute(
                "SELECT *, lease_until >= clock_timestamp() AS live FROM fleet_replicas WHERE replica = %s FOR UPDATE",
                (replica,),
            )
            old = cur.fetchone()
            if old is None:  # retired between the two statements: register afresh
                raise _Again()
            same = (old["host"], old["pid"]) == (host, pid)
            if old["live"] and not same:
                raise PgError(
                    f"replica name {replica!r} is in use by pid {old['pid']} on {old['host']} "
                    f"(alive until {_utc(old['lease_until']).isoformat(timespec='seconds')}): give this daemon another name"
                )
            cur.execute(
                "UPDATE fleet_replicas SET host = %s, pid = %s, control_url = %s, "
                "started_at = CASE WHEN %s THEN started_at ELSE clock_timestamp() END, "
                "heartbeat_at = clock_timestamp(), lease_until = clock_timestamp() + make_interval(secs => %s) "
                "WHERE replica = %s RETURNING *",
                (host, pid, control_url, same, lease_seconds, replica),
            )
            row = cur.fetchone()
            assert row is not None
            if not same:
                _recover(conn, replica)
            return _replica(row)

    return _retrying(work)


def _recover(conn: psycopg.Connection, replica: str) -> None:
    """Close what a previous process named `replica` left behind (see `register_replica`)."""
    conn.execute(
        "UPDATE fleet_runs SET outcome = 'failed', error = %s WHERE replica = %s AND outcome = 'running' AND lease_until IS NULL",
        (DIED, replica),
    )
    conn.execute(
        "UPDATE fleet_runs SET outcome = 'cancelled', error = %s WHERE replica = %s AND outcome = 'queued'",
        (NEVER_STARTED, replica),
    )
    _expire(conn, replica, include_registration=False)


def heartbeat_replica(conn: psycopg.Connection, replica: str, host: str, pid: int, lease_seconds: float) -> bool:
    """Renew the registration; False when another process has registered the name since."""
    cursor = conn.execute(
        "UPDATE fleet_replicas SET heartbeat_at = clock_timestamp(), lease_until = clock_timestamp() + make_interval(secs => %s) "
        "WHERE replica = %s AND host = %s AND pid = %s",
        (lease_seconds, replica, host, pid),
    )
    return cursor.rowcount == 1


def live_replicas(conn: psycopg.Connection) -> list[Replica]:
    """Replicas whose registration has not expired, by name."""
    with _dicts(conn) as cur:
        cur.execute("SELECT * FROM fleet_replicas WHERE lease_until >= clock_timestamp() ORDER BY replica")
        return [_replica(row) for row in cur.fetchall()]


def retire_replica(conn: psycopg.Connection, replica: str, host: str, pid: int) -> bool:
    """A clean stop: the registration goes (its runs were closed by the daemon's drain)."""
    cursor = conn.execute("DELETE FROM fleet_replicas WHERE replica = %s AND host = %s AND pid = %s", (replica, host, pid))
    return cursor.rowcount == 1


def expire_replica(conn: psycopg.Connection, replica: str) -> None:
    """End every lease `replica` holds, now: what its death does once the leases run out.

    For an operator who knows a host is gone (no need to wait out the leases), and for tests
    that kill a replica without waiting. The replica itself finds out at its next heartbeat.
    """
    with conn.transaction():
        _expire(conn, replica, include_registration=True)


def _expire(conn: psycopg.Connection, replica: str, *, include_registration: bool) -> None:
    past = "clock_timestamp() - interval '1 millisecond'"
    conn.execute(
        f"UPDATE fleet_runs SET lease_until = {past} WHERE replica = %s AND outcome = 'running' AND lease_until IS NOT NULL",
        (replica,),
    )
    conn.execute(f"UPDATE fleet_job_leases SET lease_until = {past} WHERE replica = %s", (replica,))
    if include_registration:
        conn.execute(f"UPDATE fleet_replicas SET lease_until = {past} WHERE replica = %s", (replica,))


# -- runs -------------------------------------------------------------------------------------

_CANDIDATE = """
SELECT r.* FROM fleet_runs r
WHERE r.job = ANY(%(jobs)s::text[]) AND NOT r.id = ANY(%(tried)s::bigint[])
  AND ((r.outcome = 'queued' AND r.replica IS NULL AND (r.not_before IS NULL OR r.not_before <= %(now)s))
       OR (r.outcome = 'running' AND r.lease_until < %(now)s))
  AND NOT EXISTS (SELECT 1 FROM fleet_job_leases l WHERE l.job = r.job AND l.lease_until >= %(now)s)
ORDER BY r.outcome = 'running' DESC, coalesce(r.not_before, r.queued_at), r.id
LIMIT 1
FOR UPDATE OF r SKIP LOCKED
"""
"""The oldest due queued run, or a running run whose lease ended (those first: its job's
lease is the ended one, and its work is the oldest), of a job no live lease holds."""

_TAKE_JOB = """
INSERT INTO fleet_job_leases AS l (job, run, replica, lease_until)
VALUES (%(job)s, %(id)s, %(replica)s, %(until)s)
ON CONFLICT (job) DO UPDATE SET run = EXCLUDED.run, replica = EXCLUDED.replica, lease_until = EXCLUDED.lease_until
WHERE l.lease_until < %(now)s
RETURNING l.run
"""
"""The job's lease, only if nobody holds it live: the guarantee that a job never runs twice at
once (two claimers of two runs of one job serialise on this row; the second finds it live)."""

_START = """
UPDATE fleet_runs SET outcome = 'running', replica = %(replica)s, attempt = attempt + 1,
  taken_from = CASE WHEN outcome = 'running' THEN replica END,
  started_at = clock_timestamp(), ended_at = NULL, error = NULL,
  lease_until = %(until)s, heartbeat_at = clock_timestamp()
WHERE id = %(id)s RETURNING *
"""

_GIVE_UP = """
UPDATE fleet_runs SET outcome = 'failed', lease_until = NULL, ended_at = clock_timestamp(),
  error = 'replica ' || coalesce(replica, '?') || ' stopped renewing its lease during attempt ' || attempt
          || '; not taken over again (' || %(max)s || ' attempts at most)'
WHERE id = %(id)s
"""


def claim_run(
    conn: psycopg.Connection, replica: str, lease_seconds: float, jobs: Iterable[str], max_attempts: int
) -> Row | None:
    """The run `replica` should start now, leased to it (see `FleetRunLog.claim`), or None."""
    names = sorted(set(jobs))
    tried: list[int] = []
    while names:
        verdict, row = _retrying(lambda: _claim_once(conn, replica, lease_seconds, names, tried, max_attempts))
        if verdict == "none":
            return None
        assert row is not None
        if verdict == "claimed":
            if row["taken_from"] is not None:
                end_sessions(conn, row["id"], row["attempt"])
            return row
        if verdict == "given up":
            end_sessions(conn, row["id"], row["attempt"] + 1)
        tried.append(row["id"])  # its job was leased by a racing claimer, or it was given up: next one
    return None


def _claim_once(
    conn: psycopg.Connection, replica: str, lease_seconds: float, jobs: list[str], tried: list[int], max_attempts: int
) -> tuple[str, Row | None]:
    verdict: tuple[str, Row | None] = ("none", None)
    with conn.transaction(), _dicts(conn) as cur:
        cur.execute("SELECT clock_timestamp() AS now, clock_timestamp() + make_interval(secs => %s) AS until", (lease_seconds,))
        times = cur.fetchone()
        assert times is not None
        args: Row = {"jobs": jobs, "tried": tried, "replica": replica, **times}
        cur.execute(_CANDIDATE, args)
        row = cur.fetchone()
        if row is None:
            return verdict
        args.update(id=row["id"], job=row["job"], max=max_attempts)
        if row["outcome"] == "running" and row["attempt"] >= max_attempts:
            # It outlived `max_attempts` replicas: a run that kills its daemon must not kill the fleet.
            cur.execute(_GIVE_UP, args)
            cur.execute("DELETE FROM fleet_job_leases WHERE job = %(job)s AND run = %(id)s", args)
            return ("given up", row)
        cur.execute(_TAKE_JOB, args)
        if cur.fetchone() is None:
            verdict = ("busy", row)
            raise psycopg.Rollback()
        cur.execute(_START, args)
        verdict = ("claimed", cur.fetchone())
    return verdict


_OLD_SESSIONS = """
SELECT b.pid, pg_terminate_backend(b.pid) FROM fleet_run_backends b
JOIN pg_stat_activity a ON a.pid = b.pid AND a.backend_start = b.backend_start
WHERE b.run = %s AND b.attempt < %s AND b.pid <> pg_backend_pid()
"""


def end_sessions(conn: psycopg.Connection, run_id: int, attempt: int) -> int:
    """End the server sessions that earlier attempts of the run recorded (`syncd.pg.fencing`):
    their holder lost the lease, and the tenants' advisory locks they hold go with them now,
    not when TCP gives up on a frozen or vanished host. Returns how many were ended. A server
    that refuses (another role's sessions, without `pg_signal_backend`) is logged: the new
    holder then waits for the locks as before."""
    try:
        with conn.transaction():
            ended = conn.execute(_OLD_SESSIONS, (run_id, attempt)).fetchall()
            conn.execute("DELETE FROM fleet_run_backends WHERE run = %s AND attempt < %s", (run_id, attempt))
    except psycopg.Error as exc:
        log.warning("fleet.sessions_not_ended", run=run_id, error=(str(exc).strip().splitlines() or [type(exc).__name__])[0])
        return 0
    pids = [pid for pid, done in ended if done]
    if ended:
        log.warning("fleet.sessions_ended", run=run_id, attempt=attempt, pids=pids)
    return len(pids)


def heartbeat_run(conn: psycopg.Connection, run_id: int, replica: str, lease_seconds: float, attempt: int | None) -> bool:
    """Extend the run's and its job's lease if `replica` (at `attempt`) still holds both."""

    def work() -> bool:
        held = False
        with conn.transaction(), _dicts(conn) as cur:
            cur.execute(
                "UPDATE fleet_runs SET heartbeat_at = clock_timestamp(), lease_until = clock_timestamp() + make_interval(secs => %s) "
                "WHERE id = %s AND replica = %s AND outcome = 'running' AND lease_until IS NOT NULL "
                "AND (%s::integer IS NULL OR attempt = %s) RETURNING job, lease_until",
                (lease_seconds, run_id, replica, attempt, attempt),
            )
            row = cur.fetchone()
            if row is None:
                return False
            cur.execute(
                "UPDATE fleet_job_leases SET lease_until = %s WHERE job = %s AND run = %s AND replica = %s",
                (row["lease_until"], row["job"], run_id, replica),
            )
            if cur.rowcount != 1:  # its job went to another run while this one's lease had ended
                raise psycopg.Rollback()
            held = True
        return held

    return _retrying(work)
