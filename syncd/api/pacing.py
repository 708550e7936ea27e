"""Proactive pacing: keep a tenant's requests under the server's rate limit, so that a crawl
running at the limit is (almost) never answered 429.

Why proactive: a 429 costs a whole `Retry-After` (a second or more) for every task of the
tenant, so a crawl that bumps into the limit is slower than one that never does.

How (rclone's pacer, fed by the server's own numbers): every answer announces
`X-RateLimit-Limit` (the bucket's size), `X-RateLimit-Remaining` and `X-RateLimit-Reset` (when
the bucket is full again / the window restarts). The pacer keeps a model of that bucket:

- **Anchor**: the freshest observation (`Remaining` when the answer arrived). Every request
  sent since, and every other request in flight then (the server may have read it later),
  is assumed to have spent a token the anchor does not show yet: requests in flight and
  answers arriving out of order are accounted for.
- **Refill rate**: measured from pairs of observations, `(R_b - R_a + requests between, less
  those refused) / (t_b - t_a)`, smoothed. A pair only counts when the bucket cannot have been
  full in between (`t_b` before `Reset_a`), which also makes a fixed-window server measure 0
  (no refill until the window restarts). Until a measurement exists, the anchor gives a first
  guess for a token bucket, `(Limit - Remaining - 1) / (Reset - now)` (it must refill at least
  that fast to be full by `Reset`), and one lone request spends the reserve a little later so
  that a pair can measure; when that reserve shows up spent, the guess is off until `Reset`.
- **Reset**: once the anchor's `Reset` has passed, the whole `Limit` is available again
  (token bucket: full; fixed window: a new window), less what was sent since; a lone probe
  then refreshes the anchor.

A request may go when the model shows at least `1 + margin` tokens (the margin absorbs floor
rounding and reordering); otherwise the task waits until refill or reset should provide them,
or until an answer changes the picture. Before the first answer only one request is in flight
(a probe that learns the limits); a 2xx without rate-limit headers switches pacing off until
they show up. After a 429 every task of the tenant waits until `Retry-After` (capped at
`max_block`), the rate estimate is cut by a quarter and the reserve grows (it shrinks again
slowly with clean answers: rclone's tighten fast, loosen slowly), which also copes with other
clients spending the same token's bucket. Clients of one process that share a token should
share one Pacer (`TenantClient(pacer=...)`), and with it one limit of requests in flight
(`inflight`, `syncd.api.inflight_gate`).

Replicas of a fleet (several processes or machines spending one token) add a shared budget
(`shared`: `syncd.pg.budget.SharedBudget`, on PostgreSQL): once the first answer has shown
the limits, the fleet's model of the bucket decides when a request may go, since it counts
every replica's requests; this model still learns (and takes over while the database is away).
"""

from __future__ import annotations

import contextlib
import email.utils
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import anyio

from syncd.api.stats import ClientStats

if TYPE_CHECKING:
    from syncd.api.inflight_gate import InFlightGate

__all__ = ["Pacer", "RateInfo", "SharedPermits", "Slot", "parse_rate_headers"]

_RECHECK = 1.0
"""Longest a waiting task sleeps before looking at the model again."""
_STALE = 1.0
"""Without a `Reset` header, an anchor this old (seconds) no longer blocks a lone probe."""
_MIN_SPAN = 0.1
_ALPHA = 0.2
_RELAX = 0.02
"""Extra reserve given back per clean answer after a 429 (rclone: loosen slowly)."""
_EPSILON = 0.005
_EPOCH_THRESHOLD = 1e9
"""A `X-RateLimit-Reset` below this is a number of seconds to wait, not an epoch time."""


@dataclass(frozen=True, slots=True)
class RateInfo:
    """The rate-limit headers of one answer; `reset` in epoch seconds, `retry_after` in seconds."""

    limit: int | None = None
    remaining: int | None = None
    reset: float | None = None
    retry_after: float | None = None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse_rate_headers(headers: Mapping[str, str], wall_now: float | None = None) -> RateInfo:
    """Read `X-RateLimit-*` and `Retry-After` (seconds or an HTTP date), leniently.

    A `Reset` that is small is taken as seconds from now (some servers send a delta).
    """
    now = time.time() if wall_now is None else wall_now
    limit = _number(headers.get("X-RateLimit-Limit"))
    remaining = _number(headers.get("X-RateLimit-Remaining"))
    reset = _number(headers.get("X-RateLimit-Reset"))
    if reset is not None and reset < _EPOCH_THRESHOLD:
        reset = now + reset
    retry_after: float | None = None
    raw = headers.get("Retry-After")
    if raw is not None:
        retry_after = _number(raw)
        if retry_after is None:
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None and when.tzinfo is not None:
                retry_after = max(0.0, when.timestamp() - now)
    return RateInfo(
        limit=int(limit) if limit is not None else None,
        remaining=int(remaining) if remaining is not None else None,
        reset=reset,
        retry_after=retry_after,
    )


@dataclass(frozen=True, slots=True)
class _Observation:
    seq: int
    """Sequence number of the request this answer belongs to."""
    mono: float
    wall: float
    remaining: int
    reset: float | None
    sent: int
    """Requests sent when the answer arrived (later ones are not in `remaining`)."""
    pending: int
    """Other requests in flight when the answer arrived (maybe not in `remaining` either)."""


Mode = Literal["unknown", "unlimited", "limited"]


class Slot:
    """Permission to send one request; report its answer's status and headers with `observe`."""

    __slots__ = ("_pacer", "seq")

    def __init__(self, pacer: Pacer, seq: int) -> None:
        self._pacer = pacer
        self.seq = seq

    def observe(self, status: int, headers: Mapping[str, str]) -> RateInfo:
        """Learn from the answer; returns its rate-limit headers, parsed (once)."""
        return self._pacer._observe(self.seq, status, headers)


class SharedPermits(Protocol):
    """What a Pacer asks of a budget its token shares with other processes (implemented by
    `syncd.pg.budget.SharedBudget`, on PostgreSQL): a permit before each request, the
    answer's rate-limit figures after it. Declared here so the pacer needs no fleet code."""

    @property
    def available(self) -> bool: ...

    async def acquire(self, seq: int, stats: ClientStats | None = None) -> None: ...

    def note(self, seq: int, status: int, info: RateInfo) -> None: ...

    async def settle(self, seq: int) -> None: ...

    def forget(self, seq: int) -> None: ...


class Pacer:
    """One tenant's model of the server's rate limit, shared by all of its tasks.

    `enabled=False` turns it into a pass-through (no pacing, no blocking after a 429): the
    naive client that benchmarks compare with.
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        stats: ClientStats | None = None,
        max_block: float = 60.0,
        safety: float = 0.95,
        margin: int = 1,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        shared: SharedPermits | None = None,
    ) -> None:
        self.enabled = enabled
        self.shared = shared
        self.stats = stats if stats is not None else ClientStats()
        self.max_block = max_block
        self.safety = safety
        self.margin = margin
        self._clock = clock
        self._wall = wall
        self._lock = anyio.Lock(fast_acquire=True)  # no trip through the loop when free
        self._changed = anyio.Event()
        self._waiting = 0  # tasks waiting on `_changed`
        self._mode: Mode = "unknown"
        self._limit = 0
        self._anchor: _Observation | None = None
        self._history: deque[_Observation] = deque(maxlen=512)
        self._rate: float | None = None
        self._caution = 0.0
        self._no_guess_until = 0.0
        self._refused: deque[int] = deque(maxlen=4096)
        self._seq = 0
        self._in_flight: set[int] = set()
        self._blocked_until = 0.0
        self.inflight: InFlightGate | None = None
        """The token's limit of requests in flight, shared like the pacer (set by the first
        `TenantClient` that uses this pacer)."""

    # ----------------------------------------------------------------- reading

    @property
    def mode(self) -> Mode:
        """`unknown` before the first answer, `unlimited` without headers, else `limited`."""
        return self._mode

    @property
    def rate(self) -> float | None:
        """Estimated refill rate of the server's bucket (requests/s), None while unknown."""
        return self._rate

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # ----------------------------------------------------------------- sending

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[Slot]:
        """Wait until a request may go, and count it in flight for the duration of the block."""
        seq = await self._acquire()
        try:
            yield Slot(self, seq)
            if self.shared is not None:
                await self.shared.settle(seq)
        finally:
            self._in_flight.discard(seq)
            if self.shared is not None:
                self.shared.forget(seq)
            self._notify()

    async def _acquire(self) -> int:
        async with self._lock:
            started: float | None = None
            while True:
                delay = self._delay()
                if delay is not None and delay <= 0:
                    break
                if started is None:
                    started = self._clock()
                    self.stats.paced_waits += 1
                changed = self._changed
                self._waiting += 1
                try:
                    with anyio.move_on_after(_RECHECK if delay is None else min(delay, _RECHECK)):
                        await changed.wait()
                finally:
                    self._waiting -= 1
            if started is not None:
                self.stats.paced_seconds += self._clock() - started
            if self.shared is not None and self.enabled and self._mode != "unlimited":
                await self.shared.acquire(self._seq + 1, self.stats)
            self._seq += 1
            self._in_flight.add(self._seq)
            return self._seq

    def _refill_rate(self, anchor: _Observation, capacity: int) -> float:
        """The refill rate to plan with: measured, else the anchor's guess, else 0."""
        if self._rate is not None:
            return self._rate * self.safety
        if anchor.reset is None or anchor.reset <= anchor.wall or anchor.wall < self._no_guess_until:
            return 0.0
        guess = max(0, capacity - anchor.remaining - 1) / (anchor.reset - anchor.wall)
        return guess * self.safety

    def _budget(self, anchor: _Observation, now: float, wall: float) -> tuple[float, float, float]:
        """(tokens the model expects, tokens left after unseen requests, refill rate)."""
        capacity = max(self._limit, 1)
        rate = self._refill_rate(anchor, capacity)
        if anchor.reset is not None and wall >= anchor.reset:
            tokens = float(capacity)
        else:
            tokens = min(float(capacity), anchor.remaining + rate * max(0.0, now - anchor.mono))
        unseen = anchor.pending + (self._seq - anchor.sent)
        return tokens, tokens - unseen, rate

    def _delay(self) -> float | None:
        """Seconds to wait before the next request may go; 0 now; None: until news arrives."""
        if not self.enabled:
            return 0.0
        now = self._clock()
        if now < self._blocked_until:
            return self._blocked_until - now
        if self._mode == "unlimited":
            return 0.0
        anchor = self._anchor
        if anchor is None:
            return None if self._in_flight else 0.0
        if self.shared is not None and self.shared.available:
            return 0.0  # the fleet's model decides (SharedBudget.acquire)
        wall = self._wall()
        capacity = max(self._limit, 1)
        tokens, budget, rate = self._budget(anchor, now, wall)
        need = 1 + min(self.margin + int(self._caution), capacity - 1)
        if budget >= need:
            return 0.0
        reset_passed = anchor.reset is not None and wall >= anchor.reset
        if reset_passed or (anchor.reset is None and now - anchor.mono >= _STALE):
            # What the anchor says is out of date: one probe at a time refreshes it.
            return None if self._in_flight else 0.0
        waits: list[float] = []
        if self._rate is None and budget >= 1:
            # No measured rate yet: spend the reserve on one lone request a little later,
            # so that a pair of answers can measure the refill (or its absence).
            probe_at = anchor.mono + 2 * _MIN_SPAN
            if not self._in_flight and now >= probe_at:
                return 0.0
            waits.append(probe_at - now)
        if rate > 0 and tokens < capacity:
            waits.append((need - budget) / rate)
        if anchor.reset is not None:
            waits.append(anchor.reset - wall + _EPSILON)
        else:
            waits.append(anchor.mono + _STALE - now)
        return max(min(waits), _EPSILON)

    # ----------------------------------------------------------------- learning

    def _notify(self) -> None:
        """Wake the tasks waiting for news (twice a request: a new event only when one waits)."""
        if self._waiting:
            self._changed.set()
            self._changed = anyio.Event()

    def _observe(self, seq: int, status: int, headers: Mapping[str, str]) -> RateInfo:
        now, wall = self._clock(), self._wall()
        info = parse_rate_headers(headers, wall)
        if self.shared is not None:
            self.shared.note(seq, status, info)
        if info.remaining is not None:
            self._mode = "limited"
            self._limit = info.limit if info.limit else max(self._limit, info.remaining, 1)
            obs = _Observation(
                seq, now, wall, info.remaining, info.reset, self._seq, len(self._in_flight - {seq})
            )
            if status == 429:
                self._refused.append(seq)
            elif info.remaining == 0 and self._rate is None and info.reset is not None:
                # The reserve token went: the first guess was wrong (a fixed window?); no
                # guessing until this window is over, the next pairs will measure.
                self._no_guess_until = info.reset
            self._estimate(obs)
            anchor = self._anchor
            # The newest answer usually knows best; an older request's answer arriving late
            # replaces it only if it is the more careful of the two (never over-spend).
            if (
                anchor is None
                or seq > anchor.seq
                or self._budget(obs, now, wall)[1] <= self._budget(anchor, now, wall)[1]
            ):
                self._anchor = obs
        elif 200 <= status < 300:
            # A clean answer without rate-limit headers: this server does not announce a
            # limit (the emulator without --rate-limit). 5xx from a proxy prove nothing.
            self._mode = "unlimited"
        if status == 429:
            hint = info.retry_after
            if hint is None and info.reset is not None:
                hint = info.reset - wall
            hint = 1.0 if hint is None or hint <= 0 else hint
            self._blocked_until = max(self._blocked_until, now + min(hint, self.max_block))
            # The model was too optimistic (or someone else spends the same bucket): keep
            # more tokens in reserve and plan with less refill; clean answers relax it.
            self._caution = min(max(1.0, self._caution * 2), max(self._limit / 2, 1.0))
            if self._rate is not None:
                self._rate *= 0.75
        elif 200 <= status < 300 and self._caution:
            self._caution = max(0.0, self._caution - _RELAX)
        self.stats.server_rate = self._rate
        self._notify()
        return info

    def _estimate(self, obs: _Observation) -> None:
        """Update the refill-rate estimate with the longest valid pair ending at `obs`."""
        history = self._history
        # Once its Reset has passed, an observation may be followed by a full (capped) bucket.
        while history and (history[0].reset is None or history[0].reset < obs.wall):
            history.popleft()
        capacity = max(self._limit, 1)
        if obs.remaining < capacity:
            for first in history:
                span = obs.mono - first.mono
                if span < _MIN_SPAN:
                    break
                if first.remaining >= capacity:
                    continue
                # Requests between the two, less those refused with 429 (they spent nothing).
                spent = obs.seq - first.seq - sum(1 for seq in self._refused if first.seq < seq <= obs.seq)
                sample = max(0.0, (obs.remaining - first.remaining + spent) / span)
                self._rate = sample if self._rate is None else self._rate + _ALPHA * (sample - self._rate)
                break
        if obs.reset is not None and (not history or obs.seq > history[-1].seq):
            history.append(obs)
