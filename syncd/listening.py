"""Listening on a TCP address with an aiohttp app: what the daemon's control API and the
content source share (one way to bind, to say the port a free-port request got, and to fail
in one line when the address is taken)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from syncd.errors import SyncdError

__all__ = ["listening", "local_url"]

_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def local_url(host: str, port: int) -> str:
    """The URL a client on this machine dials for a server bound to host:port (a wildcard
    address is reached through loopback)."""
    host = _WILDCARDS.get(host, host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


@contextlib.asynccontextmanager
async def listening(app: web.Application, host: str, port: int, what: str, error: type[SyncdError] = SyncdError) -> AsyncIterator[tuple[str, int]]:
    """Serve `app` on host:port (0: a free port) for the block; yields the address bound.
    An address that cannot be bound is one `error` naming `what`."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise error(f"{what}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        sockets = site._server.sockets if site._server is not None else ()  # type: ignore[attr-defined]
        bound = sockets[0].getsockname()[:2] if sockets else (host, port)
        yield str(bound[0]), int(bound[1])
    finally:
        await runner.cleanup()
