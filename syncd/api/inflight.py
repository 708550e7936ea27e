"""How many requests one token may have in flight: a limit sized from the link, not configured.

Why: the rate limit is reached only when `rate x round trip` requests are in flight at once
(Little's law). At 100 requests/s and 150 ms that is 15; a fixed `concurrency = 8` capped a
crawl at 53 requests/s, half the rate. Nobody knows their round trip, it changes, and in a
fleet the token's rate is shared; the client measures both, so it sizes the limit itself.

Which controller, and why: TCP's congestion window (NewReno, RFC 5681) bounded by BBR's
target (`cwnd = gain x BtlBw x RTprop`, with the rate the service allows in place of the
bottleneck bandwidth):

- **Slow start**: from a small start, one more per clean answer, so the limit doubles every
  round trip of clean answers until the first sign of trouble, then **additive increase** (one
  more per round trip of clean answers). Both are proven not to oscillate wildly and to share
  fairly between clients that use them.
- **Multiplicative decrease**: a 429, a 5xx, a timeout or a dropped connection halves it, at
  most once per round trip (the answers of requests sent before the cut say nothing new).
- **Target** (BBR): never more than `ceil(GAIN x rate x RTT) + HEADROOM`, where RTT is a moving
  average of the time to the first byte (RFC 6298's smoothed RTT) and the rate is the service's
  (`X-RateLimit-*`, learned by the pacer). More in flight than the target only waits in the
  pacer; fewer leaves the rate unused. The gain covers jitter and the requests the pacer
  holds back while a burst drains. When other processes spend the same token (a fleet), the
  rate is what this client was delivered (answers per second, BBR's max filter over recent
  windows): the gain over it keeps probing for more, and two replicas sharing one token each
  size their limit to their own share. Without a rate announced (no headers) there is no
  target: slow start, the cuts and the ceiling decide.
- **Startup** (BBR): until the first cut, the service's rate reached or three round trips
  without a quarter more delivered, the target's gain is 2.89 (`STARTUP_GAIN`), so that the
  lagging measurements of a start do not hold slow start back.
- Never below `floor`, never above `ceiling` (the tenant's `concurrency`).

Pure: no clock, no I/O; the caller passes the time of each answer (`syncd.api.inflight_gate`
applies the limit to a capacity limiter).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Literal

__all__ = [
    "DEFAULT_FLOOR",
    "DEFAULT_START",
    "GAIN",
    "HEADROOM",
    "InFlightLimit",
    "Outcome",
    "bdp_target",
    "link_text",
    "outcome_of",
]

GAIN = 1.5
"""In flight = GAIN x rate x RTT: a third more than the link holds, for jitter and bursts."""
STARTUP_GAIN = 2 / math.log(2)
"""The gain until the rate is reached or the first cut (BBR's STARTUP, 2.89): the rates the
target is sized from lag a start (a window of past answers; the pacer learns from a full
bucket), and a target of 1.5 x a lagging rate would hold slow start back."""
HEADROOM = 2
"""Added to the target: at a small rate x RTT, a request or two more cost nothing."""
DEFAULT_FLOOR = 2
"""The limit never goes below this: one slow request must not stall every other."""
DEFAULT_START = 10
"""The limit before any answer (slow start doubles it each round trip): TCP's initial window (RFC 6928)."""
_RTT_GAIN = 1 / 8
"""Weight of a new sample in the smoothed RTT (RFC 6298's alpha)."""
_FIRST_RTT = 0.1
"""Seconds taken for a round trip before any was measured (once-per-RTT decisions only)."""
_MIN_WINDOW = 0.5
"""Shortest window (seconds) over which the delivered rate is counted."""
_WINDOW_RTTS = 2
"""The delivered rate is counted over this many round trips (at least `_MIN_WINDOW`)."""
_FILTER_SECONDS = 2.0
"""The delivered rate is the best of the windows that ended this recently (BBR's max filter):
a pause of a second (a 429's Retry-After, a phase of the work with little to do) does not
shrink the limit the next phase needs."""

Outcome = Literal["clean", "congested"]


def outcome_of(status: int | None) -> Outcome:
    """`congested` for what says "fewer, please" (429, 5xx, no complete answer: `None`);
    `clean` for every other answer (a 404 is an answer, at the speed of the link)."""
    if status is None or status == 429 or 500 <= status < 600:
        return "congested"
    return "clean"


def bdp_target(rate: float, rtt: float, gain: float = GAIN) -> int:
    """Requests in flight that keep `rate` requests/s flowing over a round trip of `rtt` s,
    with a gain and HEADROOM (the bandwidth-delay product, as BBR sizes its window)."""
    return math.ceil(gain * max(0.0, rate) * max(0.0, rtt)) + HEADROOM


def link_text(limit: int, rtt: float | None) -> str:
    """`in flight ≤ 24 (rtt 152 ms)`: the same words in progress lines and logs."""
    shown = f"in flight ≤ {limit}"
    return shown if rtt is None else f"{shown} (rtt {rtt * 1000:.0f} ms)"


class InFlightLimit:
    """One token's limit of requests in flight (see the module docstring).

    Feed it `answered(now, status, ttfb)` for every attempt (status None: no complete answer)
    and `set_rate(rate, shared=...)` with what the pacer knows; read `limit`."""

    def __init__(self, ceiling: int, *, floor: int = DEFAULT_FLOOR, start: int = DEFAULT_START) -> None:
        self.ceiling = max(1, ceiling)
        self.floor = max(1, min(floor, self.ceiling))
        self._window = float(min(max(start, self.floor), self.ceiling))
        self._threshold = math.inf
        self._startup = True
        """STARTUP_GAIN until the first cut, the service's rate delivered, or a plateau."""
        self._round_end = -math.inf
        self._full_rate = 0.0
        self._flat_rounds = 0
        """Slow start below it, additive increase above (TCP's ssthresh); set by a cut."""
        self._srtt: float | None = None
        self._cut_at = -math.inf
        self._server_rate: float | None = None
        self._shared = False
        self._answers: deque[float] = deque()
        """Times of the clean answers of the current delivery window."""
        self._delivered: deque[tuple[float, float]] = deque()
        """(time, rate) of recent windows, decreasing rates (a sliding maximum)."""

    # ----------------------------------------------------------------- reading

    @property
    def limit(self) -> int:
        return max(self.floor, min(self.ceiling, int(self._window)))

    @property
    def rtt(self) -> float | None:
        """Smoothed time to the first byte (seconds), None before the first clean answer."""
        return self._srtt

    def delivered_rate(self) -> float | None:
        """Clean answers per second: the best recent window; None before any."""
        return self._delivered[0][1] if self._delivered else None

    def rate(self) -> float | None:
        """The rate the target is sized for. This client the token's only spender: the
        service's (or what was delivered, if more: the pacer learns the rate from a bucket
        that starts full, so it lags at first); no rate announced: none (slow start and the
        ceiling decide). A fleet: what this client was delivered, its share, never more than
        the service's."""
        server, delivered = self._server_rate, self.delivered_rate()
        if not self._shared:
            return None if server is None else max(server, delivered or 0.0)
        if delivered is None or server is None:
            return delivered
        return min(delivered, server)

    def wanted(self, gain: float = GAIN) -> int | None:
        """The target before the ceiling: what the link needs in flight; None while unknown."""
        rate = self.rate()
        if rate is None or self._srtt is None:
            return None
        return bdp_target(rate, self._srtt, gain)

    def capped(self) -> bool:
        """The ceiling, not the link, holds the limit back: the limit sits at the ceiling, the
        link wants more, and less than the service's rate arrives (worth saying: raise it)."""
        wanted = self.wanted()
        delivered = self.delivered_rate()
        return (
            self._server_rate is not None
            and wanted is not None
            and wanted > self.ceiling
            and self.limit >= self.ceiling
            and delivered is not None
            and delivered < 0.9 * self._server_rate
        )

    # ----------------------------------------------------------------- learning

    def set_rate(self, rate: float | None, *, shared: bool = False) -> None:
        """The service's rate for the token (requests/s; None: not known or not limited);
        `shared`: other processes spend it too (a fleet), so this one sizes from its share."""
        self._server_rate = rate if rate is not None and rate > 0 else None
        self._shared = shared

    def answered(self, now: float, status: int | None, ttfb: float | None = None) -> int:
        """Learn from one attempt; returns the new limit."""
        if outcome_of(status) == "congested":
            self._cut(now)
        else:
            if ttfb is not None and ttfb >= 0:
                self._srtt = ttfb if self._srtt is None else self._srtt + _RTT_GAIN * (ttfb - self._srtt)
            self._deliver(now)
            if self._startup:
                self._startup_round(now)
            if self._window < self._threshold:
                self._window += 1.0  # slow start: doubles every round trip
            else:
                self._window += 1.0 / self._window  # additive increase: one per round trip
        self._bound()
        return self.limit

    def _startup_round(self, now: float) -> None:
        """End the startup once the service's rate is delivered, or (BBR) once three round
        trips in a row did not deliver a quarter more than before: a fleet's share is reached."""
        delivered = self.delivered_rate() or 0.0
        if self._server_rate is not None and delivered >= 0.9 * self._server_rate:
            self._startup = False
        elif now >= self._round_end:
            self._round_end = now + (self._srtt or _FIRST_RTT)
            if delivered >= 1.25 * self._full_rate:
                self._full_rate, self._flat_rounds = delivered, 0
            else:
                self._flat_rounds += 1
                self._startup = self._flat_rounds < 3

    def _cut(self, now: float) -> None:
        """Halve, once per round trip: the other answers of that round tell the same news."""
        if now - self._cut_at < (self._srtt or _FIRST_RTT):
            return
        self._cut_at = now
        self._startup = False
        self._window = max(float(self.floor), self._window / 2)
        self._threshold = self._window

    def _deliver(self, now: float) -> None:
        """Count a clean answer in the delivered rate (a window of `_WINDOW_RTTS` round trips)."""
        span = max(_MIN_WINDOW, _WINDOW_RTTS * (self._srtt or 0.0))
        answers = self._answers
        answers.append(now)
        while answers and answers[0] <= now - span:
            answers.popleft()
        sample = len(answers) / span
        best = self._delivered
        while best and best[-1][1] <= sample:
            best.pop()
        best.append((now, sample))
        while best[0][0] <= now - max(_FILTER_SECONDS, span):
            best.popleft()

    def _bound(self) -> None:
        """Keep the window within the target and the ceiling: a cut must shrink what is used,
        not a window grown far past it (TCP's window validation, RFC 7661)."""
        wanted = self.wanted(STARTUP_GAIN if self._startup else GAIN)
        top = self.ceiling if wanted is None else min(self.ceiling, max(self.floor, wanted))
        self._window = min(self._window, float(top))
