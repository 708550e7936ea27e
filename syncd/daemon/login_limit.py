"""Wrong tokens slow their sender: the web page's login and the control API's bearer check.

Why: the token is the only thing between the network and the daemon's jobs; unslowed, a client
tried ~1,400 guesses a second. Each client address may get `FREE_FAILURES` tokens wrong; after
that every further wrong token makes it wait, twice as long each time (1 s, 2 s, ... up to
`MAX_WAIT`), and while it waits every request of it that needs the token is answered 429 with
`Retry-After`, unchecked (so a wait tells nothing about the token). The right token is never
locked out for longer than the current wait, and once it is given the client's count is cleared.
A client quiet for `FORGET_AFTER` is forgotten too. Memory is bounded: at most `MAX_CLIENTS`
addresses are remembered, the one whose last failure is oldest dropped first.

The address is the peer's (`request.remote`): a proxy's `X-Forwarded-For` is not trusted. An
IPv6 client is counted by its /64 (one host often holds a whole /64).

Pure logic with an injectable clock; the handlers do the I/O.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

__all__ = ["FREE_FAILURES", "LOGIN_LIMIT", "MAX_WAIT", "LoginLimit", "client_key", "refused_while_waiting", "retry_after"]

FREE_FAILURES = 5
FIRST_WAIT = 1.0
MAX_WAIT = 60.0
FORGET_AFTER = 900.0
MAX_CLIENTS = 10_000


def client_key(address: str | None) -> str:
    """Whom a request's peer address counts as: the IPv4 address, an IPv6 address's /64
    (an IPv4-mapped one as its IPv4 address), or the text as given when it is no IP address."""
    if not address:
        return "(unknown)"
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address[:100]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped.compressed
        return ipaddress.IPv6Network((ip, 64), strict=False).compressed
    return ip.compressed


@dataclass
class _Client:
    failures: int
    last: float
    until: float
    """When the client may send a token again (its current wait ends)."""


class LoginLimit:
    """Failed tokens per client; `wait` before checking a token, `failed` / `succeeded` after."""

    def __init__(
        self,
        *,
        free_failures: int = FREE_FAILURES,
        first_wait: float = FIRST_WAIT,
        max_wait: float = MAX_WAIT,
        forget_after: float = FORGET_AFTER,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free_failures = free_failures
        self.first_wait = first_wait
        self.max_wait = max_wait
        self.forget_after = forget_after
        self.max_clients = max_clients
        self._clock = clock
        self._clients: OrderedDict[str, _Client] = OrderedDict()

    def __len__(self) -> int:
        return len(self._clients)

    def _live(self, key: str, now: float) -> _Client | None:
        client = self._clients.get(key)
        if client is not None and now - client.last >= self.forget_after and now >= client.until:
            del self._clients[key]
            return None
        return client

    def wait(self, address: str | None) -> float:
        """Seconds `address` must still wait before a token of it is checked (0: check it now)."""
        now = self._clock()
        client = self._live(client_key(address), now)
        return max(0.0, client.until - now) if client is not None else 0.0

    def failed(self, address: str | None) -> float:
        """Count a wrong token of `address`; the wait it now has (0 while under the free failures)."""
        key, now = client_key(address), self._clock()
        client = self._live(key, now)
        if client is None:
            client = self._clients[key] = _Client(failures=0, last=now, until=now)
        client.failures += 1
        client.last = now
        beyond = client.failures - self.free_failures
        wait = 0.0 if beyond < 0 else min(self.max_wait, self.first_wait * 2 ** min(beyond, 62))
        client.until = now + wait
        self._clients.move_to_end(key)
        while len(self._clients) > self.max_clients:
            self._clients.popitem(last=False)
        return wait

    def succeeded(self, address: str | None) -> None:
        """The right token: `address` starts afresh."""
        self._clients.pop(client_key(address), None)


def retry_after(seconds: float) -> str:
    """A wait as `Retry-After` says it: whole seconds, rounded up (never 0 for a real wait)."""
    return str(max(1, math.ceil(seconds)))


def refused_while_waiting(limit: LoginLimit, address: str | None) -> tuple[str, str] | None:
    """Why a token of `address` is not looked at now and its `Retry-After`, or None: what the
    login form and the bearer check both answer (429) before they look at a token, so that a
    wait tells nothing about it."""
    wait = limit.wait(address)
    if wait <= 0:
        return None
    after = retry_after(wait)
    return f"too many wrong tokens from this address: try again in {after} s", after


LOGIN_LIMIT: web.AppKey[LoginLimit] = web.AppKey("login_limit", LoginLimit)
"""The one limit of a control API and its web page (set by `syncd.daemon.control`)."""
