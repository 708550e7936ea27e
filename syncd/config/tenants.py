"""Tenants: the API endpoints syncd reads and writes, the token for each, how an API call is
retried, and `TENANT[:ORG_ID]` references to them.

Tenant names are case-insensitive (environment variable names are), so `[tenants.SRC]`
and `SYNCD_TENANTS__src__TOKEN` speak of the same tenant; they are stored lower case.
Tokens are `SecretStr` and every token syncd learns is registered with
`syncd.logging.register_secret`, so it is masked wherever it would show up in a log line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import (
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    SecretStr,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from syncd.config.base import NAME_RE, Seconds, StrictModel, format_duration, trimmed_secret
from syncd.errors import ConfigError, ConfigProblem
from syncd.logging import register_secret
from syncd.safe_read import FileRefused, read_regular
from syncd.safe_text import check_secret

__all__ = ["TOKEN_KEYS", "TOKEN_MASK", "Ref", "RetryConfig", "TargetRef", "TenantConfig", "parse_ref"]

TOKEN_MASK = "********"
"""What is shown in place of a token."""
TOKEN_KEYS = ("token", "token_env", "token_file")
"""A tenant's token sources: exactly one is given."""
TOKEN_FILE_LIMIT = 64 * 1024
"""The most of a `token_file` read: a token is a line; a larger file is not one (`/dev/zero`)."""
_ENV_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


# --------------------------------------------------------------------------- target refs


@dataclass(frozen=True, slots=True)
class TargetRef:
    """`TENANT` or `TENANT:ORG_ID`: which tenant, and optionally which organization in it.

    `org` None means every organization the tenant's token can see.
    """

    tenant: str
    org: str | None = None

    def __str__(self) -> str:
        return self.tenant if self.org is None else f"{self.tenant}:{self.org}"


def parse_ref(ref: object) -> TargetRef:
    """Parse a reference, raising ValueError (the pydantic-friendly flavour)."""
    if isinstance(ref, TargetRef):
        return ref
    if not isinstance(ref, str):
        raise ValueError(f"must be TENANT or TENANT:ORG_ID, got {ref!r}")
    text = ref.strip()
    if not text:
        raise ValueError("must be TENANT or TENANT:ORG_ID, got an empty string")
    tenant, sep, org = text.partition(":")
    tenant, org = tenant.strip(), org.strip()
    if not tenant:
        raise ValueError(f"tenant name is empty in {ref!r} (expected TENANT or TENANT:ORG_ID)")
    if sep and not org:
        raise ValueError(f"organization id is empty in {ref!r} (expected TENANT:ORG_ID)")
    if ":" in org:
        raise ValueError(f"too many ':' in {ref!r} (expected TENANT or TENANT:ORG_ID)")
    tenant = tenant.lower()
    if not NAME_RE.match(tenant):
        raise ValueError(f"invalid tenant name {tenant!r} in {ref!r}")
    return TargetRef(tenant=tenant, org=org or None)


Ref = Annotated[
    TargetRef,
    PlainValidator(parse_ref),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string"}),
]
"""A `TargetRef` setting, written `TENANT` or `TENANT:ORG_ID`."""


# --------------------------------------------------------------------------- tenants


def _check_base_url(value: object) -> str:
    """An http(s) URL without credentials, query or fragment; trailing slash dropped."""
    if not isinstance(value, str):
        raise ValueError(f"must be an http(s) URL, got {value!r}")
    text = value.strip()
    try:
        parts = urlsplit(text)
        hostname = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValueError(f"must be an http(s) URL, got {value!r}") from None
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        # Never echo the URL: the credentials are in it.
        raise ValueError(
            "must not contain credentials (user:password@); give the token with "
            "token, token_env or token_file"
        )
    if parts.scheme.lower() not in ("http", "https") or not hostname:
        raise ValueError(f"must be an http(s) URL, got {value!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"must not have a query or fragment, got {value!r}")
    return text.rstrip("/")
class TenantConfig(StrictModel):
    """One API endpoint and the token to use there; exactly one token source."""

    base_url: Annotated[str, PlainValidator(_check_base_url)]
    """The http(s) URL of the API, without credentials, query or fragment; a trailing slash is dropped."""
    token: SecretStr | None = None
    """The API token itself (prefer `token_env` or `token_file` outside of tests). One of `token`,
    `token_env`, `token_file` is given, exactly; `SYNCD_TENANTS__NAME__TOKEN` replaces the file's."""
    token_env: str | None = None
    """The name of an environment variable holding the token, read when the tenant is first used."""
    token_file: Path | None = None
    """A file holding the token (whitespace around it ignored, at most 64 KiB), read when the
    tenant is first used."""
    concurrency: int = Field(default=64, ge=1, le=1024)
    """The most requests in flight to this tenant (its token): a ceiling. Below it the client
    sizes the limit from the measured round trip and the service's rate (`syncd.api.inflight`)."""

    _name: str = PrivateAttr(default="")
    _env: Mapping[str, str] | None = PrivateAttr(default=None)
    _token_origin: str | None = PrivateAttr(default=None)

    @field_validator("token")
    @classmethod
    def _token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        return trimmed_secret(value)

    @field_validator("token_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME_RE.match(value):
            raise ValueError(f"must be the name of an environment variable, got {value!r}")
        return value

    @field_validator("token_file")
    @classmethod
    def _expand_file(cls, value: Path | None) -> Path | None:
        if value is not None and not str(value).strip():
            raise ValueError("must not be empty")
        return value.expanduser() if value is not None else None

    @model_validator(mode="after")
    def _one_token_source(self) -> TenantConfig:
        given = [key for key in TOKEN_KEYS if getattr(self, key) is not None]
        if len(given) != 1:
            detail = "none given" if not given else "got " + ", ".join(given)
            raise ValueError(f"give exactly one of token, token_env, token_file ({detail})")
        return self

    @property
    def name(self) -> str:
        """The tenant's (lower-case) name in the configuration."""
        return self._name

    @property
    def token_source(self) -> str:
        """Where the token comes from, safe to show: `token`, `env:NAME` or `file:PATH`.

        A token given directly in the environment (`SYNCD_TENANTS__X__TOKEN`) shows as
        `env:` that variable, so nobody hunts for it in the file.
        """
        if self._token_origin is not None:
            return self._token_origin
        if self.token_env is not None:
            return f"env:{self.token_env}"
        if self.token_file is not None:
            return f"file:{self.token_file}"
        return "token"

    def resolved_token(self) -> SecretStr:
        """Return the token, reading `token_env` / `token_file` now (lazily, at use).

        Lazy so that a tenant no command uses needs no secret at hand; the value read is
        registered with the log redactor before anyone can log it.
        """
        where = f"tenants.{self._name}" if self._name else "tenant"
        if self.token is not None:
            return self.token
        if self.token_env is not None:
            env = self._env if self._env is not None else os.environ
            value = (env.get(self.token_env) or "").strip()
            if not value:
                raise _problem(f"{where}.token_env", f"environment variable {self.token_env} is not set or empty")
        else:
            assert self.token_file is not None
            try:
                value = read_regular(self.token_file, TOKEN_FILE_LIMIT, "token file", encoding="utf-8").strip()
            except FileNotFoundError:
                raise _problem(f"{where}.token_file", f"{self.token_file} does not exist") from None
            except FileRefused as exc:  # a FIFO, a device, a directory, too large
                raise _problem(f"{where}.token_file", str(exc)) from None
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise _problem(f"{where}.token_file", f"cannot read {self.token_file}: {reason}") from None
            if not value:
                raise _problem(f"{where}.token_file", f"{self.token_file} is empty")
        check_secret(value, f"{where}.token_env" if self.token_env is not None else f"{where}.token_file")
        register_secret(value)
        return SecretStr(value)


def _problem(field: str, message: str) -> ConfigError:
    """A token that cannot be read, as a problem of its field (`tenants.NAME.token_file`)."""
    return ConfigError(problems=[ConfigProblem(None, field, message)])


class RetryConfig(StrictModel):
    """The retry budget of one API call (tenacity, jittered backoff, honours Retry-After)."""

    max_attempts: int = Field(default=8, ge=1, le=100)
    """Attempts of one API call in all, the first one included."""
    initial_wait: Seconds = Field(default=0.5, gt=0)
    """The first wait before a retry; each further one is longer (jittered), up to `max_wait`."""
    max_wait: Seconds = Field(default=60.0, gt=0)
    """The longest single wait between two attempts."""

    @model_validator(mode="after")
    def _ordered(self) -> RetryConfig:
        if self.initial_wait > self.max_wait:
            raise ValueError(
                f"initial_wait ({format_duration(self.initial_wait)}) must not exceed "
                f"max_wait ({format_duration(self.max_wait)})"
            )
        return self
