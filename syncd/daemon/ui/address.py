"""Where the page is as the browser sees it: its origin and the path every URL it sends starts with.

Why not the request's own: behind a TLS proxy (`daemon.public_url`) the daemon hears plain HTTP
on its own address, with the proxy's path prefix stripped, while the browser is on
`https://HOST[:PORT]/PREFIX/`. The Origin check must compare with the browser's origin, cookies
must be `Secure` and scoped to the browser's path, and links must carry the prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from syncd.config.daemon import public_address

__all__ = ["PageAddress", "address_of"]


@dataclass(frozen=True)
class PageAddress:
    origin: str | None
    """`scheme://host[:port]` of `daemon.public_url`; None: the request's own."""
    prefix: str
    """The proxy's path prefix (`/syncd`), empty without one."""

    @property
    def root(self) -> str:
        """The page's root as the browser asks for it: `/PREFIX/ui/`."""
        return f"{self.prefix}/ui/"

    @property
    def secure(self) -> bool:
        return self.origin is not None and self.origin.startswith("https:")

    def url(self, path: str) -> str:
        """A path of the daemon's (`/ui/...`, as it is served) as the browser must ask for it."""
        return self.prefix + path

    def expected_origin(self, request: web.Request) -> str:
        """The `Origin` a form of the page sends."""
        return self.origin or f"{request.scheme}://{request.host}"

    def secure_for(self, request: web.Request) -> bool:
        """Whether the page's cookies are `Secure`: https as the browser sees it."""
        return self.secure or request.scheme == "https"


def address_of(daemon: Any) -> PageAddress:
    """The page's address from the daemon's current settings (a SIGHUP may change it)."""
    origin, prefix = public_address(daemon.settings.daemon.public_url)
    return PageAddress(origin, prefix)
