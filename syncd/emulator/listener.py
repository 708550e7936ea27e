"""The listening side of a served emulator: one TCP site, and the outages a test asks for.
Kept apart from `server` so the admin route that schedules an outage reaches the listener
without importing the server that builds the app."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

log = logging.getLogger("syncd.emulator")

RawHandler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
MAX_OUTAGE_SECONDS = 3600.0
_RELISTEN_ATTEMPTS = 50
_RELISTEN_PAUSE = 0.1


class Listener:
    """The listening side of `serve_app`: one TCP site on a fixed host and port, and outages.

    An outage is what a client of a dead server sees: new connections are refused (the
    listening socket is closed) and any request that arrives on a connection opened earlier
    is hung up on without an answer. Afterwards the same app (same store, same settings)
    listens again on the same host and port, so the same URL works. Why in the server and not
    in a middleware: the hang-up must cover every request, admin and unknown routes included.

    The outage runs in a task owned by the listener, so `serve_app` can cancel it on exit.
    """

    def __init__(self, runner: web.AppRunner, host: str, port: int) -> None:
        self.runner = runner
        self.host = host
        self.port = port
        """The port actually bound once started (port 0 picks a free one at start only)."""
        self.dropped = 0
        """Requests hung up on during outages."""
        self.outages = 0
        """Outages over: the listener went down and listens again (`GET /_emulator/stats`)."""
        self._site: web.TCPSite | None = None
        self._down = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._resume = asyncio.Event()

    @property
    def down(self) -> bool:
        """True while an outage lasts (nothing is answered)."""
        return self._down

    @property
    def busy(self) -> bool:
        """True while an outage is scheduled or under way (a second one is refused)."""
        return self._task is not None and not self._task.done()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Guard the runner's request handler, then listen (records the bound port)."""
        server = self.runner.server
        if server is None:
            raise RuntimeError("Listener.start: the runner is not set up")
        # Connections copy the handler when they open, so wrap it before the first one.
        server.request_handler = self._guard(server.request_handler)
        await self._listen()

    def _guard(self, handler: RawHandler) -> RawHandler:
        async def guarded(request: web.BaseRequest) -> web.StreamResponse:
            if self._down:
                return self._hang_up(request)
            return await handler(request)

        return guarded

    def _hang_up(self, request: web.BaseRequest) -> web.StreamResponse:
        """Close the connection without an answer (the response below is never written)."""
        self.dropped += 1
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=503)

    async def _listen(self, reuse_address: bool | None = None) -> None:
        site = web.TCPSite(self.runner, self.host, self.port, reuse_address=reuse_address)
        try:
            await site.start()
        except BaseException:
            await site.stop()  # start() registered it with the runner before binding
            raise
        sockets = site._server.sockets if site._server is not None else ()  # type: ignore[attr-defined]
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self._site = site

    async def outage(self, seconds: float) -> None:
        """Stop listening for `seconds`, then listen again; returns once back (or raises).

        Cancelling the caller does not cancel the outage (the server still comes back);
        only `serve_app`'s exit does."""
        await asyncio.shield(self._begin(seconds, 0.0))

    def schedule_outage(self, seconds: float, delay: float = 0.0) -> asyncio.Task[None]:
        """Start an outage after `delay` seconds without waiting for it (the admin route uses a
        small delay so that its own answer is sent before anything is closed)."""
        return self._begin(seconds, delay)

    def _begin(self, seconds: float, delay: float) -> asyncio.Task[None]:
        if not 0 < seconds <= MAX_OUTAGE_SECONDS:
            raise ValueError(f"outage seconds must be > 0 and <= {MAX_OUTAGE_SECONDS:g}, got {seconds!r}")
        if self._closed:
            raise RuntimeError("the emulator is no longer served")
        if self.busy:
            raise RuntimeError("an outage is already scheduled or under way")
        self._resume = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._run_outage(seconds, delay), name="emulator-outage")
        task.add_done_callback(_report_failure)
        self._task = task
        return task

    async def _run_outage(self, seconds: float, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        self._down = True
        site, self._site = self._site, None
        if site is not None:
            await site.stop()  # closes the listening socket; open connections stay, guarded
        log.info("emulator outage: %s down for %gs", self.url, seconds)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._resume.wait(), seconds)
        for attempt in range(1, _RELISTEN_ATTEMPTS + 1):
            try:
                # reuse_address: sockets of the old listener in TIME_WAIT must not block the bind
                await self._listen(reuse_address=True)
                break
            except OSError:
                if attempt == _RELISTEN_ATTEMPTS:
                    raise
                await asyncio.sleep(_RELISTEN_PAUSE)
        self._down = False
        self.outages += 1
        log.info("emulator outage over: %s listening again", self.url)

    def end_outage(self) -> None:
        """End the scheduled or current outage now rather than after its seconds (it is over
        once `down` is False again): a test takes a long outage and ends it when its checks are
        done, so no check races the clock. Nothing happens when no outage is scheduled."""
        self._resume.set()

    async def close(self) -> None:
        """Cancel a scheduled or running outage and wait for it; no outage can start after.

        Leaves the runner to `runner.cleanup()`, which works whether a site is up or not."""
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})


def _report_failure(task: asyncio.Task[None]) -> None:
    """Log an outage that could not listen again (retrieving the exception keeps asyncio quiet)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("emulator outage failed: %s", exc, exc_info=exc)


LISTENER: web.AppKey[Listener] = web.AppKey("listener", Listener)
