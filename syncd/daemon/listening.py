"""Listening on a TCP address with an aiohttp app: how the daemon's control API binds, says
the port a free-port request got, and fails in one line when the address is taken. The URL a
client on this machine dials for it is `syncd.config.base.local_url`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from syncd.errors import SyncdError

__all__ = ["listening"]


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
