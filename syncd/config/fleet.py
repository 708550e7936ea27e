"""The fleet: replicas of `syncd serve` sharing one PostgreSQL state (`state_url`,
docs/guides/fleet.md), and how they split the work.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, SecretStr

from syncd.config.base import Seconds, StrictModel
from syncd.logging import register_secret

__all__ = ["POSTGRES_SCHEMES", "FleetConfig", "check_state_url", "names_postgres"]

POSTGRES_SCHEMES = ("postgresql", "postgres")


class FleetConfig(StrictModel):
    """How replicas of `syncd serve` that share `state_url` split the work (the fleet guide)."""

    replica: str | None = Field(default=None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:-]+$")
    """This replica's name in the fleet's tables and views; default `HOST-PID`."""
    lease: Seconds = Field(default=30.0, ge=1.0, le=3600.0)
    """A run's lease: renewed every third of it; a replica silent this long loses its run."""
    poll: Seconds = Field(default=1.0, gt=0, le=60.0)
    """How often an idle replica looks for due runs (a trigger sent to it is seen at once)."""
    max_runs: int | None = Field(default=None, ge=1, le=1000)
    """Runs this replica takes at once; beyond it due runs wait for a free replica. Unset: no limit."""


def names_postgres(text: str) -> bool:
    """`text` is written as a PostgreSQL URL (by its scheme; `postgresql:/host/db` too, a URL
    that became a path and lost a slash). Here, not beside psycopg: commands that only need to
    tell a URL from a file must not import it."""
    return urlsplit(text.strip()).scheme.lower() in POSTGRES_SCHEMES


def check_state_url(value: object) -> SecretStr | None:
    """A postgresql:// URL; its password (if any) is masked in every log line from now on."""
    if value is None:
        return None
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if not isinstance(text, str) or not names_postgres(text) or not urlsplit(text.strip()).hostname:
        raise ValueError("must be a postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE URL")
    password = urlsplit(text.strip()).password
    if password:
        register_secret(password)
    return SecretStr(text.strip())
