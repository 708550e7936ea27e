"""The content source: an HTTP server that serves published spaces to the target service.

Each published space gets a capability URL, `{public_url}/{capability}/{space}/`, whose
capability is 32 random bytes made for that space's import: it cannot be guessed, it is
withdrawn as soon as the import has ended (`ContentSource.withdraw`), and at the latest when
the run ends. While it lives it is registered with the log masker, so it shows up in no log
line and in no error the service sends back (the API client scrubs those); `shown` is the
form stored in the journal. Only GET and HEAD of paths that are part of a published site are
answered; everything else is 404, so nothing outside the sites (`..`, encoded or not, other
files on the disk) can be reached.

One server per process and address (`serve_content` counts its users: the first starts it,
the last stops it), so a fixed `port` serves every run that overlaps; each run has its own
`ContentSource` (its sites, its figures, its `public_url`). The server is meant to face the
internet through a tunnel, so it is bounded:

- at most `max_connections` open connections: beyond that a new connection takes the place
  of the oldest one without a request in flight (one that never sent a request first), or
  is closed at once when every connection has one;
- a connection must send its whole request header within `header_timeout`, and a kept-alive
  connection its next one within `idle_timeout`; a response whose client reads nothing for
  `idle_timeout` is cut (the connection is aborted, not left to drain);
- `concurrency` responses at once, sending included: a file is streamed in chunks inside the
  limit, read from a descriptor opened without following links and checked to be a regular
  file; pages are built in a worker thread, once per published site (`SpaceSite.document`).

Each request is logged (`content.served`, debug) with its space, path and the bytes sent, and
each run keeps its space's totals (`served`) for a line per space at info.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote, unquote

import anyio
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from syncd.config import ContentSourceConfig, shown_url
from syncd.config.base import local_url
from syncd.content.site import Served, SpaceSite
from syncd.errors import SyncdError
from syncd.logging import forget_secret, get_logger, redact_text, register_secret
from syncd.read.blobs import BlobRefused, open_regular

__all__ = ["ContentServer", "ContentSource", "ContentSourceError", "serve_content"]

log = get_logger("syncd.content")

CHUNK = 256 * 1024
"""Bytes of a file read and sent at a time."""
_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


class ContentSourceError(SyncdError):
    """The content source cannot listen (address in use, not allowed)."""

    exit_code = 2


# ----- connections ---------------------------------------------------------------------------


@dataclass
class _Connection:
    transport: asyncio.Transport
    since: float
    """When it started waiting for a request header."""
    spoke: bool = False
    """It sent a whole request header once: a client, not (yet) a slow one."""
    partial: bool = False
    """It sent bytes but no whole header yet (a real client sends its header at once)."""
    tail: bytes = b""
    """The last bytes received before its first whole header (to find the blank line)."""
    busy: int = 0
    """Requests in flight on it (one, unless the client pipelines)."""
    timer: asyncio.TimerHandle | None = None


class _GuardedHandler(RequestHandler):
    """aiohttp's connection protocol, telling the guard when a first whole header is in, as
    soon as its bytes arrive (the request itself is handled a few loop turns later)."""

    def __init__(self, guard: _GuardedServer, **kwargs: Any) -> None:
        super().__init__(guard, **kwargs)
        self.guard = guard

    def data_received(self, data: bytes) -> None:
        self.guard.heard(self, data)
        super().data_received(data)


class _GuardedServer(web.Server):
    """aiohttp's low-level server that counts its connections and closes those over the cap
    and those that send no request header in time (see the module docstring)."""

    def __init__(self, handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], config: ContentSourceConfig) -> None:
        # aiohttp's own keep-alive timer closes a connection idle that long, too.
        self.handler_options: dict[str, Any] = {"keepalive_timeout": config.idle_timeout, "access_log": None}
        super().__init__(handler, **self.handler_options)
        self.cap = config.max_connections
        self.header_timeout, self.idle_timeout = config.header_timeout, config.idle_timeout
        self.open: dict[RequestHandler, _Connection] = {}
        self.max_open = 0
        self.rejected = 0
        """Connections closed at once because of the cap (a new one, or one it replaced)."""
        self.timed_out = 0
        """Connections closed because no request header came in time, or a client stopped reading."""

    def __call__(self) -> RequestHandler:
        return _GuardedHandler(self, loop=self._loop, **self.handler_options)

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        if len(self.open) >= self.cap and not self._make_room():
            self.rejected += 1
            # At the next turn of the loop: aiohttp starts the connection's task after this
            # returns (on Python 3.11 not at once), and that task must find the connection
            # still open (aiohttp 3.14 asserts it), then sees it lost.
            self._loop.call_soon(transport.abort)
            return
        connection = _Connection(transport, self._loop.time())
        self.open[handler] = connection
        self._arm(handler, connection, self.header_timeout)
        self.max_open = max(self.max_open, len(self.open))

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        connection = self.open.pop(handler, None)
        if connection is not None and connection.timer is not None:
            connection.timer.cancel()

    def _make_room(self) -> bool:
        """Close the connection a new one replaces at the cap: of those without a request in
        flight, one that never sent a whole header first (one that sent part of one before one
        that sent nothing yet: it may be brand new), the longest waiting first."""
        waiting = [(c.spoke, not c.partial, c.since, n, h) for n, (h, c) in enumerate(self.open.items()) if not c.busy]
        if not waiting:
            return False
        self.rejected += 1
        self.drop(min(waiting)[-1])
        return True

    def drop(self, handler: RequestHandler) -> None:
        """Close a connection now, whatever it still has to send (abort: nothing lingers)."""
        connection = self.open.pop(handler, None)
        if connection is not None:
            if connection.timer is not None:
                connection.timer.cancel()
            connection.transport.abort()

    def drop_all(self) -> None:
        for handler in list(self.open):
            self.drop(handler)

    def heard(self, handler: RequestHandler, data: bytes) -> None:
        """Bytes came in: a first whole header (its blank line) makes the connection a client."""
        connection = self.open.get(handler)
        if connection is None or connection.spoke:
            return
        seen = connection.tail + data
        if b"\r\n\r\n" in seen or b"\n\n" in seen:
            connection.spoke, connection.partial, connection.tail = True, False, b""
        else:
            connection.partial, connection.tail = True, seen[-3:]

    def begin(self, handler: RequestHandler) -> None:
        """A request's header is in: no deadline while it is answered."""
        connection = self.open.get(handler)
        if connection is not None:
            connection.busy += 1
            connection.spoke = True
            if connection.timer is not None:
                connection.timer.cancel()
                connection.timer = None

    def end(self, handler: RequestHandler) -> None:
        """A request was answered: the next header must come within the idle timeout."""
        connection = self.open.get(handler)
        if connection is not None:
            connection.busy -= 1
            if not connection.busy:
                connection.since = self._loop.time()
                self._arm(handler, connection, self.idle_timeout)

    def _arm(self, handler: RequestHandler, connection: _Connection, seconds: float) -> None:
        connection.timer = self._loop.call_later(seconds, self._expire, handler)

    def _expire(self, handler: RequestHandler) -> None:
        connection = self.open.get(handler)
        if connection is not None and not connection.busy:
            self.timed_out += 1
            self.drop(handler)


# ----- the server and each run's view of it ---------------------------------------------------


class ContentServer:
    """The listener of one address, shared by the runs of this process (`serve_content`)."""

    def __init__(self, config: ContentSourceConfig) -> None:
        self.config = config
        self.limiter = anyio.CapacityLimiter(max(1, config.concurrency))
        self.sites: dict[tuple[str, str], tuple[ContentSource, SpaceSite]] = {}
        self.requests = 0
        self.bytes_sent = 0
        self.guard: _GuardedServer | None = None
        self.port = config.port
        self._runner: web.ServerRunner | None = None

    @property
    def local_url(self) -> str:
        return local_url(self.config.host, self.port)

    async def start(self) -> None:
        """Listen; ContentSourceError (one line) when the address cannot be bound."""
        host, port = self.config.host, self.config.port
        self.guard = _GuardedServer(self.handle, self.config)
        runner = web.ServerRunner(self.guard, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            hint = " (another process serves content there: give each process its own port, or 0 for a free one)" if port else ""
            raise ContentSourceError(f"content source: cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None
        sockets = site._server.sockets if site._server is not None else ()  # type: ignore[attr-defined]
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening and close every connection (no run needs them any more)."""
        if self.guard is not None:
            self.guard.drop_all()
        if self._runner is not None:
            await self._runner.cleanup()
        guard = self.guard
        if self.requests or (guard is not None and (guard.rejected or guard.timed_out)):
            log.info(
                "content.stopped", requests=self.requests, bytes=self.bytes_sent, max_open=guard.max_open if guard else 0,
                rejected=guard.rejected if guard else 0, timed_out=guard.timed_out if guard else 0,
            )

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        assert self.guard is not None
        handler = request.protocol
        self.guard.begin(handler)
        try:
            return await self._answer(request)
        finally:
            self.guard.end(handler)

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, headers={"Allow": "GET, HEAD"})
        segments = request.raw_path.split("?", 1)[0].split("/")
        # ["", capability, space, *tail]: the tail is matched whole against the site's own
        # paths, so no segment is ever interpreted (no `..`, no file system lookup). A `..`
        # is refused as sent and as decoded (`%2e%2e`), whatever paths a site holds.
        tail_segments = [unquote(segment) for segment in segments[3:]]
        if len(segments) < 4 or ".." in segments[3:] or any(".." in segment.split("/") for segment in tail_segments):
            return _not_found()
        found = self.sites.get((unquote(segments[1]), unquote(segments[2])))
        tail = "/".join(tail_segments)
        served = found[1].get(tail) if found is not None else None
        if found is None or served is None:
            return _not_found()
        owner, site = found
        space = unquote(segments[2])
        owner.connections.setdefault(space, set()).add(id(request.protocol))
        async with self.limiter:
            self.requests += 1
            if served.file is not None:
                return await self._send_file(request, owner, space, tail, served)
            assert served.document is not None
            body = await anyio.to_thread.run_sync(site.document, served.document)
            owner.count(space, len(body))
            self.bytes_sent += len(body)
            log.debug("content.served", space=space, path=tail or "/", bytes=len(body))
            return await self._send(request, served.content_type, len(body), _once(body))

    async def _send_file(self, request: web.BaseRequest, owner: ContentSource, space: str, tail: str, served: Served) -> web.StreamResponse:
        assert served.file is not None
        try:
            file, size = await anyio.to_thread.run_sync(_open_regular, served.file)
        except OSError as exc:
            log.warning("content.file_not_served", space=space, path=tail, reason=exc.strerror or str(exc))
            return _not_found()
        with file:
            owner.count(space, size)
            self.bytes_sent += size
            log.debug("content.served", space=space, path=tail, bytes=size)

            async def chunk() -> bytes:
                return await anyio.to_thread.run_sync(file.read, CHUNK)

            return await self._send(request, served.content_type, size, chunk)

    async def _send(self, request: web.BaseRequest, content_type: str, size: int, chunk: Callable[[], Awaitable[bytes]]) -> web.StreamResponse:
        """Send `size` bytes got from `chunk()`; a client that reads nothing for the idle
        timeout, or goes away, gets its connection aborted (nothing is left to drain)."""
        response = web.StreamResponse(headers={"Content-Type": _safe_type(content_type), **_HEADERS})
        response.content_length = size
        idle = self.config.idle_timeout
        try:
            with anyio.fail_after(idle):
                await response.prepare(request)
            left = size if request.method != "HEAD" else 0
            while left > 0:
                data = await chunk()
                if not data:
                    raise ConnectionAbortedError("the file got shorter while it was sent")
                data = data[:left]
                with anyio.fail_after(idle):
                    await response.write(data)
                left -= len(data)
            with anyio.fail_after(idle):
                await response.write_eof()
        except (TimeoutError, ConnectionError) as exc:
            if isinstance(exc, TimeoutError) and self.guard is not None:
                self.guard.timed_out += 1
            if request.transport is not None:
                request.transport.abort()
        return response


class ContentSource:
    """One run's sites on the process's content server, and the URL the service fetches
    them at (`public_url`: the configured one, else the address listened on)."""

    def __init__(self, server: ContentServer, public_url: str) -> None:
        self.server = server
        self.public_url = public_url.rstrip("/")
        self.sites: dict[tuple[str, str], SpaceSite] = {}
        self.served: dict[str, list[int]] = {}
        """space -> [requests, bytes] served of it."""
        self.connections: dict[str, set[int]] = {}
        """space -> the connections its site was read over since it was last published: how
        many one import opens is the service's importer's choice (`syncd.copy.import_bound`)."""

    @property
    def requests(self) -> int:
        return sum(counts[0] for counts in self.served.values())

    @property
    def bytes_sent(self) -> int:
        return sum(counts[1] for counts in self.served.values())

    @property
    def refused(self) -> int:
        """Connections the server has closed at once for want of room (every run's)."""
        return self.server.guard.rejected if self.server.guard is not None else 0

    def opened(self, space: str) -> int:
        """Connections the site of `space` was read over since it was published."""
        return len(self.connections.get(space, ()))

    def publish(self, space: str, site: SpaceSite) -> str:
        """Serve `site` under a new capability URL (returned) until it is withdrawn."""
        self.connections.pop(space, None)
        capability = secrets.token_urlsafe(32)
        register_secret(capability)
        self.sites[(capability, space)] = site
        self.server.sites[(capability, space)] = (self, site)
        return f"{self.public_url}/{capability}/{quote(space, safe='')}/"

    def withdraw(self, url: str) -> None:
        """Stop serving the site published at `url`: its capability is dead (404)."""
        parts = url.removeprefix(self.public_url).strip("/").split("/")
        if len(parts) >= 2:
            self._withdraw((parts[0], unquote(parts[1])))

    def withdraw_all(self) -> None:
        for key in list(self.sites):
            self._withdraw(key)

    def _withdraw(self, key: tuple[str, str]) -> None:
        if self.sites.pop(key, None) is not None:
            self.server.sites.pop(key, None)
            self.connections.pop(key[1], None)
            forget_secret(key[0])

    def shown(self, url: str) -> str:
        """`url` as it may be stored or shown: no live capability, no password."""
        return shown_url(redact_text(url))

    def count(self, space: str, size: int) -> None:
        counts = self.served.setdefault(space, [0, 0])
        counts[0] += 1
        counts[1] += size


# ----- one server per address, shared ---------------------------------------------------------


@dataclass
class _Shared:
    server: ContentServer
    users: int = 0
    ready: anyio.Event = field(default_factory=anyio.Event)
    failed: ContentSourceError | None = None
    closing: anyio.Event | None = None


_SHARED: dict[tuple[Any, str, int], _Shared] = {}


async def _acquire(config: ContentSourceConfig) -> tuple[tuple[Any, str, int], _Shared]:
    """The running server of `config`'s address in this event loop (started if none)."""
    key = (asyncio.get_running_loop(), config.host, config.port)
    while True:
        shared = _SHARED.get(key)
        if shared is None:
            shared = _SHARED[key] = _Shared(ContentServer(config), users=1)
            try:
                await shared.server.start()
            except BaseException as exc:
                del _SHARED[key]
                shared.failed = exc if isinstance(exc, ContentSourceError) else ContentSourceError(f"content source: {exc}")
                raise
            finally:
                shared.ready.set()
            return key, shared
        if shared.closing is not None:
            await shared.closing.wait()
            continue
        shared.users += 1
        await shared.ready.wait()
        if shared.failed is not None:
            shared.users -= 1
            raise ContentSourceError(str(shared.failed))
        return key, shared


async def _release(key: tuple[Any, str, int], shared: _Shared) -> None:
    shared.users -= 1
    if shared.users:
        return
    shared.closing = anyio.Event()
    try:
        with anyio.CancelScope(shield=True):
            await shared.server.stop()
    finally:
        _SHARED.pop(key, None)
        shared.closing.set()


@contextlib.asynccontextmanager
async def serve_content(config: ContentSourceConfig) -> AsyncIterator[ContentSource]:
    """This run's content source for the length of the block: on the process's server of
    `config`'s address (started by the first run that needs it, stopped by the last); every
    site the run published is withdrawn when the block ends."""
    key, shared = await _acquire(config)
    server = shared.server
    source = ContentSource(server, config.public_url or server.local_url)
    try:
        log.info(
            "content.listening", address=f"{config.host}:{server.port}", public_url=source.shown(source.public_url),
            shared=shared.users > 1,
        )
        yield source
    finally:
        source.withdraw_all()
        await _release(key, shared)


# ----- helpers ----------------------------------------------------------------------------------


def _not_found() -> web.Response:
    return web.Response(status=404, text="not found\n", headers=_HEADERS)


def _once(body: bytes) -> Callable[[], Awaitable[bytes]]:
    chunks = iter([body[i : i + CHUNK] for i in range(0, len(body), CHUNK)] or [b""])

    async def chunk() -> bytes:
        return next(chunks, b"")

    return chunk


def _open_regular(path: Path) -> tuple[BinaryIO, int]:
    """`path` opened as a blob is (no link followed, for the file or its folder; a regular file;
    no blocking on a FIFO), and its size; OSError otherwise."""
    try:
        file = open_regular(path)
    except BlobRefused as exc:
        raise OSError(str(exc)) from None
    return file, os.fstat(file.fileno()).st_size


def _safe_type(content_type: str) -> str:
    """A content type from the snapshot, or octet-stream when it could split a header."""
    if not content_type or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in content_type) or len(content_type) > 200:
        return "application/octet-stream"
    return content_type
