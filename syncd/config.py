"""Settings of syncd: a TOML file plus `SYNCD_*` environment variables, validated at start-up.

Why up front: a daemon that finds a typo in its third job at 3 a.m. is worse than a
command that refuses to start. `load_settings` reads the file, overlays the environment
(per field, environment wins), validates everything with pydantic and turns the first
problem into ONE line that names the source and the field path, e.g.::

    config/syncd.toml: tenants.src.base_url: must be an http(s) URL, got 'ftp://x'

Tenant names are case-insensitive (environment variable names are), so `[tenants.SRC]`
and `SYNCD_TENANTS__src__TOKEN` speak of the same tenant; they are stored lower case.
Tokens are `SecretStr` and every token syncd learns is registered with
`syncd.logging.register_secret`, so it is masked wherever it would show up in a log line.
Relative paths (`state_dir`, `token_file`) are relative to the working directory.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ByteSize,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    SecretStr,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.exceptions import SettingsError
from pydantic_settings.sources.utils import parse_env_vars

from syncd.cron import validate_cron, validate_timezone
from syncd.errors import ConfigError
from syncd.logging import register_secret
from syncd.safe_text import check_secret
from syncd.scope import Pattern, Scope, ScopeError

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "ENV_PREFIX",
    "TOKEN_MASK",
    "DaemonConfig",
    "JobConfig",
    "RetryConfig",
    "Schedule",
    "Settings",
    "TargetRef",
    "TenantConfig",
    "format_duration",
    "load_settings",
    "names_postgres",
    "parse_duration",
    "parse_target_ref",
    "shown_url",
    "validate_cron",
]

DEFAULT_CONFIG_PATH = Path("config/syncd.toml")
ENV_PREFIX = "SYNCD_"
ENV_NESTED_DELIMITER = "__"
TOKEN_MASK = "********"
POSTGRES_SCHEMES = ("postgresql", "postgres")

# `\A...\Z`, not `^...$`: `$` also matches before a final newline, so "sync\n" passed as a name.
_NAME_RE = re.compile(r"\A[a-z0-9][a-z0-9_-]*\Z")
_TOKEN_KEYS = ("token", "token_env", "token_file")
_ENV_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


# --------------------------------------------------------------------------- durations

_DURATION_RE = re.compile(r"\A(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?\Z")
_DURATION_HINT = "use e.g. 0.5s, 30s, 15m, 2h, 1d or 1h30m"


def parse_duration(value: object) -> float:
    """Turn `30s`, `15m`, `2h`, `1d`, `1h30m` (or a plain number of seconds) into seconds.

    One format for every time setting, so `every = "15m"` and `request_timeout = "30s"`
    read the same way; bare numbers stay accepted because TOML users write them.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r} ({_DURATION_HINT})")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        match = _DURATION_RE.match(text)
        if text and match and any(match.groups()):
            days, hours, minutes = (int(g) if g else 0 for g in match.groups()[:3])
            secs = float(match.group(4) or 0)
            seconds = float(((days * 24 + hours) * 60 + minutes) * 60) + secs
        else:
            try:
                seconds = float(text)
            except ValueError:
                raise ValueError(f"invalid duration {value!r} ({_DURATION_HINT})") from None
    else:
        raise ValueError(f"invalid duration {value!r} ({_DURATION_HINT})")
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError(f"invalid duration {value!r} ({_DURATION_HINT})")
    if seconds < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """Render seconds the way they are written in the file (`1h30m`), for humans."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    rest = int(seconds)
    if rest == 0:
        return "0s"
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


Seconds = Annotated[float, BeforeValidator(parse_duration)]


def _host(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value.strip()


Host = Annotated[str, AfterValidator(_host)]
"""An address to listen on: not empty, spaces trimmed."""
"""A duration setting, held as seconds (float); accepts `15m`-style strings and numbers."""


# --------------------------------------------------------------------------- cron

# Cron expressions and time zones are read by `syncd.cron` (the cronsim library): `validate_cron`
# and `validate_timezone` are re-exported here for the models below and for callers.


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


def _parse_ref(ref: object) -> TargetRef:
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
    if not _NAME_RE.match(tenant):
        raise ValueError(f"invalid tenant name {tenant!r} in {ref!r}")
    return TargetRef(tenant=tenant, org=org or None)


def parse_target_ref(ref: str, settings: Settings | None = None) -> TargetRef:
    """Parse `TENANT` or `TENANT:ORG_ID`; with `settings`, the tenant must be configured.

    For command-line arguments: problems become a one-line ConfigError.
    """
    try:
        parsed = _parse_ref(ref)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if settings is not None:
        settings.tenant(parsed.tenant)
    return parsed


Ref = Annotated[
    TargetRef,
    PlainValidator(_parse_ref),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string"}),
]


# --------------------------------------------------------------------------- models


class _Model(BaseModel):
    """Strict base: unknown keys are typos, and typos are errors."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


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


class TenantConfig(_Model):
    """One API endpoint and the token to use there; exactly one token source."""

    base_url: Annotated[str, PlainValidator(_check_base_url)]
    token: SecretStr | None = None
    token_env: str | None = None
    token_file: Path | None = None
    concurrency: int = Field(default=8, ge=1, le=1024)

    _name: str = PrivateAttr(default="")
    _env: Mapping[str, str] | None = PrivateAttr(default=None)
    _token_origin: str | None = PrivateAttr(default=None)

    @field_validator("token")
    @classmethod
    def _token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("must not be empty")
        if value is not None:
            check_secret(value.get_secret_value().strip())
        return SecretStr(value.get_secret_value().strip()) if value is not None else None

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
        given = [key for key in _TOKEN_KEYS if getattr(self, key) is not None]
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
                raise ConfigError(
                    f"{where}.token_env: environment variable {self.token_env} is not set or empty"
                )
        else:
            assert self.token_file is not None
            try:
                value = self.token_file.read_text(encoding="utf-8").strip()
            except FileNotFoundError:
                raise ConfigError(
                    f"{where}.token_file: {self.token_file} does not exist"
                ) from None
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise ConfigError(
                    f"{where}.token_file: cannot read {self.token_file}: {reason}"
                ) from None
            if not value:
                raise ConfigError(f"{where}.token_file: {self.token_file} is empty")
        check_secret(value, f"{where}.token_env" if self.token_env is not None else f"{where}.token_file")
        register_secret(value)
        return SecretStr(value)


class RetryConfig(_Model):
    """The retry budget of one API call (tenacity, jittered backoff, honours Retry-After)."""

    max_attempts: int = Field(default=8, ge=1, le=100)
    initial_wait: Seconds = Field(default=0.5, gt=0)
    max_wait: Seconds = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> RetryConfig:
        if self.initial_wait > self.max_wait:
            raise ValueError(
                f"initial_wait ({format_duration(self.initial_wait)}) must not exceed "
                f"max_wait ({format_duration(self.max_wait)})"
            )
        return self


class Schedule(_Model):
    """When a daemon job runs: `every` (interval) or `cron` (5 fields or a macro such as
    `@daily`, read in `timezone`; see `syncd.cron`), plus random jitter."""

    every: Seconds | None = Field(default=None, gt=0)
    cron: str | None = None
    jitter: Seconds = 0.0
    timezone: str = "UTC"
    """The IANA time zone `cron` is read in; set from the job's `timezone`."""

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return validate_cron(value) if value is not None else None

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        return validate_timezone(value)

    @model_validator(mode="after")
    def _exactly_one(self) -> Schedule:
        if (self.every is None) == (self.cron is None):
            got = "both" if self.every is not None else "neither"
            raise ValueError(f"give exactly one of every, cron (got {got})")
        return self

    def describe(self) -> str:
        """`every 15m` / `cron 30 2 * * MON-FRI in Europe/Berlin`, plus jitter: for status
        lines and tables (a cron schedule always names its time zone, UTC included)."""
        text = f"every {format_duration(self.every)}" if self.every is not None else f"cron {self.cron} in {self.timezone}"
        return f"{text} (jitter {format_duration(self.jitter)})" if self.jitter else text


JobKind = Literal["sync", "backup", "mirror"]
DEFAULT_FULL_EVERY = 86400.0


class JobConfig(_Model):
    """A daemon job: sync (refresh the mirror), backup, or mirror source onto target.

    Options that do not apply to the kind (a target on a sync job, retention on a mirror
    job) are errors rather than silently ignored: they mean the user expects something.
    """

    name: str
    kind: JobKind
    source: Ref
    target: Ref | None = None
    schedule: Schedule | None = None
    timezone: str = "UTC"
    """The IANA time zone of the job's cron schedule and of its retention's hours, days, weeks."""
    retention: int | None = Field(default=None, ge=1)
    """Backup jobs: the old name of `keep_last` (an alias)."""
    keep_last: int | None = Field(default=None, ge=1)
    keep_hourly: int | None = Field(default=None, ge=1)
    keep_daily: int | None = Field(default=None, ge=1)
    keep_weekly: int | None = Field(default=None, ge=1)
    keep_monthly: int | None = Field(default=None, ge=1)
    keep_yearly: int | None = Field(default=None, ge=1)
    """Backup jobs: restic's retention policy (`syncd.retention`); none given keeps every backup."""
    mode: Literal["copy", "mirror"] | None = None
    max_delete: int | None = Field(default=None, ge=0)
    with_files: bool | None = None
    """Backup jobs: also fetch file binaries into `FILE.blobs/`."""
    full_every: Seconds | None = Field(default=None, ge=0)
    """Sync and mirror jobs: read everything again (not only what change tokens say changed)
    when the last full read is older than this; default 1d, 0 never. Catches edits that move
    no change token (a comment edited in place, a custom field value)."""
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    """The job's scope, as `--include` / `--exclude` (`syncd.scope`): only these collections,
    spaces and sites are synced, backed up or mirrored; none given: everything."""

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                Pattern.parse(value, "pattern")
            except ScopeError as exc:
                raise ValueError(str(exc)) from None
        return values

    @property
    def scope(self) -> Scope:
        """The job's scope (its patterns were checked when the configuration was read)."""
        return Scope.parse(self.include, self.exclude)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError(
                f"must match ^[a-z0-9][a-z0-9_-]*$ (lower case, digits, '_' and '-'), got {value!r}"
            )
        return value

    @model_validator(mode="after")
    def _kind_options(self) -> JobConfig:
        if self.kind == "mirror":
            if self.target is None:
                _raise_at(("target",), "required for a mirror job (TENANT or TENANT:ORG_ID)", None)
            if self.target == self.source:
                _raise_at(("target",), f"must differ from source, got {str(self.target)!r}", str(self.target))
        elif self.target is not None:
            _raise_at(("target",), f"only allowed on mirror jobs, not on a {self.kind} job", str(self.target))
        for key in ("retention", "with_files"):
            if getattr(self, key) is not None and self.kind != "backup":
                _raise_at((key,), f"only allowed on backup jobs, not on a {self.kind} job", getattr(self, key))
        for key in ("mode", "max_delete"):
            if getattr(self, key) is not None and self.kind != "mirror":
                _raise_at((key,), f"only allowed on mirror jobs, not on a {self.kind} job", getattr(self, key))
        if self.full_every is not None and self.kind == "backup":
            _raise_at(("full_every",), "not allowed on backup jobs (a backup always reads everything)", self.full_every)
        if self.full_every is None and self.kind != "backup":
            self.full_every = DEFAULT_FULL_EVERY
        if self.kind == "mirror":
            if self.mode is None:
                self.mode = "copy"
            if self.max_delete is None:
                self.max_delete = 100
        return self

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        return validate_timezone(value)

    @model_validator(mode="after")
    def _zone_and_retention(self) -> JobConfig:
        """One time zone for the schedule and the retention; `retention` read as `keep_last`."""
        if self.schedule is not None:
            if "timezone" in self.schedule.model_fields_set:
                if "timezone" in self.model_fields_set and self.schedule.timezone != self.timezone:
                    _raise_at(("schedule", "timezone"), f"differs from the job's timezone {self.timezone!r}: give it once, on the job", self.schedule.timezone)
                self.timezone = self.schedule.timezone
            elif self.schedule.timezone != self.timezone:
                self.schedule = self.schedule.model_copy(update={"timezone": self.timezone})
        for key in KEEP_RULES:
            if getattr(self, key) is not None and self.kind != "backup":
                _raise_at((key,), f"only allowed on backup jobs, not on a {self.kind} job", getattr(self, key))
        if self.retention is not None:
            if self.keep_last is not None:
                _raise_at(("retention",), "retention is the old name of keep_last: give keep_last only", self.retention)
            self.keep_last, self.retention = self.retention, None
        return self

    def retention_policy(self) -> dict[str, int]:
        """The keep_* rules given (`keep_daily` -> N), empty when every backup is kept."""
        return {key: getattr(self, key) for key in KEEP_RULES if getattr(self, key) is not None}


KEEP_RULES = ("keep_last", "keep_hourly", "keep_daily", "keep_weekly", "keep_monthly", "keep_yearly")
"""A backup job's retention rules, as restic names them (`syncd.retention`)."""


def _raise_at(loc: tuple[str | int, ...], message: str, value: object) -> None:
    """Raise a validation error located at `loc` below the model being validated.

    Cross-field checks live on the parent model but belong to one field; pointing at
    `jobs[1].target` instead of `jobs[1]` is the whole point of the error message.
    """
    raise ValidationError.from_exception_data(
        "syncd",
        [
            InitErrorDetails(
                type=PydanticCustomError("syncd", "{message}", {"message": message}),
                loc=loc,
                input=value,
            )
        ],
    )


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


class DaemonConfig(_Model):
    """The daemon's control API; it may trigger jobs, so it always needs a token: a configured
    one (required off loopback), else one the daemon makes at start (in `state/daemon.json`)."""

    host: Host = "127.0.0.1"
    port: int = Field(default=8790, ge=0, le=65535)
    token: SecretStr | None = None
    allowed_hosts: list[str] = Field(default_factory=list)
    """Names (besides localhost, 127.0.0.1 and [::1]) that requests may give in `Host` and
    `Origin`: anything else is refused, so a web page (DNS rebinding) cannot use the API."""
    shutdown_deadline: Seconds = Field(default=30.0, gt=0)
    """How long in-flight runs may take to finish after SIGTERM before they are cancelled."""
    failure_backoff: Seconds = Field(default=30.0, gt=0)
    """Wait after a job's first failure, doubling with each further one (capped at 1 h)."""

    @field_validator("token")
    @classmethod
    def _token_not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        # Trimmed like tenant tokens: a space or the newline of a file or variable is not part of it.
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("must not be empty")
        if value is not None:
            check_secret(value.get_secret_value().strip())
        return SecretStr(value.get_secret_value().strip()) if value is not None else None

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
            _raise_at(
                ("host",),
                f"{self.host!r} is not a loopback address: set daemon.token "
                "(or SYNCD_DAEMON__TOKEN) so the control API is not open to the network",
                self.host,
            )
        return self


class FleetConfig(_Model):
    """How replicas of `syncd serve` that share `state_url` split the work (README "Fleet")."""

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


def _check_state_url(value: object) -> SecretStr | None:
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


class ContentSourceConfig(_Model):
    """Where syncd serves the content it holds (a backup, a private source space) as a
    website for the target service to import (`content/import` takes only a URL).

    Each space is served under a capability URL made for the run and only while its import
    lasts, read-only; so the listener needs no token. A service on the internet must reach
    `public_url` (a reverse proxy or a tunnel to `host:port`); the default, the address
    listened on, only works for a service that can reach this machine (the emulator).
    One content source per process and address serves every run that needs one, so a fixed
    `port` serves concurrent runs (its limits are those of the run that started it)."""

    host: Host = "127.0.0.1"
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


LogLevel = Literal["debug", "info", "warning", "error", "critical"]


def _log_level(value: object) -> object:
    if isinstance(value, str):
        value = value.strip().lower()
        return "warning" if value == "warn" else value
    return value


class _MappingEnvSource(EnvSettingsSource):
    """The ordinary env source, reading a given mapping instead of `os.environ` (tests)."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._mapping = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._mapping, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


class Settings(BaseSettings):
    """Everything syncd is configured with; build it with `load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        case_sensitive=False,
        env_ignore_empty=True,
        extra="forbid",
        validate_default=True,
    )

    tenants: dict[str, TenantConfig] = Field(default_factory=dict)
    state_dir: Path = Path("state")
    state_url: Annotated[SecretStr | None, BeforeValidator(_check_state_url)] = None
    """A PostgreSQL that replicas of `syncd serve` share (README "Fleet"); unset: one daemon, SQLite in state_dir."""
    fleet: FleetConfig = Field(default_factory=FleetConfig)
    concurrency: int = Field(default=16, ge=1, le=4096)
    request_timeout: Seconds = Field(default=30.0, gt=0)
    """Deadline of one API request attempt: connect, headers and the whole body."""
    max_answer_bytes: ByteSize = Field(default=64 * 1024 * 1024, ge=64 * 1024)
    """The longest API answer taken ("64MiB", "500MB" or bytes): longer ones are refused."""
    answer_budget: ByteSize = Field(default=128 * 1024 * 1024, ge=64 * 1024)
    """API answer bytes the process holds at once, all requests together (README "The client");
    raised to fit one answer of `max_answer_bytes` if lower (`syncd.api.answers.budget_limit`)."""
    max_pages_per_listing: int = Field(default=10_000, ge=1, le=1_000_000)
    """Pages a listing may have before it is stopped as endless."""
    retry: RetryConfig = Field(default_factory=RetryConfig)
    log_format: Literal["console", "json"] = "console"
    log_level: Annotated[LogLevel, BeforeValidator(_log_level)] = "info"
    jobs: list[JobConfig] = Field(default_factory=list)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    content_source: ContentSourceConfig = Field(default_factory=ContentSourceConfig)

    _config_file: Path | None = PrivateAttr(default=None)
    _env: Mapping[str, str] | None = PrivateAttr(default=None)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """`Settings()` alone reads the environment only; files go through `load_settings`."""
        return (init_settings, env_settings)

    @field_validator("tenants", mode="before")
    @classmethod
    def _lower_tenant_names(cls, value: object) -> object:
        if not isinstance(value, Mapping):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key).lower()
            if name in out:
                raise ValueError(f"tenant names are case-insensitive: {key!r} is given twice")
            out[name] = item
        return out

    @field_validator("tenants")
    @classmethod
    def _tenant_names(cls, value: dict[str, TenantConfig]) -> dict[str, TenantConfig]:
        for name, tenant in value.items():
            if not _NAME_RE.match(name):
                _raise_at(
                    (name,),
                    f"invalid tenant name {name!r}: use lower case letters, digits, '_' and '-'",
                    name,
                )
            tenant._name = name
        return value

    @field_validator("state_dir")
    @classmethod
    def _state_dir(cls, value: Path) -> Path:
        if not str(value).strip():
            raise ValueError("must not be empty")
        return value.expanduser()

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        seen: dict[str, int] = {}
        for index, job in enumerate(self.jobs):
            if job.name in seen:
                _raise_at(
                    ("jobs", index, "name"),
                    f"duplicate job name {job.name!r} (also jobs[{seen[job.name]}])",
                    job.name,
                )
            seen[job.name] = index
            for field in ("source", "target"):
                ref: TargetRef | None = getattr(job, field)
                if ref is not None and ref.tenant not in self.tenants:
                    _raise_at(
                        ("jobs", index, field),
                        f"unknown tenant {ref.tenant!r} ({self._configured()})",
                        str(ref),
                    )
        return self

    def _configured(self) -> str:
        return "configured: " + ", ".join(sorted(self.tenants)) if self.tenants else "no tenants configured"

    @property
    def config_file(self) -> Path | None:
        """The TOML file these settings were read from, if any."""
        return self._config_file

    def tenant(self, name: str) -> TenantConfig:
        """The tenant called `name` (case-insensitive), or a ConfigError listing the known ones."""
        try:
            return self.tenants[name.strip().lower()]
        except KeyError:
            raise ConfigError(f"unknown tenant {name!r} ({self._configured()})") from None

    def job(self, name: str) -> JobConfig:
        """The job called `name`, or a ConfigError listing the known ones."""
        for job in self.jobs:
            if job.name == name:
                return job
        known = ", ".join(job.name for job in self.jobs) or "none"
        raise ConfigError(f"unknown job {name!r} (configured: {known})")


# --------------------------------------------------------------------------- loading


def _read_toml(path: Path) -> dict[str, Any]:
    """Read the file, turning every failure into one line (with the line number for syntax)."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 ({exc.reason})") from None


def _lower_tenants(data: dict[str, Any], origin: str) -> dict[str, Any]:
    """Lower-case tenant names so file and environment agree on who is who."""
    tenants = data.get("tenants")
    if not isinstance(tenants, dict):
        return data
    lowered: dict[str, Any] = {}
    for key, value in tenants.items():
        name = str(key).lower()
        if name in lowered:
            raise ConfigError(
                f"{origin}: tenants.{name}: tenant names are case-insensitive and "
                f"{key!r} is given twice"
            )
        lowered[name] = value
    return {**data, "tenants": lowered}


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge `over` onto `base`: dicts merge per key, anything else is replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _overlay(file_data: dict[str, Any], env_data: dict[str, Any]) -> dict[str, Any]:
    """Environment over file, per field; a token source from the environment replaces the file's.

    Without that one exception, `SYNCD_TENANTS__SRC__TOKEN` over a file with `token_env`
    would be "two token sources" instead of the override the user meant.
    """
    file_tenants = file_data.get("tenants")
    env_tenants = env_data.get("tenants")
    if isinstance(file_tenants, dict) and isinstance(env_tenants, Mapping):
        trimmed = dict(file_tenants)
        for name, env_tenant in env_tenants.items():
            file_tenant = trimmed.get(name)
            if (
                isinstance(env_tenant, Mapping)
                and isinstance(file_tenant, dict)
                and any(key in env_tenant for key in _TOKEN_KEYS)
            ):
                trimmed[name] = {k: v for k, v in file_tenant.items() if k not in _TOKEN_KEYS}
        file_data = {**file_data, "tenants": trimmed}
    return _merge(file_data, env_data)


def _format_loc(loc: tuple[str | int, ...]) -> str:
    """('jobs', 1, 'schedule') -> 'jobs[1].schedule'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _lookup(data: Any, loc: tuple[str | int, ...]) -> tuple[bool, list[str | int]]:
    """Whether `loc` exists in `data`, and the dict-key prefix walked before any list."""
    keys: list[str | int] = []
    in_list = False
    for part in loc:
        if isinstance(data, Mapping) and isinstance(part, str) and part in data:
            data = data[part]
            if not in_list:
                keys.append(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
            in_list = True
        else:
            return False, keys
    return True, keys


def _is_secret_loc(loc: tuple[str | int, ...]) -> bool:
    return any(isinstance(part, str) and part == "token" for part in loc)


def _error_line(
    exc: ValidationError,
    file_data: dict[str, Any],
    env_data: dict[str, Any],
    config_path: Path | None,
) -> str:
    """The first validation error as `SOURCE: field.path: problem[, got VALUE]`."""
    errors = exc.errors(include_url=False)
    error = errors[0]
    loc = tuple(error["loc"])
    kind = error["type"]
    if kind == "value_error":
        message = str(error.get("ctx", {}).get("error", error["msg"]))
    elif kind == "syncd":
        message = error["msg"]
    elif kind == "missing":
        message = "is required"
    elif kind == "extra_forbidden":
        message = "unknown field"
    else:
        message = error["msg"]
        if message.startswith("Input should be "):
            message = "must be " + message[len("Input should be ") :]
        message = message[:1].lower() + message[1:]
        value = error.get("input")
        if (
            not _is_secret_loc(loc)
            and isinstance(value, str | int | float | bool)
            and kind not in ("model_type", "dict_type")
        ):
            message += f", got {value!r}"
    in_env, env_keys = _lookup(env_data, loc)
    in_file, _ = _lookup(file_data, loc)
    leaf = not isinstance(error.get("input"), Mapping)
    if in_env and (leaf or not in_file) and env_keys:
        origin = ENV_PREFIX + ENV_NESTED_DELIMITER.join(str(k).upper() for k in env_keys)
    elif config_path is not None:
        origin = str(config_path)
    else:
        origin = "configuration"
    where = _format_loc(loc)
    line = f"{origin}: {where}: {message}" if where else f"{origin}: {message}"
    if len(errors) > 1:
        more = len(errors) - 1
        line += f" (and {more} more problem{'s' if more > 1 else ''})"
    return " ".join(line.split())


def load_settings(
    config_path: Path | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Read the TOML file and the `SYNCD_*` environment into validated Settings.

    `config_path` None means `config/syncd.toml` if it exists, else no file; a path given
    explicitly must exist. `env` defaults to `os.environ` (tests pass a dict). Any problem
    is a ConfigError with one line naming the source and the field.
    """
    if config_path is None and DEFAULT_CONFIG_PATH.is_file():
        config_path = DEFAULT_CONFIG_PATH
    file_data: dict[str, Any] = {}
    if config_path is not None:
        file_data = _lower_tenants(_read_toml(Path(config_path)), str(config_path))
    env_map: Mapping[str, str] = os.environ if env is None else env
    try:
        env_data = _MappingEnvSource(Settings, env_map)()
    except SettingsError as exc:
        # e.g. SYNCD_JOBS='[{bad': name the variable, never echo its value (may hold tokens)
        match = re.search(r'field "(\w+)"', str(exc))
        variable = f"{ENV_PREFIX}{match.group(1).upper()}" if match else "environment"
        cause = exc.__cause__
        detail = f" ({type(cause).__name__}: {cause})" if isinstance(cause, ValueError) else ""
        if isinstance(cause, ValueError) and hasattr(cause, "doc"):
            detail = f" ({cause.msg} at position {cause.pos})"  # type: ignore[attr-defined]
        raise ConfigError(f"{variable}: not valid JSON{detail}") from None
    env_data = _lower_tenants(env_data, "environment")
    merged = _overlay(file_data, env_data)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_error_line(exc, file_data, env_data, config_path)) from None
    settings._config_file = Path(config_path) if config_path is not None else None
    settings._env = env
    env_tenants = env_data.get("tenants")
    for name, tenant in settings.tenants.items():
        tenant._env = env
        env_tenant = env_tenants.get(name) if isinstance(env_tenants, Mapping) else None
        if tenant.token is not None and isinstance(env_tenant, Mapping) and "token" in env_tenant:
            tenant._token_origin = f"env:{ENV_PREFIX}TENANTS{ENV_NESTED_DELIMITER}{name.upper()}{ENV_NESTED_DELIMITER}TOKEN"
        if tenant.token is not None:
            register_secret(tenant.token.get_secret_value())
    if settings.daemon.token is not None:
        register_secret(settings.daemon.token.get_secret_value())
    return settings
