"""The daemon's control API: where it listens, its token, the host names it answers to, and
how it stops and backs off.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from syncd.config.base import Host, Seconds, StrictModel, raise_at, trimmed_secret

__all__ = ["MIN_TOKEN_LENGTH", "DaemonConfig", "host_key", "public_address"]

MIN_TOKEN_LENGTH = 16
"""A `daemon.token` shorter than this is refused: it guards every job, and a short one is guessed."""


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_HOST_NAME_RE = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")


def host_key(text: str) -> str | None:
    """A host name or IP address as an HTTP `Host` names it, normalized for comparison
    (lower case, no trailing dot, IPv6 in brackets); None when it is neither (a port, a
    scheme, a wildcard, a space: not a host)."""
    text = text.strip().lower()
    bracketed = text.startswith("[") and text.endswith("]")
    try:
        address = ipaddress.ip_address(text[1:-1] if bracketed else text)
    except ValueError:
        if bracketed:
            return None
        name = text[:-1] if text.endswith(".") else text
        return name if _HOST_NAME_RE.fullmatch(name) else None
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


_DEFAULT_PORTS = {"http": 80, "https": 443}
_PREFIX_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")
"""A segment of `public_url`'s path: unreserved characters only, so the prefix goes as it is
into links, `Location` and the cookie's `Path` (no `;`, quote, space or escape to get wrong)."""


def _public_url(text: str) -> str:
    """`https://HOST[:PORT][/PREFIX]` normalized: scheme and host lower case, the scheme's
    default port and a trailing slash dropped, so that `origin + prefix` is what a browser
    sends as `Origin` and the path every URL of the page starts with."""
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise ValueError("must be an http(s) URL without spaces or control characters")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"must be an http(s) URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc:
        raise ValueError("must be an http(s) URL with a host, e.g. https://syncd.example.com or https://example.com/syncd")
    if "@" in parts.netloc:
        raise ValueError("must not hold a user or password: the proxy's address as a browser opens it")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise ValueError("must be an http(s) URL without query or fragment")
    host_text = parts.netloc.rsplit(":", 1)[0] if port is not None or parts.netloc.endswith(":") else parts.netloc
    host = host_key(host_text)
    if host is None:
        raise ValueError(f"must name a host (a DNS name in ASCII or an IP address), got {host_text!r}")
    segments = parts.path.strip("/").split("/") if parts.path.strip("/") else []
    for segment in segments:
        if segment in (".", "..") or not _PREFIX_SEGMENT.fullmatch(segment):
            raise ValueError(f"its path must be a plain prefix like /syncd (letters, digits, -._~), got {parts.path!r}")
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return f"{scheme}://{netloc}" + "".join(f"/{segment}" for segment in segments)


def public_address(public_url: str | None) -> tuple[str | None, str]:
    """(origin, prefix) of a normalized `daemon.public_url`: `https://host[:port]` and `/PREFIX`
    (empty without one); (None, "") when unset: the page is the request's own origin."""
    if public_url is None:
        return None, ""
    parts = urlsplit(public_url)
    return f"{parts.scheme}://{parts.netloc}", parts.path


class DaemonConfig(StrictModel):
    """The daemon's control API; it may trigger jobs, so it always needs a token: a configured
    one (required off loopback), else one the daemon makes at start (in `state/daemon.json`)."""

    host: Host = "127.0.0.1"
    """The address the control API listens on; any but a loopback address needs `token`."""
    port: int = Field(default=8790, ge=0, le=65535)
    """The port the control API listens on."""
    token: SecretStr | None = None
    """The bearer token the control API and the web page require, at least 16 characters
    (`openssl rand -hex 24`). Unset: the daemon makes one at each start and writes it to
    `daemon.json` in state_dir (mode 0600), where `syncd jobs` and `syncd trigger` find it."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Names (besides localhost, 127.0.0.1 and [::1]) that requests may give in `Host` and
    `Origin`: anything else is refused, so a web page (DNS rebinding) cannot use the API."""
    public_url: str | None = None
    """The address users reach the daemon by, `https://HOST[:PORT][/PREFIX]` (a TLS proxy in
    front of the plain-HTTP listener, which strips `/PREFIX` before forwarding): the page takes
    its origin from it (the Origin and Sec-Fetch checks), accepts its host, marks its cookies
    `Secure` when it is https, and sends every URL under `/PREFIX`. Unset: the request's own."""
    ui: bool = True
    """The web page under `/ui/` (`syncd.daemon.ui`): the same token, entered once into its login form."""
    shutdown_deadline: Seconds = Field(default=30.0, gt=0)
    """How long in-flight runs may take to finish after SIGTERM before they are cancelled."""
    failure_backoff: Seconds = Field(default=30.0, gt=0)
    """Wait after a job's first failure, doubling with each further one (capped at 1 h)."""

    @field_validator("token")
    @classmethod
    def _token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        value = trimmed_secret(value)  # trimmed like tenant tokens
        if value is not None and len(value.get_secret_value()) < MIN_TOKEN_LENGTH:
            raise ValueError(
                f"must be at least {MIN_TOKEN_LENGTH} characters (e.g. the output of `openssl rand -hex 24`): "
                "it opens the control API and the web page"
            )
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, values: list[str]) -> list[str]:
        names = []
        for value in values:
            name = host_key(value)
            if name is None:
                raise ValueError(f"must be host names or IP addresses, without scheme or port, got {value!r}")
            names.append(name)
        return names

    @field_validator("public_url", mode="before")
    @classmethod
    def _public_url_normalized(cls, value: object) -> object:
        return _public_url(value.strip()) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _token_off_loopback(self) -> DaemonConfig:
        if self.token is None and not _is_loopback(self.host):
            raise_at(
                ("host",),
                f"{self.host!r} is not a loopback address: set daemon.token "
                "(or SYNCD_DAEMON__TOKEN) so the control API is not open to the network",
                self.host,
            )
        return self
