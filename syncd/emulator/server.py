"""Running the emulator: inside an event loop (tests, benchmarks) or as a process (CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from syncd.emulator.app import EMULATOR, Emulator, create_app
from syncd.emulator.store import Store


@dataclass
class RunningEmulator:
    url: str
    app: web.Application
    generated: Any = None

    @property
    def emulator(self) -> Emulator:
        return self.app[EMULATOR]

    @property
    def store(self) -> Store:
        return self.emulator.store


@contextlib.asynccontextmanager
async def serve_app(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve any aiohttp app on host:port (0 picks a free port); yields its base URL."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()  # type: ignore[union-attr]
    try:
        yield f"http://{host}:{bound[1]}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def serve_emulator(store: Store, host: str = "127.0.0.1", port: int = 0, **options: object) -> AsyncIterator[RunningEmulator]:
    """Serve `store` on host:port (0 picks a free port) for the duration of the block."""
    app = create_app(store, **options)  # type: ignore[arg-type]
    async with serve_app(app, host, port) as url:
        yield RunningEmulator(url=url, app=app)


async def serve_forever(store: Store, host: str, port: int, on_ready: "callable[[RunningEmulator], None]", **options: object) -> None:  # type: ignore[valid-type]
    """Serve until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with serve_emulator(store, host, port, **options) as running:
        on_ready(running)
        await stop.wait()
