"""The limiter of one token's requests in flight, sized by `syncd.api.inflight.InFlightLimit`.

Why apart from the controller: this is the edge (a capacity limiter, the clock, a log line);
the controller stays a pure function of what it is fed. Why one per token, kept by the
token's `Pacer`: clients that share a pacer spend one token's rate, so its limit must be one
number, not one per client.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio

from syncd.api.inflight import GAIN, InFlightLimit
from syncd.logging import get_logger

__all__ = ["InFlightGate", "capped_notice"]


def capped_notice(tenant: str, ceiling: int, wanted: int, rate: float, rtt: float) -> str:
    """What to tell an operator whose `concurrency` holds the link back."""
    return (
        f"tenant {tenant}: concurrency {ceiling} caps requests in flight; the link needs about {wanted} "
        f"(rate {rate:.0f}/s x RTT {rtt * 1000:.0f} ms x {GAIN:g}): raise `concurrency`"
    )


class InFlightGate:
    """A capacity limiter whose size follows the controller (`limiter.total_tokens`: raising it
    wakes waiters at once; lowering it lets the requests in flight finish)."""

    def __init__(self, ceiling: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.control = InFlightLimit(ceiling)
        self.limiter = anyio.CapacityLimiter(self.control.limit)
        self._clock = clock
        self._warned = False

    @property
    def limit(self) -> int:
        return self.control.limit

    @property
    def rtt(self) -> float | None:
        return self.control.rtt

    def answered(self, tenant: str, status: int | None, ttfb: float | None, rate: float | None, *, shared: bool) -> int:
        """Learn from one attempt (status None: no complete answer) and resize the limiter;
        `rate` is the service's (the pacer's estimate), `shared` a fleet spends it too."""
        control = self.control
        control.set_rate(rate, shared=shared)
        limit = control.answered(self._clock(), status, ttfb)
        if limit != self.limiter.total_tokens:
            self.limiter.total_tokens = limit
        if not self._warned and control.capped():
            self._warned = True
            wanted, rtt, rate = control.wanted(), control.rtt, control.rate()
            if wanted is not None and rtt is not None and rate is not None:
                get_logger("syncd.api").warning(capped_notice(tenant, control.ceiling, wanted, rate, rtt), tenant=tenant)
        return limit
