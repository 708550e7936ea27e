"""Running the emulator: inside an event loop (tests, benchmarks) or as a process (CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import warnings
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from syncd.emulator.app import create_app
from syncd.emulator.knobs import EMULATOR, Emulator
from syncd.emulator.listener import LISTENER, Listener
from syncd.emulator.store import Store


def _attach(app: web.Application, listener: Listener) -> None:
    """Store the listener in the app (an app served a second time is already frozen)."""
    if not app.frozen:
        app[LISTENER] = listener
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        app[LISTENER] = listener


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

    @property
    def listener(self) -> Listener:
        return self.app[LISTENER]


@contextlib.asynccontextmanager
async def serve_app(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve any aiohttp app on host:port (0 picks a free port); yields its base URL.

    The app gets a `Listener` under `LISTENER`, through which it can simulate an outage."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    listener = Listener(runner, host, port)
    _attach(app, listener)
    await runner.setup()
    try:
        await listener.start()
        yield listener.url
    finally:
        try:
            await listener.close()
        finally:
            await runner.cleanup()


@contextlib.asynccontextmanager
async def serve_emulator(store: Store, host: str = "127.0.0.1", port: int = 0, **options: object) -> AsyncIterator[RunningEmulator]:
    """Serve `store` on host:port (0 picks a free port) for the duration of the block."""
    app = create_app(store, **options)  # type: ignore[arg-type]
    async with serve_app(app, host, port) as url:
        yield RunningEmulator(url=url, app=app)


async def serve_forever(store: Store, host: str, port: int, on_ready: Callable[[RunningEmulator], None], **options: object) -> None:
    """Serve until SIGINT or SIGTERM; SIGUSR1 ends an outage early (`Listener.end_outage`: a
    test of a process that takes a long outage ends it once its checks are done)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with serve_emulator(store, host, port, **options) as running:
        with contextlib.suppress(NotImplementedError, AttributeError):  # no SIGUSR1 off POSIX
            loop.add_signal_handler(signal.SIGUSR1, running.listener.end_outage)
        on_ready(running)
        await stop.wait()
