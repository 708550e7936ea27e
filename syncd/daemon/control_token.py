"""The bearer token the control API wants: `daemon.token`, else one made for the daemon's life.

Why apart: the control API checks it and the service writes the made one to `daemon.json`
(mode 0600) for `syncd jobs` / `syncd trigger`; both take it from here. A made token is
registered as a secret at once, so no log line ever shows it.
"""

from __future__ import annotations

import secrets

from pydantic import SecretStr

from syncd.config import Settings
from syncd.logging import register_secret

__all__ = ["ControlToken"]


class ControlToken:
    """The daemon's control token; the made one is made once, on first use, and kept."""

    def __init__(self) -> None:
        self._made: SecretStr | None = None

    def current(self, settings: Settings) -> SecretStr:
        """`daemon.token` of `settings`, else the made one (masked in logs, written only to `daemon.json`)."""
        return settings.daemon.token or self.made()

    def made(self) -> SecretStr:
        if self._made is None:
            made = secrets.token_urlsafe(32)
            register_secret(made)
            self._made = SecretStr(made)
        return self._made
