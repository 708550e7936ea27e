"""The arithmetic of the shared request budget (issue 13): pure functions over one token's row.

Why apart from `syncd.pg.budget`: no I/O here, so the model can be read and tested without a
database; `budget.py` only loads a `Row` under a row lock, calls `observe`, `give_back` and
`grant`, and writes it back. All times are the database's clock (epoch seconds): the replicas'
own clocks never meet.

The model is the Pacer's (`syncd.api.pacing`), with the fleet's counts instead of one process':

- **Tickets**: every permit handed out to any replica takes the next number (`tickets`). An
  answer is pushed with its request's ticket; `tickets - anchor_ticket` are the requests sent
  since by the whole fleet (plus the pushing replica's older ones still in flight,
  `anchor_pending`), which the server's `Remaining` cannot show yet. Permits handed out but never
  used come back as `credit`.
- **Anchor**: the freshest observation (`Remaining`, `Limit`, `Reset` made absolute in database
  time). A later ticket replaces it; an older one only when it is the more careful of the two.
- **Refill rate**: measured between a base observation and later ones, with the tickets between
  them (less those refused), while the base's `Reset` has not passed (the bucket cannot have been
  full in between). Until measured, the anchor's guess `(Limit - Remaining - 1) / (Reset - at)`.
- **Blocked until**: after any replica's 429, nobody gets a permit until its `Retry-After`.
- **Bucket** (optional): a token bucket of a configured rate and burst, on top of the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

__all__ = ["TIME_FIELDS", "Grant", "Note", "Row", "give_back", "grant", "observe", "spendable"]

STALE = 1.0
"""An anchor without `Reset` this old (s) no longer blocks a lone probe; a probe's lease."""
MIN_SPAN = 0.1
"""Shortest span (s) between two observations that measures the refill rate."""
ALPHA = 0.2
RELAX = 0.02
"""Reserve given back per clean answer after a 429 (tighten fast, loosen slowly)."""
EPSILON = 0.005
NEWS = 0.05
"""When only fresher answers can help (a probe out, too many requests unseen), ask again this soon."""

Reason = Literal["granted", "blocked", "budget", "probe", "bucket"]


@dataclass(frozen=True, slots=True)
class Note:
    """One answer, as a replica pushes it: its request's ticket and the server's numbers."""

    ticket: int
    status: int
    """The HTTP status; 0: the request ended without an answer (refused, timed out, cancelled)."""
    limit: int | None = None
    remaining: int | None = None
    reset_in: float | None = None
    """Seconds from the answer to the server's `Reset` (its clock, read against ours)."""
    retry_after: float | None = None
    pending: int = 0
    """The replica's own requests with older tickets still in flight when the answer came."""


@dataclass(slots=True)
class Row:
    """The `token_budgets` row of one token, less its key (the field names are the columns)."""

    rate_limit: int | None = None
    remaining: int | None = None
    reset_at: float | None = None
    observed_at: float | None = None
    anchor_ticket: int = 0
    anchor_pending: int = 0
    tickets: int = 0
    credit: int = 0
    refused: int = 0
    unlimited: bool = False
    refill_rate: float | None = None
    caution: float = 0.0
    no_guess_until: float | None = None
    base_ticket: int | None = None
    base_remaining: int | None = None
    base_at: float | None = None
    base_reset: float | None = None
    base_refused: int | None = None
    blocked_until: float | None = None
    probe_until: float | None = None
    bucket_tokens: float | None = None
    bucket_at: float | None = None


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Row))
TIME_FIELDS = frozenset(name for name in COLUMNS if name.endswith(("_at", "_until", "_reset")))
"""Columns of type timestamptz (epoch seconds here)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """`count` permits; or none: ask again in `wait` seconds, because of `reason`. `probe`: the
    permit is a lone probe (its answer should reach the row at once)."""

    count: int
    wait: float = 0.0
    reason: Reason = "granted"
    probe: bool = False


def _refill(row: Row, remaining: int, at: float, reset_at: float | None, safety: float) -> float:
    """The refill rate to plan with: measured, else this anchor's guess, else 0."""
    if row.refill_rate is not None:
        return row.refill_rate * safety
    if reset_at is None or reset_at <= at or (row.no_guess_until is not None and at < row.no_guess_until):
        return 0.0
    return max(0, max(row.rate_limit or 1, 1) - remaining - 1) / (reset_at - at) * safety


def _spendable_at(row: Row, remaining: int, at: float, reset_at: float | None, ticket: int, pending: int, credit: int, now: float, safety: float) -> tuple[float, float, float]:
    capacity = max(row.rate_limit or 1, 1)
    rate = _refill(row, remaining, at, reset_at, safety)
    if reset_at is not None and now >= reset_at:
        tokens = float(capacity)
    else:
        tokens = min(float(capacity), remaining + rate * max(0.0, now - at))
    unseen = row.tickets - ticket + pending - credit
    return tokens, tokens - unseen, rate


def spendable(row: Row, now: float, safety: float = 0.95) -> tuple[float, float, float]:
    """(tokens the server should hold now, tokens left after the fleet's unseen requests, refill
    rate planned with), from the anchor; the anchor must exist."""
    assert row.remaining is not None and row.observed_at is not None
    return _spendable_at(row, row.remaining, row.observed_at, row.reset_at, row.anchor_ticket, row.anchor_pending, row.credit, now, safety)


def _measure(row: Row, note: Note, at: float, reset_at: float | None) -> None:
    """Update the refill rate from the base observation to `note` (the longest valid span)."""
    assert note.remaining is not None
    if row.base_at is not None and (row.base_reset is None or row.base_reset < at):
        row.base_ticket = row.base_remaining = row.base_at = row.base_reset = row.base_refused = None
    capacity = max(row.rate_limit or 1, 1)
    if row.base_at is None or row.base_ticket is None or row.base_remaining is None or row.base_refused is None:
        if reset_at is not None:
            row.base_ticket, row.base_remaining, row.base_at = note.ticket, note.remaining, at
            row.base_reset, row.base_refused = reset_at, row.refused
        return
    span = at - row.base_at
    if note.ticket <= row.base_ticket or span < MIN_SPAN or note.remaining >= capacity or row.base_remaining >= capacity:
        return
    # Requests between the two, less those refused with 429 (they spent nothing).
    spent = note.ticket - row.base_ticket - (row.refused - row.base_refused)
    sample = max(0.0, (note.remaining - row.base_remaining + spent) / span)
    row.refill_rate = sample if row.refill_rate is None else row.refill_rate + ALPHA * (sample - row.refill_rate)


def observe(row: Row, note: Note, at: float, *, now: float | None = None, max_block: float = 60.0, safety: float = 0.95) -> None:
    """Learn from one answer that arrived at database time `at` (pushed at `now`, default `at`)."""
    now = at if now is None else now
    if note.ticket >= row.tickets:
        # The last permit handed out is answered: no probe is out, with rate-limit figures or
        # without (a 503 from a proxy); the next request may probe at once, as the Pacer's does.
        row.probe_until = None
    if note.remaining is not None:
        row.unlimited = False
        row.rate_limit = note.limit if note.limit else max(row.rate_limit or 0, note.remaining, 1)
        reset_at = at + note.reset_in if note.reset_in is not None else None
        if note.status == 429:
            row.refused += 1
        elif note.remaining == 0 and row.refill_rate is None and reset_at is not None:
            # The reserve went: the guess was wrong (a fixed window?); none until it is over.
            row.no_guess_until = reset_at
        _measure(row, note, at, reset_at)
        fresher = row.observed_at is None or row.remaining is None or note.ticket > row.anchor_ticket
        if not fresher and row.observed_at is not None and at >= row.observed_at:
            # An older request answered later: it replaces the anchor if it is the more careful.
            mine = _spendable_at(row, note.remaining, at, reset_at, note.ticket, note.pending, 0, now, safety)[1]
            fresher = mine <= spendable(row, now, safety)[1]
        if fresher:
            row.remaining, row.observed_at, row.reset_at = note.remaining, at, reset_at
            row.anchor_ticket, row.anchor_pending, row.credit = note.ticket, note.pending, 0
    elif 200 <= note.status < 300:
        row.unlimited = True  # a clean answer without rate-limit headers: no limit announced
    if note.status == 429:
        hint = note.retry_after if note.retry_after is not None else note.reset_in
        hint = 1.0 if hint is None or hint <= 0 else hint
        row.blocked_until = max(row.blocked_until or 0.0, at + min(hint, max_block))
        row.caution = min(max(1.0, row.caution * 2), max((row.rate_limit or 1) / 2, 1.0))
        if row.refill_rate is not None:
            row.refill_rate *= 0.75
    elif 200 <= note.status < 300 and row.caution:
        row.caution = max(0.0, row.caution - RELAX)


def give_back(row: Row, tickets: list[int]) -> None:
    """Permits handed out but never used: those the anchor counts as sent are credited."""
    row.credit += sum(1 for ticket in tickets if ticket > row.anchor_ticket)
    if tickets and row.probe_until is not None and max(tickets) >= row.tickets:
        row.probe_until = None


def _probe(row: Row, now: float) -> Grant:
    """One request at a time refreshes what the fleet knows."""
    if row.probe_until is not None and now < row.probe_until:
        return Grant(0, min(row.probe_until - now, NEWS), "probe")
    row.probe_until = now + STALE
    return Grant(1, probe=True)


def grant(
    row: Row,
    now: float,
    want: int,
    *,
    margin: int = 1,
    safety: float = 0.95,
    bucket_rate: float | None = None,
    bucket_burst: float | None = None,
) -> Grant:
    """Hand out up to `want` permits at database time `now` (tickets `row.tickets - count + 1`
    to `row.tickets`), or say how long to wait."""
    if row.blocked_until is not None and now < row.blocked_until:
        return Grant(0, row.blocked_until - now, "blocked")
    allowed = want
    if bucket_rate:
        burst = max(1.0, bucket_burst or bucket_rate)
        tokens = burst if row.bucket_tokens is None or row.bucket_at is None else min(burst, row.bucket_tokens + (now - row.bucket_at) * bucket_rate)
        row.bucket_tokens, row.bucket_at = tokens, now
        if tokens < 1:
            return Grant(0, (1 - tokens) / bucket_rate, "bucket")
        allowed = min(allowed, int(tokens))
    result = _server_grant(row, now, allowed, margin, safety)
    if result.count:
        row.tickets += result.count
        if bucket_rate and row.bucket_tokens is not None:
            row.bucket_tokens -= result.count
    return result


def _server_grant(row: Row, now: float, want: int, margin: int, safety: float) -> Grant:
    """The part decided by the server's own numbers."""
    if row.unlimited:
        return Grant(want)
    if row.remaining is None or row.observed_at is None:
        return _probe(row, now)
    capacity = max(row.rate_limit or 1, 1)
    tokens, budget, rate = spendable(row, now, safety)
    need = 1 + min(margin + int(row.caution), capacity - 1)
    unseen = tokens - budget
    # While refill comes, wait for a batch (what the window allows) rather than ask for each
    # permit: the replicas take turns with a few round trips each.
    batch = min(want, int(capacity - unseen - need) + 1) if rate > 0 and tokens < capacity else 1
    if budget >= need + max(batch, 1) - 1:
        return Grant(min(want, int(budget - need) + 1))
    reset_passed = row.reset_at is not None and now >= row.reset_at
    if reset_passed or (row.reset_at is None and now - row.observed_at >= STALE):
        return _probe(row, now)  # what the anchor says is out of date
    waits: list[float] = []
    if row.refill_rate is None and budget >= 1:
        # No measured rate yet: spend the reserve on one lone request a little later, so
        # that a pair of answers can measure the refill (or its absence).
        probe_at = row.observed_at + 2 * MIN_SPAN
        if now >= probe_at:
            probe = _probe(row, now)
            if probe.count:
                return probe
            waits.append(probe.wait)
        else:
            waits.append(probe_at - now)
    if rate > 0 and batch >= 1:
        waits.append((need + batch - 1 - budget) / rate)
    elif rate > 0:
        waits.append(NEWS)  # more requests unseen than refill can cover: fresher answers will
    if row.reset_at is not None:
        waits.append(row.reset_at - now + EPSILON)
    else:
        waits.append(row.observed_at + STALE - now)
    return Grant(0, max(min(waits), EPSILON), "budget")
