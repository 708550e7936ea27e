"""The daemon's control API: where it listens, its token, the host names it answers to, and
how it stops and backs off.
"""

from __future__ import annotations

import ipaddress
import re

from pydantic import Field, SecretStr, field_validator, model_validator

from syncd.config.base import Host, Seconds, StrictModel, raise_at, trimmed_secret

__all__ = ["MIN_TOKEN_LENGTH", "DaemonConfig", "host_key"]

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


class DaemonConfig(StrictModel):
    """The daemon's control API; it may trigger jobs, so it always needs a token: a configured
    one (required off loopback), else one the daemon makes at start (in `state/daemon.json`)."""

    host: Host = "127.0.0.1"
    port: int = Field(default=8790, ge=0, le=65535)
    token: SecretStr | None = None
    allowed_hosts: list[str] = Field(default_factory=list)
    """Names (besides localhost, 127.0.0.1 and [::1]) that requests may give in `Host` and
    `Origin`: anything else is refused, so a web page (DNS rebinding) cannot use the API."""
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
