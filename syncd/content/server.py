"""The content source: an HTTP server, alive for one run, that serves published spaces.

Each published space gets a capability URL, `{public_url}/{capability}/{space}/`, whose
capability is 32 random bytes made for this run and this space: it cannot be guessed, and it
is gone when the run ends (the server stops listening). Only GET and HEAD of paths that are
part of a published site are answered; everything else is 404, so nothing outside the sites
(`..`, encoded or not, other files on the disk) can be reached. Requests are served a bounded
number at a time; each is logged (`content.served`, debug) with its space, path and the bytes
sent, and each space's totals are kept (`served`) for a line per space at info.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from urllib.parse import quote, unquote

import anyio
from aiohttp import web

from syncd.config import ContentSourceConfig
from syncd.content.site import SpaceSite
from syncd.errors import SyncdError
from syncd.listening import listening, local_url
from syncd.logging import get_logger

__all__ = ["ContentSource", "ContentSourceError", "serve_content"]

log = get_logger("syncd.content")


class ContentSourceError(SyncdError):
    """The content source cannot listen (address in use, not allowed)."""

    exit_code = 2


class ContentSource:
    """Published sites by (capability, space), and the URL the service fetches them at."""

    def __init__(self, public_url: str, concurrency: int) -> None:
        self.public_url = public_url.rstrip("/")
        self.sites: dict[tuple[str, str], SpaceSite] = {}
        self.limiter = anyio.CapacityLimiter(max(1, concurrency))
        self.requests = 0
        self.bytes_sent = 0
        self.served: dict[str, list[int]] = {}
        """space -> [requests, bytes] served of it."""

    def publish(self, space: str, site: SpaceSite) -> str:
        """Serve `site` under a new capability URL (returned) until the run ends."""
        capability = secrets.token_urlsafe(32)
        self.sites[(capability, space)] = site
        return f"{self.public_url}/{capability}/{quote(space, safe='')}/"

    def withdraw(self, url: str) -> None:
        """Stop serving the site published at `url`."""
        parts = url.removeprefix(self.public_url).strip("/").split("/")
        if len(parts) >= 2:
            self.sites.pop((parts[0], unquote(parts[1])), None)

    def _count(self, space: str, size: int) -> None:
        self.bytes_sent += size
        counts = self.served.setdefault(space, [0, 0])
        counts[0] += 1
        counts[1] += size

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, headers={"Allow": "GET, HEAD"})
        segments = request.raw_path.split("?", 1)[0].split("/")
        # ["", capability, space, *tail]: the tail is matched whole against the site's own
        # paths, so no segment is ever interpreted (no `..`, no file system lookup).
        if len(segments) < 4:
            return _not_found()
        capability, space = unquote(segments[1]), unquote(segments[2])
        site = self.sites.get((capability, space))
        tail = "/".join(unquote(segment) for segment in segments[3:])
        served = site.get(tail) if site is not None and ".." not in segments[3:] else None
        if served is None:
            return _not_found()
        async with self.limiter:
            self.requests += 1
            if served.file is not None:
                try:
                    size = served.file.stat().st_size
                except OSError:
                    return _not_found()
                self._count(space, size)
                log.debug("content.served", space=space, path=tail, bytes=size)
                return web.FileResponse(served.file, headers={"Content-Type": served.content_type, "Cache-Control": "no-store"})
            self._count(space, len(served.body))
            log.debug("content.served", space=space, path=tail or "/", bytes=len(served.body))
            return web.Response(body=served.body, headers={"Content-Type": served.content_type, "Cache-Control": "no-store"})


def _not_found() -> web.Response:
    return web.Response(status=404, text="not found\n")


@contextlib.asynccontextmanager
async def serve_content(config: ContentSourceConfig) -> AsyncIterator[ContentSource]:
    """Listen for the length of the block; the source's sites go with it."""
    source = ContentSource(config.public_url or "", config.concurrency)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", source.handle)
    try:
        async with listening(app, config.host, config.port, "content source", ContentSourceError) as (_, port):
            source.public_url = (config.public_url or local_url(config.host, port)).rstrip("/")
            log.info("content.listening", address=f"{config.host}:{port}", public_url=source.public_url)
            yield source
    finally:
        if source.requests:
            log.info("content.stopped", requests=source.requests, bytes=source.bytes_sent, spaces=len(source.served))
        source.sites.clear()
