"""The content source: where syncd serves the content it holds as a website for the target
service to import (`syncd.content`), and how a URL with a password is shown.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote, urlsplit

from pydantic import BeforeValidator, Field

from syncd.config.base import Host, Seconds, StrictModel
from syncd.logging import register_secret

__all__ = ["ContentSourceConfig", "shown_url"]


def _check_public_url(value: object) -> str | None:
    """An http(s) base URL the service can fetch from: scheme, host, a port in range, no
    query, fragment, whitespace or control character. Its password, if any (a proxy's), is
    registered with the log masker and never echoed: errors name the problem, not the URL."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("must be an http(s) URL")
    text = value.strip()
    if any(ch.isspace() or ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in text):
        raise ValueError("must be an http(s) URL without spaces or control characters")
    try:
        parts = urlsplit(text)
        hostname, password = parts.hostname, parts.password
        parts.port  # noqa: B018 - raises ValueError on a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"must be an http(s) URL ({exc})") from None
    if password:
        register_secret(password)
        register_secret(unquote(password))
    if parts.scheme.lower() not in ("http", "https") or not hostname:
        raise ValueError("must be an http(s) URL with a host, e.g. https://syncd-content.example.com")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise ValueError("must be an http(s) URL without query or fragment")
    return text.rstrip("/")


def shown_url(url: str) -> str:
    """`url` with its password (if any) replaced by the mask: how a URL with credentials is
    shown (config check, log lines, the journal)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if not password:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.split(":", 1)[0]
    return parts._replace(netloc=f"{name}:********@{host}").geturl()


class ContentSourceConfig(StrictModel):
    """Where syncd serves the content it holds (a backup, a private source space) as a
    website for the target service to import (`content/import` takes only a URL).

    Each space is served under a capability URL made for the run and only while its import
    lasts, read-only; so the listener needs no token. A service on the internet must reach
    `public_url` (a reverse proxy or a tunnel to `host:port`); the default, the address
    listened on, only works for a service that can reach this machine (the emulator).
    One content source per process and address serves every run that needs one, so a fixed
    `port` serves concurrent runs (its limits are those of the run that started it)."""

    host: Host = "127.0.0.1"
    """The address the content source listens on."""
    port: int = Field(default=0, ge=0, le=65535)
    """0 picks a free port (shared by the runs that overlap)."""
    public_url: Annotated[str | None, BeforeValidator(_check_public_url)] = None
    """The base URL the service fetches from, e.g. `https://syncd-content.example.com`."""
    concurrency: int = Field(default=8, ge=1, le=256)
    """Responses served at once, sending included."""
    max_connections: int = Field(default=128, ge=1, le=4096)
    """Open connections at most: beyond it a new connection takes the place of the oldest
    one that has not sent a request, or is closed at once when every one has a request in
    flight (keep it well under the process's open-file limit)."""
    header_timeout: Seconds = Field(default=5.0, gt=0, le=300)
    """A new connection must have sent its whole request header within this time."""
    idle_timeout: Seconds = Field(default=10.0, gt=0, le=3600)
    """A connection with nothing moving for this long (no next request on a kept-alive
    connection, a client that stops reading a response) is closed."""
