"""How long a server that cannot be connected to is waited for: a one-shot command (`sync`,
`backup`, `mirror ...`, `restore`, `orgs`...) gives up after `ONE_SHOT_WINDOW`, the daemon
keeps its whole retry budget.

Why: a newcomer whose tenant's server is not running (a wrong port, the emulator not started)
waited about 47 s of backoff for `syncd sync` to say so. A one-shot command now says at the
first failed connect that it is retrying and until when (a clock time), and ends at that time
with one line naming the URL and what to check (`syncd.api.unreachable`). A daemon rides out a
server's restart instead: its runs keep the full backoff (and its job backoff after that).

The window travels in a context variable, as the fence does (`syncd.pg.fencing`): `syncd.cli` opens
it around every command and `serve` closes it again; a client made outside (the daemon, a test's
own client) keeps the full budget. No import of the API client: every command's start reads this.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["ONE_SHOT_WINDOW", "current_window", "window"]

ONE_SHOT_WINDOW = 10.0
"""Seconds a one-shot command keeps trying a server it cannot connect to."""

_WINDOW: ContextVar[float | None] = ContextVar("syncd_unreachable_window", default=None)


@contextmanager
def window(seconds: float | None) -> Iterator[None]:
    """Clients made inside give up on a server they cannot connect to after `seconds` (None:
    not before their retry budget is spent)."""
    token = _WINDOW.set(seconds)
    try:
        yield
    finally:
        _WINDOW.reset(token)


def current_window() -> float | None:
    """The window of the clients made now (`window`)."""
    return _WINDOW.get()
