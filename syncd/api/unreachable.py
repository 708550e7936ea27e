"""One client's watch over a server it cannot connect to, in a one-shot command's window
(`syncd.one_shot`): the line said at the first failed connect, when to stop retrying.
"""

from __future__ import annotations

import time

from syncd.api.errors import ApiError, TransportError
from syncd.logging import redact_text
from syncd.safe_text import one_line

__all__ = ["Unreachable", "cannot_connect", "notice"]


def cannot_connect(error: BaseException | None) -> bool:
    """The request never reached a server: refused, no such host, the connect timed out."""
    return isinstance(error, TransportError) and not error.sent


class Unreachable:
    """One client's watch over its server while it cannot be connected to: the window opens
    at the first failed connect and closes at the next answer (any status: something listens)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.until: float | None = None
        """When (on the monotonic clock) the client stops retrying connects; None while the server answers."""

    def opened(self) -> float | None:
        """Open the window if it is not (the wall-clock time it ends, to be said); None when
        it already was or there is none."""
        if self.seconds is None or self.until is not None:
            return None
        self.until = time.monotonic() + self.seconds
        return time.time() + self.seconds

    def answered(self) -> None:
        """The server answered: the window closes (the next failed connect opens a new one)."""
        self.until = None

    def left(self) -> float | None:
        """Seconds the window still has (0 when it is over); None when it is not open."""
        return None if self.until is None else max(0.0, self.until - time.monotonic())

    def over(self, error: BaseException | None) -> bool:
        """A failed connect after the window: time to give up."""
        left = self.left()
        return cannot_connect(error) and left is not None and left <= 0


def notice(error: ApiError, base_url: str, until: float) -> str:
    """`cannot connect to http://127.0.0.1:8787 (GET /v1/orgs: connection refused by
    127.0.0.1:8787); retrying for 10 s, until 10:11:31`: one line, the time on the local clock
    (that of the log lines)."""
    where = " ".join(part for part in (error.method, error.path) if part)
    why = f"{where}: {error.message}" if where else error.message
    stamp = time.strftime("%H:%M:%S", time.localtime(until))
    seconds = max(0, round(until - time.time()))
    return f"cannot connect to {base_url} ({redact_text(one_line(why))[:300]}); retrying for {seconds} s, until {stamp}"
