"""Writers of the PostgreSQL state: one process at a time per TENANT, waiting a bounded time
for it (issue 13: a fleet of `syncd serve` replicas shares one state).

Why per tenant: a replica syncing tenant A must not stop another syncing tenant B. Each tenant
has a session advisory lock keyed by the schema and the tenant (`TenantWriters.key`). The
server lets it go when its holder's connection ends, however the process died, so whoever
holds it knows every `running` run of THAT tenant it does not own is dead and may fail it;
`running` runs of other tenants may be live replicas' and are left alone.

Why a bounded wait, by polling: a run of another replica on the same tenant is expected to
end, so a writer waits for it up to `StateStore.lock_wait` seconds. It tries again and again
(`pg_try_advisory_lock`, short sleeps between) without holding the StateStore's lock or its
connection: other threads (another tenant's crawl in the same StateStore) keep writing meanwhile,
and the caller's `on_wait` runs between tries (a worker thread passes
`anyio.from_thread.check_cancelled`, so cancelling the task ends the wait).

Why an order: one process may write several tenants at once (a copy reads source and target
into one StateStore). It waits for a lock only while every lock it holds has a smaller key;
otherwise it tries once and fails. Waits therefore only go up the key order, and processes
never wait for each other in a circle; `StateStore.hold` takes several tenants in that order.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import psycopg

from syncd.pg.fencing import confirm_lease, enlist_session
from syncd.state.errors import StateBusyError
from syncd.state.pg_database import PgDatabase

__all__ = ["TenantWriters"]

_FIRST_PAUSE = 0.05
_LONGEST_PAUSE = 1.0  # a waiter notices a lock let go within a second


class TenantWriters:
    """The tenant writer locks of one StateStore's connection, each counted by its users (the
    StateStore's open runs of the tenant and its `hold`s) and let go when the last one ends."""

    def __init__(self, db: PgDatabase, where: str) -> None:
        self.db = db
        self.where = where
        self._schema: str | None = None
        self._users: dict[str, int] = {}

    @property
    def held(self) -> bool:
        return bool(self._users)

    def key(self, tenant: str) -> int:
        """The lock's bigint: a hash of the schema (NUL cannot occur in it) and the tenant."""
        if self._schema is None:
            self._schema = str(self._execute("SELECT current_schema()").fetchone()[0])
        digest = hashlib.blake2b(self._schema.encode() + b"\0" + tenant.encode(), digest_size=8, person=b"syncd-writer")
        return int.from_bytes(digest.digest(), "big", signed=True)

    def in_order(self, tenants: Iterable[str]) -> list[str]:
        """`tenants` in the order locks are taken (their keys')."""
        return sorted(set(tenants), key=lambda tenant: (self.key(tenant), tenant))

    def take(
        self,
        tenant: str,
        *,
        guard: threading.RLock,
        wait: float,
        recover: Callable[[str], object],
        on_wait: Callable[[], object] | None = None,
    ) -> None:
        """Count one more user of `tenant`'s lock. A lock this connection does not hold yet is
        taken, waiting up to `wait` seconds, and then `recover(tenant)` fails the runs its dead
        writers left, under `guard` like every try. StateBusyError (one line, naming the
        holder) when the wait ends, or at once when waiting could close a circle."""
        deadline = time.monotonic() + max(0.0, wait)
        pause = _FIRST_PAUSE
        while True:
            with guard:
                if tenant in self._users:
                    self._users[tenant] += 1
                    return
                key = self.key(tenant)
                enlist_session(self.db)  # in a fleet run: from here on a takeover ends this session (syncd.pg.fencing)
                if self._try(key):
                    try:
                        confirm_lease(self.db)
                        recover(tenant)
                    except BaseException:
                        self._unlock(key)
                        raise
                    self._users[tenant] = 1
                    return
                above = sorted(held for held in self._users if self.key(held) > key)
                left = deadline - time.monotonic()
                if above or left <= 0:
                    raise StateBusyError(self._busy(tenant, key, wait, above))
            if on_wait is not None:
                on_wait()
            time.sleep(min(pause, left))
            pause = min(pause * 2, _LONGEST_PAUSE)

    def give(self, tenant: str) -> None:
        """One user fewer; the last lets the lock go (a tenant not held: nothing)."""
        users = self._users.get(tenant, 0)
        if users > 1:
            self._users[tenant] = users - 1
        elif users == 1:
            del self._users[tenant]
            self._unlock(self.key(tenant))

    def release(self) -> None:
        """Let every lock go (the StateStore closes); a connection already gone has let go."""
        for tenant in list(self._users):
            del self._users[tenant]
            self._unlock(self.key(tenant))

    def recover_idle(self, recover: Callable[[str], list[int]]) -> list[int]:
        """Fail the dead runs of every tenant no live process writes (locks held by this
        connection, or free: taken for the moment); tenants another process holds are left."""
        rows = self._execute("SELECT DISTINCT tenant FROM runs WHERE status = 'running'").fetchall()
        dead: list[int] = []
        for tenant in self.in_order(row[0] for row in rows):
            if tenant in self._users:
                dead += recover(tenant)
                continue
            key = self.key(tenant)
            if self._try(key):
                try:
                    dead += recover(tenant)
                finally:
                    self._unlock(key)
        return sorted(dead)

    # -- the server's side -------------------------------------------------------------------

    def _execute(self, sql: str, params: list[object] | None = None) -> psycopg.Cursor[Any]:
        return self.db.execute(sql, params)

    def _try(self, key: int) -> bool:
        row = self._execute("SELECT pg_try_advisory_lock(?)", [key]).fetchone()
        return bool(row and row[0])

    def _unlock(self, key: int) -> None:
        with contextlib.suppress(psycopg.Error):
            self._execute("SELECT pg_advisory_unlock(?)", [key])

    def _busy(self, tenant: str, key: int, wait: float, above: list[str]) -> str:
        if above:
            why = f"this process writes tenant {above[0]!r} and cannot wait for it (the two could wait for each other): try again when that run ends"
        elif wait > 0:
            why = f"waited {wait:g} s: wait for its run to end or stop it"
        else:
            why = "wait for its run to end or stop it"
        return (
            f"tenant {tenant!r} of the PostgreSQL state at {self.where} is being written by another syncd process "
            f"({self._holder(tenant, key)}); {why}"
        )

    def _holder(self, tenant: str, key: int) -> str:
        """Who holds `key` (the server's view) and the tenant's open run (the state's), in short."""
        try:
            session = self._execute(
                "SELECT a.pid, a.application_name, host(a.client_addr) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid::bigint = ? AND l.objid::bigint = ? "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1",
                [(key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF],
            ).fetchone()
            run = self._execute(
                "SELECT id, job, pid, host FROM runs WHERE tenant = ? AND status = 'running' ORDER BY id DESC LIMIT 1", [tenant]
            ).fetchone()
        except psycopg.Error:
            return "unknown"
        parts = []
        if session is not None:
            pid, name, address = session
            parts.append(f"server pid {pid}, {name or 'unnamed'}" + (f" from {address}" if address else ""))
        if run is not None:
            number, job, pid, host = run
            parts.append(f"its run {number}: {job}, pid {pid} on {host}")
        return "; ".join(parts) or "unknown"
