"""Taking tenants' writer locks on the PostgreSQL state (a part of `StateStore`).

Why apart: on PostgreSQL each tenant has a writer lock of its own, waited for a bounded time
(`syncd.state.pg_writers` says why and how); opening a run of a tenant takes it, and a
process about to write several tenants at once takes them together first (`hold`), in the
one order every process uses. On SQLite the file's one lock comes with the first run and
nothing here applies. No psycopg import: a SQLite state never loads it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from syncd.state.dialect import Dialect
from syncd.state.staging import writes

__all__ = ["StoreHolds"]


class StoreHolds:
    """`hold`, `unhold`, and opening a run on PostgreSQL (the lock of its tenant first)."""

    dialect: Dialect
    lock_wait: float
    _lock: threading.RLock
    _writer: Any  # syncd.state.pg_writers.TenantWriters on PostgreSQL
    _active: dict[int, str]

    def _insert_run(self, job: str, tenant: str, scope_ref: str) -> int:
        raise NotImplementedError  # `StateStore`

    def _recover_locked(self, tenant: str | None = None) -> list[int]:
        raise NotImplementedError  # `StateStore`

    def _start_tenant_run(self, job: str, tenant: str, scope_ref: str, on_wait: Callable[[], object] | None) -> int:
        # The tenant's lock counts this run as one of its users from here on; while it waits
        # for another process, this StateStore's other threads go on (no lock of ours is held).
        self._writer.take(tenant, guard=self._lock, wait=self.lock_wait, recover=self._recover_locked, on_wait=on_wait)
        with self._lock:
            try:
                run = self._insert_run(job, tenant, scope_ref)
            except BaseException:
                self._writer.give(tenant)
                raise
            self._active[run] = tenant
            return run

    @writes
    def hold(self, tenants: Iterable[str], *, on_wait: Callable[[], object] | None = None) -> None:
        """PostgreSQL: take the writer locks of several tenants before their runs open, in the
        order that keeps two processes from waiting for each other, each waited for as in
        `start_run` and recovering its tenant's dead runs; `unhold` lets them go (a lock stays
        while a run of its tenant is open). SQLite: nothing. Blocking, as `start_run`."""
        if self.dialect.sqlite:
            return
        with self._lock:
            order = self._writer.in_order(tenants)
        taken: list[str] = []
        try:
            for tenant in order:
                self._writer.take(tenant, guard=self._lock, wait=self.lock_wait, recover=self._recover_locked, on_wait=on_wait)
                taken.append(tenant)
        except BaseException:
            self.unhold(taken)
            raise

    def unhold(self, tenants: Iterable[str]) -> None:
        """Let go of what `hold(tenants)` took."""
        if self.dialect.sqlite:
            return
        with self._lock:
            for tenant in set(tenants):
                self._writer.give(tenant)
