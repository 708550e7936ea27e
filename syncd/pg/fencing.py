"""Fencing a fleet run's writes: a replica that lost its run's lease sends nothing more.

Why: a lease says which replica runs a job, but a replica that stalls (SIGSTOP, a paused VM, a
host cut off) does not know it lost the lease until it looks, and its heartbeat looks only
every third of the lease. A replica that took the run over meanwhile writes the same target,
so each write of a fleet run looks first, where it cannot be skipped:

- in the transaction that journals a write's intent (`syncd.copy.journal.intend`): the run's
  row in `fleet_runs` must still name this replica and this attempt (the fencing token: one
  more per takeover), its lease not ended on the server's clock; otherwise the transaction
  is rolled back and `LeaseLost` ends the run: no intent, no call;
- right before a request that writes leaves (`syncd.api.client`): the lease must not have ended
  on this process's monotonic clock, counted from the last time the server confirmed it, which
  is what a process frozen between its intent and its request finds on waking;
- each PostgreSQL session about to take a tenant's writer lock for the run is recorded with it
  first (`fleet_run_backends`, committed with a check), and checks again once it holds the lock,
  so the replica that takes the run over ends those sessions (`pg_terminate_backend`,
  `syncd.daemon.leases`) and their advisory locks go at once instead of when TCP gives up on a
  frozen or lost host. Recorded before, checked after: whichever way a takeover interleaves,
  the session is either ended by it or finds the run lost and lets the lock go.

A check and the send after it are two steps: a process frozen between them still sends that one
request on waking. The monotonic check makes that gap the few instructions before the socket
write instead of a whole journal transaction.

The fence travels in a context variable set for the run's task (`fencing`): worker threads and
child tasks inherit it, so the copy code needs no parameter; outside a fleet run (one daemon on
SQLite, the CLI) there is none and nothing changes. No psycopg import: a SQLite state never loads it.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from syncd.errors import SyncdError

__all__ = ["LeaseLost", "RunFence", "check_lease", "confirm_lease", "current_fence", "enlist_session", "fencing", "require_lease"]


class LeaseLost(SyncdError):
    """This replica no longer holds the lease of the run it is running: it must stop writing."""

    exit_code = 1


_HELD = (
    "SELECT extract(epoch FROM lease_until - clock_timestamp()) FROM fleet_runs "
    "WHERE id = ? AND replica = ? AND attempt = ? AND outcome = 'running' AND lease_until > clock_timestamp()"
)
"""The run still ours and its lease running: how many seconds are left. No row lock: a process
frozen inside this transaction would hold it, and claimers skip locked runs (`SKIP LOCKED`), so
its run could never be taken over."""

_ENLIST = (
    "INSERT INTO fleet_run_backends (run, attempt, pid, backend_start) "
    "SELECT ?, ?, pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid() "
    "ON CONFLICT DO NOTHING"
)
"""This session, by pid and start time (a pid alone may be a new session's by the time it is ended)."""


@dataclass
class RunFence:
    """The lease of one fleet run as its replica knows it: the run, the replica, the attempt
    (the fencing token) and until when, on `time.monotonic()`, the lease surely runs."""

    run: int
    replica: str
    attempt: int
    lease: float
    valid_until: float
    lost: str | None = None
    """Why the run is lost (one line) once it is; from then on every check refuses."""

    @classmethod
    def leased(cls, run: int, replica: str, attempt: int, lease: float, asked_at: float) -> RunFence:
        """The fence of a run claimed by a request sent at `asked_at` (monotonic): the server
        started the lease after that, so it runs at least until `asked_at + lease`."""
        return cls(run, replica, attempt, lease, asked_at + lease)

    def renewed(self, asked_at: float) -> None:
        """A heartbeat sent at `asked_at` renewed the lease for another `lease` seconds."""
        self.valid_until = max(self.valid_until, asked_at + self.lease)

    def lose(self, why: str) -> LeaseLost:
        """Mark the run lost (the first reason stays) and return the error to raise."""
        if self.lost is None:
            self.lost = f"replica {self.replica} lost the lease of run {self.run} (attempt {self.attempt}): {why}; it sends nothing more"
        self.valid_until = -math.inf
        return LeaseLost(self.lost)

    def require(self) -> None:
        """LeaseLost unless the lease surely still runs (this process's clock): before a send."""
        if self.lost is not None:
            raise LeaseLost(self.lost)
        if time.monotonic() >= self.valid_until:
            raise self.lose("its lease ran out before this write (the process stalled or could not renew it)")

    def check(self, db: Any) -> None:
        """In the caller's transaction on the PostgreSQL state (`db`: `syncd.state.pg_database`'s
        handle): LeaseLost unless the run's row still names this replica and attempt with its
        lease running. A confirmation also moves `valid_until` to the server's end of the lease."""
        if self.lost is not None:
            raise LeaseLost(self.lost)
        asked = time.monotonic()
        row = db.execute(_HELD, [self.run, self.replica, self.attempt]).fetchone()
        if row is None:
            raise self.lose("another replica took the run over, or its lease ended")
        self.valid_until = max(self.valid_until, asked + float(row[0]))

    def enlist(self, db: Any) -> None:
        """Record the session of `db` as one of the run's (it is about to take a tenant's
        writer lock), committed with a `check`: a takeover from then on ends it, so the session
        is never handed to a later open of the state (`PgDatabase.pin`)."""
        db.pin()
        with db.atomic():
            self.check(db)
            db.execute(_ENLIST, [self.run, self.attempt])


_CURRENT: ContextVar[RunFence | None] = ContextVar("syncd_run_fence", default=None)


@contextlib.contextmanager
def fencing(fence: RunFence) -> Iterator[RunFence]:
    """Fence every write made in this context (its child tasks and worker threads too)."""
    token = _CURRENT.set(fence)
    try:
        yield fence
    finally:
        _CURRENT.reset(token)


def current_fence() -> RunFence | None:
    return _CURRENT.get()


def check_lease(db: Any, dialect: Any) -> None:
    """The journal's hook, inside the transaction that writes an intent: the run's lease on the
    server (PostgreSQL state), or on this process's clock (a SQLite state). No fence: nothing."""
    fence = _CURRENT.get()
    if fence is None:
        return
    if dialect.sqlite:
        fence.require()
    else:
        fence.check(db)


def require_lease() -> None:
    """The API client's hook, right before a request that writes is sent."""
    fence = _CURRENT.get()
    if fence is not None:
        fence.require()


def enlist_session(db: Any) -> None:
    """The writer lock's hook (`syncd.state.pg_writers`), before a try for a tenant's lock in a
    fleet run: the session is recorded with the run, or LeaseLost when the run is not ours."""
    fence = _CURRENT.get()
    if fence is not None:
        fence.enlist(db)


def confirm_lease(db: Any) -> None:
    """The writer lock's hook once the lock is held: LeaseLost (the caller lets it go) when a
    takeover came between the record and the lock."""
    fence = _CURRENT.get()
    if fence is not None:
        fence.check(db)
