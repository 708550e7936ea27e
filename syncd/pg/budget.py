"""A request budget per API token shared by every replica of a fleet, on PostgreSQL (issue 13).

Why: each daemon's Pacer models the server's bucket from the answers it gets, and cannot see
what other replicas spend from the same token: N replicas at full speed would hit one tenant
N times harder, answered by 429s. Here the replicas share one row per token (`token_budgets`,
keyed by `budget_key`: an HMAC, never the token) holding the freshest server observation, the
tickets of every permit handed out since (so each replica's pacing counts the others'
requests), a `blocked_until` after anyone's 429, and optionally a token bucket of a configured
rate. The arithmetic is `syncd.pg.budget_model`'s; this module moves it in and out.

Round trips stay few: a replica reserves permits in small batches (up to `batch`, 5; while
the server's bucket refills it waits for a batch rather than asking for each permit) and keeps
them `ttl` (0.5 s) at most, giving the unused back. Its answers ride along with its next
reservation or, every `push_every` (50 ms) at most, on their own: the model's picture of the
bucket is only as good as its freshest answer. A 429 and the answer to a probe go at once, so
that the others stop or start. An exchange is one short transaction on the row in two
pipelined round trips (lock and read the clock; write and commit). Measured with three
replicas at full speed against the emulator (100 requests/s, bursts of 10): no 429 in 600
requests, about one exchange per request counting the pushes, throughput at the server's rate.

Why a sync psycopg connection in a worker thread (`anyio.to_thread.run_sync`) and not
`AsyncConnection`: connections come from `syncd.pg.connect` (bounded waits, named,
password-free errors) like every other fleet connection; an exchange is never cut in the
middle by a cancellation (the thread finishes it, then the cancellation lands), so the row
lock and the connection are never left half-way; and a replica makes one exchange at a time,
so one thread at a time is all it takes.

Why an HMAC with a secret of the database's own (`fleet_secrets`, made at first use) and not a
plain sha256 of the URL and token: whoever read a sha256 key (a dump of the table, the key's
start in a log line) could confirm a guessed token offline, and the same token had the same key
in every database. Without the secret a key says nothing about the token, and it differs from
one state database to the next. Rows keyed the old way are deleted by the migration that made
the secrets table: they only hold pacing figures that the next answers rebuild within seconds.

A database that cannot be reached must not stop the work: the replica says so once and paces
on its own model (`available` is False) for `retry_after_failure` seconds before trying again.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import astuple, dataclass
from typing import Any, Protocol

import anyio
import psycopg
from pydantic import SecretStr

from syncd.logging import get_logger
from syncd.pg.budget_model import COLUMNS, TIME_FIELDS, Grant, Note, Row, give_back, grant, observe
from syncd.pg.connect import PgError, connect
from syncd.pg.migrations import PgMigration, migrate

__all__ = ["BUDGET_MIGRATIONS", "BudgetStats", "PacedCounts", "RateAnswer", "SharedBudget", "budget_key", "budget_secret"]

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
"""The request budget each API token shares across replicas; the key is a hash of the base URL
and the token, never the token (an HMAC since 0003)."""

_BUDGET_KEY_SECRET = """
CREATE TABLE fleet_secrets (
    name text PRIMARY KEY,
    secret bytea NOT NULL CHECK (length(secret) >= 32),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
DELETE FROM token_budgets;
"""
"""Secrets of this state database, made at first use (`budget_secret`): the key of
`token_budgets` rows is an HMAC under one. The rows keyed by a plain sha256 go: a guessed token
could be confirmed against them, and they hold only pacing figures the next answers rebuild."""

BUDGET_MIGRATIONS: tuple[PgMigration, ...] = (
    PgMigration("0002-token-budgets", _TOKEN_BUDGETS),
    PgMigration("0003-budget-key-secret", _BUDGET_KEY_SECRET),
)
"""The budget's tables, made by the first budget that connects (`syncd.pg.migrations`)."""


class RateAnswer(Protocol):
    """What one answer said of the token's rate (`syncd.api.pacing.RateInfo`): `reset` in epoch
    seconds, `retry_after` in seconds. A protocol here: this layer imports nothing above it."""

    @property
    def limit(self) -> int | None: ...
    @property
    def remaining(self) -> int | None: ...
    @property
    def reset(self) -> float | None: ...
    @property
    def retry_after(self) -> float | None: ...


class PacedCounts(Protocol):
    """Where the waits for a permit are counted (`syncd.api.stats.ClientStats`)."""

    paced_waits: int
    paced_seconds: float

_RECHECK = 0.5
"""Longest a waiting replica sleeps before asking again (others' answers change the picture)."""
_LOG = get_logger("syncd.fleet")


def _select_sql() -> str:
    cols = ", ".join(f"extract(epoch FROM {c})::float8" if c in TIME_FIELDS else c for c in COLUMNS)
    return f"SELECT {cols} FROM token_budgets WHERE key = %s FOR UPDATE"


def _update_sql() -> str:
    sets = ", ".join(f"{c} = to_timestamp(%s)" if c in TIME_FIELDS else f"{c} = %s" for c in COLUMNS)
    return f"UPDATE token_budgets SET {sets}, updated_at = clock_timestamp() WHERE key = %s"


_SELECT, _UPDATE = _select_sql(), _update_sql()
_INSERT = "INSERT INTO token_budgets (key) VALUES (%s) ON CONFLICT (key) DO NOTHING"
_CLOCK = "SELECT extract(epoch FROM clock_timestamp())::float8"


_SECRET_NAME = "token_budget_keys"
_NEW_SECRET = "INSERT INTO fleet_secrets (name, secret) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING"
_READ_SECRET = "SELECT secret FROM fleet_secrets WHERE name = %s"


def budget_key(base_url: str, token: SecretStr | str, secret: bytes) -> str:
    """The row's key: HMAC-SHA256, under the database's `secret`, of the base URL and the token
    (one budget per token and server; the module docstring says why not a plain hash)."""
    value = token.get_secret_value() if isinstance(token, SecretStr) else token
    message = f"{base_url.rstrip('/')}\n{value.strip()}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def budget_secret(conn: psycopg.Connection) -> bytes:
    """The database's secret of budget keys, made (32 random bytes) by the first replica that
    asks; replicas asking at once all get the one that was stored. `conn` in autocommit mode."""
    with conn.transaction():
        conn.execute(_NEW_SECRET, (_SECRET_NAME, secrets.token_bytes(32)))
        found = conn.execute(_READ_SECRET, (_SECRET_NAME,)).fetchone()
    if found is None:
        raise PgError("the secret of the token budgets' keys vanished")
    return bytes(found[0])


@dataclass
class BudgetStats:
    """What this replica's share of the budget did (tests, metrics)."""

    exchanges: int = 0
    granted: int = 0
    returned: int = 0
    waits: int = 0
    blocked_waits: int = 0
    """Waits because some replica's 429 blocks the token."""
    failures: int = 0


@dataclass(slots=True)
class _Pending:
    note: Note
    mono: float
    urgent: bool


class SharedBudget:
    """This replica's door to one token's shared budget; give it to `TenantClient(budget=...)`
    (or `Pacer(shared=...)`). Open with `await budget.open()` or `async with`, close with `aclose()`.

    `rate`/`burst`: a token bucket the whole fleet keeps to (config), besides the server's limit.
    """

    def __init__(
        self,
        url: str,
        base_url: str,
        token: SecretStr | str,
        *,
        application_name: str = "syncd-budget",
        batch: int = 5,
        ttl: float = 0.5,
        margin: int = 1,
        safety: float = 0.95,
        max_block: float = 60.0,
        rate: float | None = None,
        burst: float | None = None,
        retry_after_failure: float = 30.0,
        push_every: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.key: str | None = None
        """The row's key (`budget_key`), known once connected: it needs the database's secret."""
        self._base_url, self._token = base_url, token if isinstance(token, SecretStr) else SecretStr(token)
        self.stats = BudgetStats()
        self.batch, self.ttl, self.margin, self.safety, self.max_block = max(1, batch), ttl, margin, safety, max_block
        self.rate, self.burst, self.retry_after_failure, self.push_every = rate, burst, retry_after_failure, push_every
        self.waiting: str | None = None
        """Why `acquire` waits right now ("blocked", "budget", "probe", "bucket"), else None."""
        self._url, self._application_name = url, application_name
        self._clock, self._wall = clock, wall
        self._conn: psycopg.Connection | None = None
        self._row_made = False
        self._lock = anyio.Lock()
        self._stash: deque[tuple[int, float]] = deque()  # (ticket, expires at, monotonic)
        self._probes: set[int] = set()
        self._want = 1
        self._tickets: dict[int, int] = {}  # the Pacer's seq -> ticket
        self._flying: set[int] = set()
        self._notes: list[_Pending] = []
        self._returns: list[int] = []
        self._down_until = 0.0
        self._last_exchange = 0.0

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> SharedBudget:
        """Connect now (a PgError if the database is unreachable), not at the first request."""
        await anyio.to_thread.run_sync(self._connection)
        return self

    async def __aenter__(self) -> SharedBudget:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Give the unused permits back, push the answers not said yet, and disconnect."""
        self._returns.extend(ticket for ticket, _ in self._stash)
        self._stash.clear()
        with anyio.CancelScope(shield=True):
            if self._conn is not None and (self._returns or self._notes) and self.available:
                await self._exchange(0)
            conn, self._conn = self._conn, None
            if conn is not None:
                await anyio.to_thread.run_sync(conn.close)

    @property
    def available(self) -> bool:
        """False for a while after the database failed us: the Pacer's own model paces then."""
        return self._clock() >= self._down_until

    # ----------------------------------------------------------------- the Pacer's side

    async def acquire(self, seq: int, stats: PacedCounts | None = None) -> None:
        """Wait for a permit for the Pacer's request `seq` (one caller at a time: the Pacer's
        lock). Without the database, returns at once and the Pacer paces alone."""
        started: float | None = None
        try:
            while True:
                ticket = self._take()
                if ticket is not None:
                    self._tickets[seq] = ticket
                    self._flying.add(ticket)
                    return
                if not self.available:
                    return
                result = await self._exchange(self._want)
                if result is None or result.count:
                    continue
                if started is None:
                    started = self._clock()
                    self.stats.waits += 1
                    if stats is not None:
                        stats.paced_waits += 1
                self.stats.blocked_waits += result.reason == "blocked"
                self.waiting = result.reason
                await anyio.sleep(min(result.wait, _RECHECK))
        finally:
            self.waiting = None
            if started is not None and stats is not None:
                stats.paced_seconds += self._clock() - started

    def note(self, seq: int, status: int, info: RateAnswer) -> None:
        """Keep the answer to `seq` for the next exchange (`info` from `parse_rate_headers`)."""
        ticket = self._tickets.get(seq)
        if ticket is None:
            return  # sent without a shared permit (the database was away): nothing to relate it to
        older = sum(1 for other in self._flying if other < ticket)
        reset_in = info.reset - self._wall() if info.reset is not None else None
        note = Note(ticket, status, info.limit, info.remaining, reset_in, info.retry_after, older)
        urgent = status == 429 or ticket in self._probes
        self._probes.discard(ticket)
        self._notes.append(_Pending(note, self._clock(), urgent))
        if len(self._notes) > 64:  # an old answer that says nothing urgent is not missed
            drop = next((i for i, p in enumerate(self._notes) if not p.urgent), 0)
            del self._notes[drop]

    async def settle(self, seq: int) -> None:
        """After the answer to `seq`: push the answers now if the fleet must know (a 429, a
        probe), or if the last exchange is `push_every` old (a fresh anchor is worth more
        permits to everyone than it costs); else they ride along with the next reservation."""
        if self._notes and self.available and (
            any(p.urgent for p in self._notes) or self._clock() - self._last_exchange >= self.push_every
        ):
            await self._exchange(0)

    def forget(self, seq: int) -> None:
        """The request `seq` is over (answered, failed or cancelled). A probe that ended without
        an answer (a refused connection, a timeout) is said to the row with the next exchange
        (status 0): its lease must not hold the fleet's next request back once it is over."""
        ticket = self._tickets.pop(seq, None)
        if ticket is not None:
            self._flying.discard(ticket)
            if ticket in self._probes:  # note() takes an answered probe out
                self._probes.discard(ticket)
                self._notes.append(_Pending(Note(ticket, 0), self._clock(), urgent=True))

    # ----------------------------------------------------------------- exchanges

    def _take(self) -> int | None:
        """A reserved permit still fresh; the stale ones go back (the model counts them sent)."""
        now = self._clock()
        while self._stash:
            ticket, expires = self._stash.popleft()
            if now < expires:
                if not self._stash:
                    self._want = min(self.batch, self._want + 1)  # all used in time: ask for more
                return ticket
            self._returns.append(ticket)
            self._probes.discard(ticket)
            self._want = max(1, self._want // 2)
        return None

    async def _exchange(self, want: int) -> Grant | None:
        """One transaction: push answers and unused permits, reserve up to `want` permits."""
        async with self._lock:
            if not (want or self._notes or self._returns):
                return Grant(0)  # another task pushed them while this one waited
            pending, self._notes = self._notes, []
            returns, self._returns = self._returns, []
            notes = [(p.note, p.mono) for p in pending]
            self._last_exchange = self._clock()
            try:
                result = await anyio.to_thread.run_sync(self._exchange_sync, notes, returns, want)
            except (psycopg.Error, PgError, OSError) as exc:
                self._failed(exc)
                return None
            self.stats.exchanges += 1
            self.stats.returned += len(returns)
            grant_, first = result
            if grant_.count:
                self.stats.granted += grant_.count
                expires = self._clock() + self.ttl
                self._stash.extend((ticket, expires) for ticket in range(first, first + grant_.count))
                if grant_.probe:
                    self._probes.add(first)
            return grant_

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            conn = connect(self._url, application_name=self._application_name)
            try:  # the budget makes its own tables: a command's first request may come first
                migrate(conn, BUDGET_MIGRATIONS)
                if self.key is None:
                    self.key = budget_key(self._base_url, self._token, budget_secret(conn))
            except BaseException:
                conn.close()
                raise
            self._conn, self._row_made = conn, False
        return self._conn

    def _exchange_sync(self, notes: list[tuple[Note, float]], returns: list[int], want: int) -> tuple[Grant, int]:
        """Two round trips: (BEGIN, lock the row, read the clock), then (UPDATE, COMMIT). The
        clock is read after the lock: a `clock_timestamp()` in the locking SELECT is taken
        before it waits for another replica, and would date this replica's answers too early."""
        conn = self._connection()
        with conn.pipeline(), conn.transaction():
            if not self._row_made:
                conn.execute(_INSERT, (self.key,))
            locked = conn.execute(_SELECT, (self.key,))
            clock = conn.execute(_CLOCK)
            found, (now,) = locked.fetchone(), clock.fetchone() or (None,)
            mono = self._clock()
            if found is None or now is None:
                raise PgError("the token's budget row vanished")
            row = Row(*found)
            for note, when in notes:
                observe(row, note, now - max(0.0, mono - when), now=now, max_block=self.max_block, safety=self.safety)
            give_back(row, returns)
            result = grant(row, now, want, margin=self.margin, safety=self.safety, bucket_rate=self.rate, bucket_burst=self.burst) if want else Grant(0)
            conn.execute(_UPDATE, (*_values(row), self.key))
        self._row_made = True
        return result, row.tickets - result.count + 1

    def _failed(self, exc: BaseException) -> None:
        self.stats.failures += 1
        was_up = self.available
        self._down_until = self._clock() + self.retry_after_failure
        # Permits and answers of a failed exchange are dropped: the row never saw them.
        self._stash.clear()
        self._notes.clear()
        self._returns.clear()
        if self._conn is not None and self._conn.broken:
            conn, self._conn = self._conn, None
            conn.close()
        if was_up:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            _LOG.warning(
                f"shared request budget unavailable, pacing alone for {self.retry_after_failure:g} s: {reason}",
                budget=(self.key or "")[:12],
            )


def _values(row: Row) -> tuple[Any, ...]:
    return astuple(row)
