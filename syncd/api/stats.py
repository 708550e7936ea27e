"""Counters of one tenant's client, for progress displays, run statistics and metrics.

Plain attributes updated in place by the client and its pacer: reading them costs nothing
and needs no lock (one event loop writes them).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClientStats"]

_RATE_WINDOW = 5.0


@dataclass
class ClientStats:
    requests: int = 0
    """HTTP requests sent (every attempt counts)."""
    responses: Counter[int] = field(default_factory=Counter)
    """Answers received, by HTTP status."""
    retries: int = 0
    """Attempts that were repeated after a transient failure."""
    rate_limited: int = 0
    """429 answers."""
    transport_errors: int = 0
    """Attempts without a complete answer (refused, dropped, timed out, cut short)."""
    malformed: int = 0
    """2xx answers whose body was not the JSON expected."""
    too_large: int = 0
    """Answers refused for being longer than the client's `max_answer_bytes`."""
    paging_restarts: int = 0
    """Listings started again from the first page after the server refused a page token."""
    bytes_received: int = 0
    paced_waits: int = 0
    """Times the pacer held a request back to stay under the server's limit."""
    paced_seconds: float = 0.0
    server_rate: float | None = None
    """The pacer's estimate of the server's refill rate (requests/s); None while unknown."""
    inflight_limit: int = 0
    """Requests the token may have in flight now (`syncd.api.inflight`: sized from the link)."""
    inflight_limit_peak: int = 0
    """The highest that limit reached."""
    rtt_seconds: float | None = None
    """Smoothed time to the first byte of an answer (seconds); None before the first."""
    _sent_at: deque[float] = field(default_factory=lambda: deque(maxlen=4096), repr=False)

    def record_sent(self, now: float | None = None) -> None:
        self.requests += 1
        self._sent_at.append(time.monotonic() if now is None else now)

    def record_link(self, limit: int, rtt: float | None) -> None:
        """The token's in-flight limit and round trip, as its controller now sees them."""
        self.inflight_limit = limit
        self.inflight_limit_peak = max(self.inflight_limit_peak, limit)
        self.rtt_seconds = rtt

    def current_rate(self, now: float | None = None) -> float:
        """Requests per second over the last few seconds (what a progress bar shows)."""
        now = time.monotonic() if now is None else now
        recent = sum(1 for t in self._sent_at if now - t <= _RATE_WINDOW)
        return recent / _RATE_WINDOW

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (run statistics, `/metrics`)."""
        return {
            "requests": self.requests,
            "responses": {str(status): n for status, n in sorted(self.responses.items())},
            "retries": self.retries,
            "rate_limited": self.rate_limited,
            "transport_errors": self.transport_errors,
            "malformed": self.malformed,
            "too_large": self.too_large,
            "paging_restarts": self.paging_restarts,
            "bytes_received": self.bytes_received,
            "paced_waits": self.paced_waits,
            "paced_seconds": round(self.paced_seconds, 3),
            "server_rate": None if self.server_rate is None else round(self.server_rate, 2),
            "current_rate": round(self.current_rate(), 2),
            "inflight_limit": self.inflight_limit,
            "inflight_limit_peak": self.inflight_limit_peak,
            "rtt_seconds": None if self.rtt_seconds is None else round(self.rtt_seconds, 4),
        }
