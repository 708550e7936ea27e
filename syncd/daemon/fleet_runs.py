"""The run history of a fleet of daemons in one PostgreSQL, and how its replicas split the work.

`FleetRunLog` is a `RunHistory` (`syncd.daemon.run_history`) with `RunLog`'s semantics (`new`,
`save`, `get`, `of_job`, `latest`, `last_start`, `last_full`, `last_success`, `prune`), so the
daemon can use either; it adds what a fleet needs: `offer_scheduled` (a cron slot becomes exactly one run however many
replicas offer it: UNIQUE (job, due_at)), `offer_trigger` (one waiting trigger per job),
`claim` (the next due run, or a run whose holder's lease ended, with its job's lease),
`heartbeat` (renew, fenced), `finish` (save the outcome and free the job, fenced), and the
replica registry (`syncd.daemon.leases`).

Coordination: plain PostgreSQL, not a job library. procrastinate and pgqueuer are good queues
for short tasks; our runs are long (a full copy takes hours), so they need what those do not
center on: leases renewed by heartbeats, fencing (a replica that stalled and lost its run must
find out, and must not overwrite the replica that took it over), exactly-once cron slots
across replicas (the slot is the key, not a task id), and shared per-token request budgets in
the same database. `SELECT ... FOR UPDATE SKIP LOCKED` plus a lease row per job says all of
that in a few hundred lines we can read (here and in `leases`), every time taken from the
server's clock, and is one dependency less (psycopg is needed for the shared state anyway).

Differences from `RunLog`, by design: opening the log does not close open runs (other replicas
own them; a replica's own leftovers are closed when it registers again under its name, see
`register_replica`); ids come from a sequence shared by all replicas, so they grow but may skip.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

import psycopg
from psycopg.rows import dict_row

from syncd.daemon import leases
from syncd.daemon.fleet_tables import FLEET_MIGRATIONS
from syncd.daemon.pauses import paused_before_start
from syncd.daemon.run_history import KEEP_RUNS, PRUNE_EVERY, Pause, RecentRuns, RunRecord, RunTable
from syncd.logging import get_logger
from syncd.pg import migrations as pg_migrations
from syncd.pg.connect import PgError, connect

__all__ = ["MAX_ATTEMPTS", "FleetRunLog", "FleetRunRecord", "Offered", "Replica", "storable"]

Replica = leases.Replica
ConnectionFactory = Callable[[], psycopg.Connection]
log = get_logger("syncd.fleet")
MAX_ATTEMPTS = 3
"""Replicas a run may outlive (its lease ended each time) before it is failed, not taken over."""
_TABLE = RunTable(
    "fleet_runs",
    "%s",
    full_read="summary->'full' IN ('true'::jsonb, '1'::jsonb)",
    prune_below="(SELECT id FROM fleet_runs ORDER BY id DESC OFFSET %s LIMIT 1)",
)


@dataclass
class FleetRunRecord(RunRecord):
    """A run with who holds it: `replica`, its `attempt` (the fencing token: 1 for the first
    claim, one more per takeover) and `taken_from`, the replica whose lease ended."""

    replica: str | None = None
    attempt: int = 0
    taken_from: str | None = None

    @property
    def takeover(self) -> bool:
        return self.taken_from is not None

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "replica": self.replica, "attempt": self.attempt, "taken_from": self.taken_from}


class Offered(NamedTuple):
    run: FleetRunRecord
    new: bool
    """False: a trigger of the job was already waiting, and this is it."""


def _utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


_COPIED = ("id", "job", "kind", "outcome", "error", "replica", "attempt", "taken_from")


def _record(row: dict[str, Any]) -> FleetRunRecord:
    return FleetRunRecord(
        **{name: row[name] for name in _COPIED},
        cause=row["reason"],
        queued_at=_utc(row["queued_at"]) or datetime.now(UTC),
        started_at=_utc(row["started_at"]),
        ended_at=_utc(row["ended_at"]),
        summary=row["summary"] if isinstance(row["summary"], dict) else {},
    )


def storable(value: Any) -> Any:
    """What PostgreSQL stores: no NUL in text (an API's error may carry one), no NaN in JSON."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {storable(str(key)): storable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(item) for item in value]
    return value


def _summary(summary: dict[str, Any]) -> str:
    return json.dumps(storable(json.loads(json.dumps(summary, default=str))), sort_keys=True)


_WRITE = """
UPDATE fleet_runs SET job = %(job)s, kind = %(kind)s, reason = %(reason)s, queued_at = %(queued_at)s,
  started_at = %(started_at)s, ended_at = coalesce(%(ended_at)s, CASE WHEN %(stamp)s THEN clock_timestamp() END),
  outcome = %(outcome)s, error = %(error)s, summary = %(summary)s::jsonb,
  lease_until = CASE WHEN %(finished)s THEN NULL ELSE lease_until END
WHERE id = %(id)s AND replica IS NOT DISTINCT FROM %(replica)s AND (%(attempt)s::integer IS NULL OR attempt = %(attempt)s)
RETURNING ended_at
"""
"""Fenced: a record whose replica or attempt is no longer the row's writes nothing."""


class FleetRunLog:
    """Runs by id in PostgreSQL, shared by the replicas (a `RunHistory`); this process's latest
    held in memory (with their live `progress`). One connection, used by one thread at a time."""

    def __init__(self, source: str | ConnectionFactory, replica: str, *, migrate: bool = True) -> None:
        self.replica = replica
        if isinstance(source, str):
            url = source
            self._factory: ConnectionFactory = lambda: connect(url, application_name=f"syncd {replica}")
        else:
            self._factory = source
        self._lock = threading.RLock()
        self._conn: psycopg.Connection | None = None
        self._recent: RecentRuns[FleetRunRecord] = RecentRuns()
        self._created = 0
        self._registered: dict[str, tuple[str, int]] = {}
        if migrate:  # a replica makes every table it uses (syncd.daemon.fleet_tables)
            with self._db() as conn:
                pg_migrations.migrate(conn, FLEET_MIGRATIONS)

    @contextmanager
    def _db(self) -> Iterator[psycopg.Connection]:
        """The connection (opened again if the last one broke); server errors as PgError."""
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                if self._conn is not None:
                    self._conn.close()
                self._conn = self._factory()
                self._conn.autocommit = True
            try:
                yield self._conn
            except psycopg.Error as exc:
                line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise PgError(f"the PostgreSQL state failed: {line}") from None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn, conn = None, self._conn
                conn.close()

    def _rows(self, query: str, params: Any = ()) -> list[dict[str, Any]]:
        with self._db() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query, params)
            return cur.fetchall()

    def _value(self, query: str, params: Any = ()) -> Any:
        with self._db() as conn:
            row = conn.execute(query, params).fetchone()
            return row[0] if row else None

    def _fresh(self, row: dict[str, Any]) -> FleetRunRecord:
        """The record in memory when it is still the row's holder and attempt (it has the live
        progress); the row otherwise (another replica's run, or one taken over from us)."""
        mine = self._recent.get(row["id"])
        if mine is not None and (mine.replica, mine.attempt) == (row["replica"], row["attempt"]):
            return mine
        return _record(row)

    def _created_one(self) -> None:
        self._created += 1
        if self._created % PRUNE_EVERY == 0:
            self.prune()

    # -- the RunHistory -------------------------------------------------------------------------

    def prune(self, keep: int = KEEP_RUNS) -> int:
        """Forget all but the latest `keep` runs that are over (each job's latest success, full
        read and non-cancelled run stay: scheduling reads them)."""
        with self._db() as conn:
            return conn.execute(_TABLE.prune(), (keep,)).rowcount

    def new(self, job: str, kind: str, cause: str, now: datetime) -> FleetRunRecord:
        """A run this replica starts itself (not offered to the fleet: no one else claims it)."""
        query = "INSERT INTO fleet_runs (job, kind, reason, queued_at, replica, attempt) VALUES (%s, %s, %s, %s, %s, 1) RETURNING *"
        rows = self._rows(query, (job, kind, cause, now, self.replica))
        self._created_one()
        return self._recent.remember(_record(rows[0]))

    def save(self, record: RunRecord) -> bool:
        """Write the record if its replica and attempt still hold the run; a finished record frees
        its job. False when fenced out (the run was taken over) or the server failed (logged:
        never fatal to the daemon, as with `RunLog`)."""
        return self._write(record, stamp=False)

    def _write(self, record: RunRecord, *, stamp: bool) -> bool:
        replica = getattr(record, "replica", self.replica)
        args = {
            "id": record.id,
            "job": record.job,
            "kind": record.kind,
            "reason": record.cause,
            "queued_at": record.queued_at,
            "started_at": record.started_at,
            "ended_at": record.ended_at,
            "stamp": stamp,
            "outcome": record.outcome,
            "error": storable(record.error),
            "summary": _summary(record.summary),
            "finished": record.finished,
            "replica": replica,
            "attempt": getattr(record, "attempt", None),
        }
        free = "DELETE FROM fleet_job_leases WHERE job = %s AND run = %s AND replica = %s"
        try:
            with self._db() as conn, conn.transaction():
                row = conn.execute(_WRITE, args).fetchone()
                if row is not None and record.finished and replica is not None:
                    conn.execute(free, (record.job, record.id, replica))
                    conn.execute("DELETE FROM fleet_run_backends WHERE run = %s", (record.id,))
        except PgError as exc:
            log.error("runs.save_failed", run=record.id, error=str(exc))
            return False
        if row is None:
            log.warning("runs.fenced", run=record.id, job=record.job, replica=replica, attempt=args["attempt"])
            self._recent.forget(record.id)
            return False
        if record.ended_at is None and row[0] is not None:
            record.ended_at = _utc(row[0])
        if isinstance(record, FleetRunRecord):
            self._recent.remember(record)
        return True

    def get(self, run_id: int) -> FleetRunRecord | None:
        rows = self._rows("SELECT * FROM fleet_runs WHERE id = %s", (run_id,))
        return self._fresh(rows[0]) if rows else None

    def of_job(self, job: str, limit: int = 20) -> list[FleetRunRecord]:
        """The job's latest runs, newest first."""
        return [self._fresh(row) for row in self._rows(_TABLE.of_job("*"), (job, limit))]

    def latest(self, limit: int = 50) -> list[FleetRunRecord]:
        return [self._fresh(row) for row in self._rows(_TABLE.latest("*"), (limit,))]

    def last_start(self, job: str) -> datetime | None:
        """When the job's latest run started on any replica, not counting runs a shutdown cancelled."""
        return _utc(self._value(_TABLE.last_start(), (job,)))

    def last_full(self, job: str) -> datetime | None:
        """When the job's latest full read (summary `full`) that finished started."""
        return _utc(self._value(_TABLE.last_full(), (job,)))

    def last_success(self, job: str) -> datetime | None:
        return _utc(self._value(_TABLE.last_success(), (job,)))

    # -- offering work to the fleet -------------------------------------------------------------

    def next_start(self, job: str) -> datetime | None:
        """When the job's earliest queued run may start: its `not_before` (a slot's jitter and
        backoff in), else from when it was queued, as `leases.claim_run` reads it."""
        return _utc(self._value(
            "SELECT min(coalesce(not_before, queued_at)) FROM fleet_runs WHERE job = %s AND outcome = 'queued'", (job,)
        ))

    def offer_scheduled(
        self, job: str, kind: str, due_at: datetime, not_before: datetime | None = None, reason: str = "schedule"
    ) -> FleetRunRecord | None:
        """Queue the job's run for the schedule slot `due_at`, startable from `not_before`.

        Every replica may offer the same slot: the first makes the run, the others get None.
        `due_at` must be the same on every replica (the cron time, or the shared last start plus
        `every`), so jitter belongs in `not_before`, never in `due_at`.
        """
        rows = self._rows(
            "INSERT INTO fleet_runs (job, kind, reason, queued_at, due_at, not_before) "
            "VALUES (%s, %s, %s, clock_timestamp(), %s, %s) ON CONFLICT (job, due_at) DO NOTHING RETURNING *",
            (job, kind, reason, due_at, not_before),
        )
        if not rows:
            return None
        self._created_one()
        return _record(rows[0])

    def waiting_slot(self, job: str) -> bool:
        """Whether a schedule slot of `job` is queued and no replica holds it yet."""
        return bool(
            self._value(
                "SELECT EXISTS (SELECT 1 FROM fleet_runs WHERE job = %s AND outcome = 'queued' AND replica IS NULL AND due_at IS NOT NULL)",
                (job,),
            )
        )

    def delay_scheduled(self, job: str, not_before: datetime) -> int:
        """Let none of the job's queued schedule slots start before `not_before` (a failure's
        backoff: slots offered while the failed run ran knew one failure fewer); how many moved."""
        with self._db() as conn:
            cursor = conn.execute(
                "UPDATE fleet_runs SET not_before = %s, reason = 'retry' WHERE job = %s AND outcome = 'queued' "
                "AND replica IS NULL AND due_at IS NOT NULL AND (not_before IS NULL OR not_before < %s)",
                (not_before, job, not_before),
            )
            return cursor.rowcount

    def offer_trigger(self, job: str, kind: str) -> Offered:
        """Queue a run of `job` for whichever replica claims next; while one is already waiting
        (however many replicas were asked), that one. While the job runs, the waiting trigger
        is its one follow-up run (claims skip a job whose lease is live)."""
        for _ in range(10):
            rows = self._rows(
                "INSERT INTO fleet_runs (job, kind, reason, queued_at) VALUES (%s, %s, 'trigger', clock_timestamp()) "
                "ON CONFLICT (job) WHERE reason = 'trigger' AND outcome = 'queued' AND replica IS NULL DO NOTHING RETURNING *",
                (job, kind),
            )
            if rows:
                self._created_one()
                return Offered(_record(rows[0]), True)
            rows = self._rows(
                "SELECT * FROM fleet_runs WHERE job = %s AND reason = 'trigger' AND outcome = 'queued' AND replica IS NULL",
                (job,),
            )
            if rows:
                return Offered(_record(rows[0]), False)
            # The waiting one was claimed between the two statements: offer again.
        raise PgError(f"could not queue a trigger of job {job!r}: the waiting one kept being claimed")

    # -- leases ---------------------------------------------------------------------------------

    def claim(
        self, replica: str, lease_seconds: float, jobs: Iterable[str], *, max_attempts: int = MAX_ATTEMPTS
    ) -> FleetRunRecord | None:
        """Lease to `replica`, for `lease_seconds`, the run it should start now, or None.

        In one transaction: the oldest due queued run of one of `jobs`, or a running run whose
        lease ended (a takeover: `attempt` + 1, `taken_from` its last holder), together with its
        job's lease, so a job never runs on two replicas at once. A run whose lease ended
        `max_attempts` times is failed instead. The caller must `heartbeat` well within
        `lease_seconds` and stop the run when that returns False.
        """
        with self._db() as conn:
            row = leases.claim_run(conn, replica, lease_seconds, jobs, max_attempts)
        return None if row is None else self._recent.remember(_record(row))

    def heartbeat(self, run_id: int, replica: str, lease_seconds: float, attempt: int | None = None) -> bool:
        """Extend the run's lease to `lease_seconds` from now (the server's), only if `replica`
        (at `attempt`, when given) still holds it; False: it was taken over, stop the run."""
        with self._db() as conn:
            return leases.heartbeat_run(conn, run_id, replica, lease_seconds, attempt)

    def finish(self, record: RunRecord) -> bool:
        """Save the run's outcome (`ended_at` the server's now when unset) and free its job, if
        this record's replica and attempt still hold the run; False (nothing written) otherwise."""
        if not record.finished:
            raise ValueError(f"run {record.id} has not ended (outcome {record.outcome!r})")
        return self._write(record, stamp=True)

    # -- paused jobs, cancels -------------------------------------------------------------------

    def paused_jobs(self) -> dict[str, Pause]:
        """The jobs an operator paused on any replica, by name."""
        rows = self._rows("SELECT job, paused_at, paused_by FROM fleet_job_pauses WHERE resumed_at IS NULL")
        return {row["job"]: Pause(row["job"], _utc(row["paused_at"]) or datetime.now(UTC), row["paused_by"]) for row in rows}

    def pause(self, job: str, by: str, now: datetime) -> tuple[Pause, bool]:
        """Pause `job` for the whole fleet (kept as it was when already paused), and end its
        queued runs (slots and a waiting trigger) unstarted; the pause, and whether it is new.
        The time is the server's (`now` is for `RunLog`'s signature)."""
        ended = paused_before_start(by)
        with self._db() as conn, conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "INSERT INTO fleet_job_pauses (job, paused_by) VALUES (%s, %s) ON CONFLICT (job) DO UPDATE "
                "SET paused_at = clock_timestamp(), paused_by = EXCLUDED.paused_by, resumed_at = NULL, resumed_by = NULL "
                "WHERE fleet_job_pauses.resumed_at IS NOT NULL RETURNING job",
                (job, by),
            )
            new = cur.fetchone() is not None
            cur.execute(
                "UPDATE fleet_runs SET outcome = 'cancelled', error = %s, ended_at = clock_timestamp() "
                "WHERE job = %s AND outcome = 'queued' AND replica IS NULL",
                (ended, job),
            )
            cur.execute("SELECT job, paused_at, paused_by FROM fleet_job_pauses WHERE job = %s", (job,))
            row = cur.fetchone()
        assert row is not None
        return Pause(job, _utc(row["paused_at"]) or now, row["paused_by"]), new

    def resume(self, job: str, by: str, now: datetime) -> bool:
        """Lift the pause of `job` for the whole fleet; False when it was not paused. Its
        `resumed_at` stays: the schedule starts again from the first slot after it."""
        with self._db() as conn:
            cursor = conn.execute(
                "UPDATE fleet_job_pauses SET resumed_at = clock_timestamp(), resumed_by = %s WHERE job = %s AND resumed_at IS NULL",
                (by, job),
            )
            return cursor.rowcount == 1

    def slots_after(self, job: str) -> datetime | None:
        """Where the job's schedule goes on from: the latest slot offered for it by any replica
        (`syncd.daemon.slots`), or when its latest pause was lifted if that is later (the slots
        a pause covered are not run)."""
        return _utc(self._value(
            "SELECT greatest((SELECT max(due_at) FROM fleet_runs WHERE job = %s AND due_at IS NOT NULL), "
            "(SELECT resumed_at FROM fleet_job_pauses WHERE job = %s))",
            (job, job),
        ))  # fmt: skip

    def request_cancel(self, job: str, by: str) -> FleetRunRecord | None:
        """Ask whichever replica holds the job's running run to cancel it (it reads the request
        at its next pass, `cancels_asked`); the run, or None when the job has none running."""
        rows = self._rows(
            "UPDATE fleet_runs SET cancel_requested = coalesce(cancel_requested, %s) WHERE job = %s AND outcome = 'running' RETURNING *",
            (by, job),
        )
        return self._fresh(rows[0]) if rows else None

    def cancels_asked(self, replica: str) -> dict[int, str]:
        """The runs `replica` holds that an operator asked to cancel, with who asked."""
        rows = self._rows(
            "SELECT id, cancel_requested FROM fleet_runs WHERE replica = %s AND outcome = 'running' AND cancel_requested IS NOT NULL",
            (replica,),
        )
        return {row["id"]: row["cancel_requested"] for row in rows}

    # -- replicas -------------------------------------------------------------------------------

    def register_replica(self, replica: str, host: str, pid: int, control_url: str | None, lease_seconds: float = 30.0) -> Replica:
        """Announce this process as `replica` (see `leases.register_replica`)."""
        with self._db() as conn:
            registered = leases.register_replica(conn, replica, host, pid, control_url, lease_seconds)
        self._registered[replica] = (host, pid)
        return registered

    def heartbeat_replica(self, replica: str, lease_seconds: float = 30.0) -> bool:
        """Renew the registration this object made; False when another process took the name."""
        identity = self._registered.get(replica)
        if identity is None:
            return False
        with self._db() as conn:
            return leases.heartbeat_replica(conn, replica, *identity, lease_seconds)

    def retire_replica(self, replica: str) -> bool:
        identity = self._registered.pop(replica, None)
        if identity is None:
            return False
        with self._db() as conn:
            return leases.retire_replica(conn, replica, *identity)

    def live_replicas(self) -> list[Replica]:
        with self._db() as conn:
            return leases.live_replicas(conn)

    def leases(self) -> list[dict[str, Any]]:
        """Every run a replica holds now: who, which attempt, its lease's end and last beat
        (what the page's fleet view lists; a lease in the past waits for a takeover)."""
        return self._rows(
            "SELECT id, job, kind, replica, attempt, taken_from, started_at, heartbeat_at, lease_until"
            " FROM fleet_runs WHERE outcome = 'running' ORDER BY replica, id"
        )

    def expire_replica(self, replica: str) -> None:
        """End every lease of `replica` now (see `leases.expire_replica`)."""
        with self._db() as conn:
            leases.expire_replica(conn, replica)
