"""Sessions of the PostgreSQL state that this process closed, kept for its next open.

Why: a new session costs the server a backend (about 7 ms of its CPU, and 1.5 ms of ours, on
a fast machine), and the write side opens the state for each step of a round (7 to 9 a round),
a daemon for each run. A session kept costs one round trip when it comes back and is checked
again when it is taken (the caller's migration check is its first statement).

What comes back is clean or is closed: no transaction open, every advisory lock let go (the
tenant writer locks), never a session a fleet run recorded as its own (`PgDatabase.pin`: a
takeover ends such sessions, `syncd.pg.fencing`), not broken. At most `KEPT` are kept, for at most
`IDLE_SECONDS` each, whatever their URL; the rest are closed. A forked child starts with none
and never touches its parent's; the process closes what it keeps at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time

import psycopg
from psycopg.pq import TransactionStatus

__all__ = ["IDLE_SECONDS", "KEPT", "IdleSessions", "IDLE"]

KEPT = 4
"""Sessions kept at once by one process: the write side has two open at most (source and target
read at once); a test worker that goes from schema to schema keeps no more than this."""
IDLE_SECONDS = 30.0
"""A session idle longer is closed rather than reused (a daemon's runs minutes apart open new ones)."""


class IdleSessions:
    """Writable sessions by URL, newest last; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: list[tuple[str, float, psycopg.Connection]] = []

    def take(self, url: str) -> psycopg.Connection | None:
        """The newest session kept for `url`, or None."""
        with self._lock:
            stale = self._expire_locked()
            found = None
            for i in range(len(self._kept) - 1, -1, -1):
                if self._kept[i][0] == url:
                    found = self._kept.pop(i)[2]
                    break
        _close_all(stale)
        return found

    def give(self, url: str, conn: psycopg.Connection) -> None:
        """Keep `conn` for the next open of `url` when it is clean; close it otherwise."""
        if conn.closed or conn.broken or not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
            conn.close()
            return
        try:
            conn.execute("SELECT pg_advisory_unlock_all()")
        except psycopg.Error:
            conn.close()
            return
        with self._lock:
            self._kept.append((url, time.monotonic(), conn))
            stale = self._expire_locked()
            while len(self._kept) > KEPT:
                stale.append(self._kept.pop(0)[2])
        _close_all(stale)

    def close_all(self) -> None:
        with self._lock:
            kept, self._kept = [conn for _, _, conn in self._kept], []
        _close_all(kept)

    def forget_in_child(self) -> None:
        """After a fork, in the child: the parent's sessions are its own. They are dropped
        unclosed: closing one here would send the server its goodbye on the parent's socket,
        and psycopg frees a connection made by another process without a word."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._kept = []

    def _expire_locked(self) -> list[psycopg.Connection]:
        oldest = time.monotonic() - IDLE_SECONDS
        stale = [conn for _, since, conn in self._kept if since < oldest]
        self._kept = [entry for entry in self._kept if entry[1] >= oldest]
        return stale


def _close_all(conns: list[psycopg.Connection]) -> None:
    for conn in conns:
        with contextlib.suppress(Exception):
            conn.close()


IDLE = IdleSessions()
"""This process's kept sessions (`syncd.state.pg_database.open_pg` takes and gives them)."""
atexit.register(IDLE.close_all)
os.register_at_fork(after_in_child=IDLE.forget_in_child)
