"""Connections to the PostgreSQL server named by `state_url`.

Why a module of its own: every connection must wait a bounded time (a replica must not hang
on a server that went away), name itself (`application_name` shows which replica holds which
lock in `pg_stat_activity`), and fail in one line that never shows the password.

Why keepalives on both ends: a session holds its tenant's advisory lock until the server ends
it, and without traffic neither end notices a peer that vanished (a host powered off, a cable
cut) before the kernel's default of two hours. TCP keepalives and `tcp_user_timeout` on our
side (libpq's `keepalives*`, `tcp_user_timeout`) end a connection to a server that went away;
the same settings for the server's side of the socket (`tcp_keepalives_*`, `tcp_user_timeout`,
set per session through `options`) make the server end the session of a host that went away,
and with it its locks, in about half a minute. A replica that is frozen but whose host still
answers TCP is ended by the replica that takes its run over (`syncd.daemon.leases`).
Values the URL gives itself are kept.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from syncd.errors import SyncdError

__all__ = ["CONNECT_TIMEOUT", "PgError", "connect", "display_url", "state_failure"]

CONNECT_TIMEOUT = 5
"""Seconds to reach the server and log in."""
STATEMENT_TIMEOUT_MS = 30_000
"""No statement of ours runs longer: a lock held by a stuck replica ends in an error, not a hang."""
KEEPALIVE_IDLE = 10
"""Seconds of silence before the first keepalive probe (either end)."""
KEEPALIVE_INTERVAL = 5
KEEPALIVE_COUNT = 3
"""Probes unanswered, `KEEPALIVE_INTERVAL` apart, before the connection is given up: a peer
that vanished is noticed within idle + interval * count = 25 s."""
TCP_USER_TIMEOUT_MS = 30_000
"""Data sent and not acknowledged for this long ends the connection (the keepalives' bound when
something is in flight)."""
_CLIENT_TCP = {
    "keepalives": 1,
    "keepalives_idle": KEEPALIVE_IDLE,
    "keepalives_interval": KEEPALIVE_INTERVAL,
    "keepalives_count": KEEPALIVE_COUNT,
    "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
}
_SERVER_TCP = {
    "tcp_keepalives_idle": KEEPALIVE_IDLE,
    "tcp_keepalives_interval": KEEPALIVE_INTERVAL,
    "tcp_keepalives_count": KEEPALIVE_COUNT,
    "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
}


class PgError(SyncdError):
    """The shared PostgreSQL state cannot be reached or used."""

    exit_code = 1


def display_url(url: str) -> str:
    """`url` without its password (`postgresql://user:***@host/db`), for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def _reason(exc: BaseException, url: str) -> str:
    """The server's or libpq's first line, with the password masked wherever it was echoed."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    password = urlsplit(url).password
    if password:
        text = text.replace(password, "***")
    return re.sub(r"\s+", " ", text)


def state_failure(exc: BaseException) -> PgError:
    """The one-line error for a PostgreSQL error met while using the state (the server went
    away, a statement timed out, a table is missing): every step commits on its own, so what
    was written before it stays whole."""
    return PgError(f"the PostgreSQL state failed: {_reason(exc, '')}: check the server, then run again")


def _options(given: dict[str, object]) -> str:
    """The server-side settings of every session: our keepalives first (a `-c` the URL's
    `options` gives for one comes later and wins), then the URL's, then our statement timeout."""
    keepalives = " ".join(f"-c {name}={value}" for name, value in _SERVER_TCP.items())
    return f"{keepalives} {given.get('options') or ''} -c statement_timeout={STATEMENT_TIMEOUT_MS}".replace("  ", " ")


def connect(url: str, *, application_name: str = "syncd", autocommit: bool = True) -> psycopg.Connection:
    """A connection to `url`; PgError in one line when the server is unreachable or refuses us."""
    try:
        given = conninfo_to_dict(url)
        tcp = {name: given.get(name) or value for name, value in _CLIENT_TCP.items()}  # the URL's own kept
        return psycopg.connect(
            url,
            autocommit=autocommit,
            connect_timeout=given.get("connect_timeout") or CONNECT_TIMEOUT,
            application_name=application_name[:63],
            options=_options(given),
            **tcp,
        )
    except psycopg.Error as exc:
        raise PgError(f"cannot use the PostgreSQL state at {display_url(url)}: {_reason(exc, url)}") from None
