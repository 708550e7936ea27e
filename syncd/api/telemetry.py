"""Who hears about every API call a client makes: the daemon's metrics, nobody otherwise.

Clients are created deep inside crawls, backups and applies; threading a metrics object
through all of them would couple every module to the daemon. Instead the daemon sets an
observer for the duration of a job run (`observing`), and each `TenantClient` picks up the
observer current when it is created. The context variable is inherited by the tasks a run
starts, and two runs in one process do not see each other's observer.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Protocol

__all__ = ["ApiObserver", "current_observer", "observing"]


class ApiObserver(Protocol):
    """Callbacks a client makes; they run on the event loop and must not block."""

    def on_response(self, tenant: str, method: str, status: int | str, remaining: int | None) -> None:
        """One attempt ended: an HTTP status, or `"error"` when no complete answer came.
        `remaining` is the answer's `X-RateLimit-Remaining`, when it had one."""

    def on_retry(self, tenant: str) -> None:
        """An attempt failed transiently and is about to be repeated."""

    def on_link(self, tenant: str, inflight_limit: int, rtt_seconds: float | None) -> None:
        """After each attempt: the token's limit of requests in flight and its smoothed round
        trip (`syncd.api.inflight`)."""


_OBSERVER: contextvars.ContextVar[ApiObserver | None] = contextvars.ContextVar("syncd_api_observer", default=None)


def current_observer() -> ApiObserver | None:
    return _OBSERVER.get()


@contextlib.contextmanager
def observing(observer: ApiObserver | None) -> Iterator[None]:
    """Clients created inside this block report to `observer`."""
    token = _OBSERVER.set(observer)
    try:
        yield
    finally:
        _OBSERVER.reset(token)
