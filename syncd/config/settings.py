"""`Settings`: everything syncd is configured with, in one validated model, and the checks
that span its parts (job names, the tenants jobs name).

Relative paths (`state_dir`, `temp_dir`, `token_file`) are relative to the working directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ByteSize, Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from syncd.config.base import NAME_RE, Problem, Seconds, raise_all
from syncd.config.content import ContentSourceConfig
from syncd.config.daemon import DaemonConfig
from syncd.config.fleet import FleetConfig, check_state_url
from syncd.config.jobs import JobConfig
from syncd.config.storage import StorageConfig, is_object_url, parse_object_url
from syncd.config.tenants import RetryConfig, TargetRef, TenantConfig, parse_ref
from syncd.errors import ConfigError

__all__ = ["ENV_NESTED_DELIMITER", "ENV_PREFIX", "LogLevel", "Settings", "parse_target_ref"]

ENV_PREFIX = "SYNCD_"
ENV_NESTED_DELIMITER = "__"

LogLevel = Literal["debug", "info", "warning", "error", "critical"]


def _log_level(value: object) -> object:
    if isinstance(value, str):
        value = value.strip().lower()
        return "warning" if value == "warn" else value
    return value


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
    """The API endpoints syncd reads and writes, each a table `[tenants.NAME]` with its token
    (NAME: lower case letters, digits, '_' and '-'); commands and jobs name them."""
    state_dir: Path = Path("state")
    """Where the SQLite mirror, backups, journals, the daemon's history and its `daemon.json` live."""
    temp_dir: Path | None = None
    """Where temporary files go (a run's staging, SQLite's spills); unset: `tmp` in state_dir,
    made private when first needed (`syncd.temp_dir`: never the system's, which a read-only root lacks)."""
    state_url: Annotated[SecretStr | None, BeforeValidator(check_state_url)] = None
    """A PostgreSQL that replicas of `syncd serve` share, `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`
    (a fleet; its password is masked in every log line); unset: one daemon, SQLite in state_dir."""
    fleet: FleetConfig = Field(default_factory=FleetConfig)
    """How replicas of `syncd serve` that share `state_url` split the work."""
    concurrency: int = Field(default=256, ge=1, le=4096)
    """API requests in flight at once, all tenants of the process together: a bound, not a
    speed setting (each tenant's own limit follows its link; `answer_budget` bounds memory)."""
    request_timeout: Seconds = Field(default=30.0, gt=0)
    """Deadline of one API request attempt: connect, headers and the whole body."""
    max_answer_bytes: ByteSize = Field(default=64 * 1024 * 1024, ge=64 * 1024)
    """The longest API answer taken ("64MiB", "500MB" or bytes): longer ones are refused."""
    answer_budget: ByteSize = Field(default=128 * 1024 * 1024, ge=64 * 1024)
    """API answer bytes the process holds at once, all requests together (a body that would need
    more than is left waits for the others); raised to fit one answer of `max_answer_bytes` if
    lower (`syncd.api.answers.budget_limit`)."""
    max_pages_per_listing: int = Field(default=10_000, ge=1, le=1_000_000)
    """Pages a listing may have before it is stopped as endless."""
    retry: RetryConfig = Field(default_factory=RetryConfig)
    """How one API call is retried: 429, 5xx, dropped connections and timeouts, with jittered
    exponential backoff, honouring Retry-After."""
    log_format: Literal["console", "json"] = "console"
    """Log lines for people (`console`) or one JSON object a line (`json`, for log collectors);
    tokens are masked in either. `--log-format` wins over it."""
    log_level: Annotated[LogLevel, BeforeValidator(_log_level)] = "info"
    """The least severe log events written (`warn` is read as `warning`). `--log-level` wins over it."""
    jobs: list[JobConfig] = Field(default_factory=list)
    """What the daemon (`syncd serve`) runs, each a table `[[jobs]]`: a sync, a backup or a mirror
    job, on a schedule or when triggered."""
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    """The daemon's control API and web page."""
    content_source: ContentSourceConfig = Field(default_factory=ContentSourceConfig)
    """Where syncd serves content it holds (a backup, a private space) for the target service to import."""
    storage: dict[str, StorageConfig] = Field(default_factory=dict)
    """Buckets of object storage that backups go to (`s3://BUCKET/...`), each a table
    `[storage.NAME]` with its bucket, endpoint, region and the variables holding its keys; a
    bucket without one is reached with the standard AWS settings alone."""

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
        raise_all([
            ((name,), f"invalid tenant name {name!r}: use lower case letters, digits, '_' and '-'", name)
            for name in value
            if not NAME_RE.match(name)
        ])  # fmt: skip
        for name, tenant in value.items():
            tenant._name = name
        return value

    @field_validator("storage")
    @classmethod
    def _storage_entries(cls, value: dict[str, StorageConfig]) -> dict[str, StorageConfig]:
        problems: list[Problem] = []
        buckets: dict[str, str] = {}
        for name, entry in value.items():
            if not NAME_RE.match(name):
                problems.append(((name,), f"invalid storage name {name!r}: use lower case letters, digits, '_' and '-'", name))
            if entry.bucket in buckets:
                problems.append(((name, "bucket"), f"bucket {entry.bucket!r} is also storage.{buckets[entry.bucket]}'s: one entry a bucket", entry.bucket))
            buckets.setdefault(entry.bucket, name)
            entry._name = name
        raise_all(problems)
        return value

    @field_validator("state_dir", "temp_dir")
    @classmethod
    def _state_dir(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        if not str(value).strip():
            raise ValueError("must not be empty")
        return value.expanduser()

    @property
    def temp_path(self) -> Path:
        """Where this process's temporary files go: `temp_dir`, else `tmp` in `state_dir`."""
        return self.temp_dir if self.temp_dir is not None else self.state_dir / "tmp"

    @model_validator(mode="after")
    def _cross_checks(self) -> Settings:
        """Job names are unique and jobs name configured tenants: every problem at once."""
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        outputs: dict[str, str] = {}
        for index, job in enumerate(self.jobs):
            if job.name in seen:
                problems.append((("jobs", index, "name"), f"duplicate job name {job.name!r} (also jobs[{seen[job.name]}])", job.name))
            seen.setdefault(job.name, index)
            output = getattr(job, "output", None)
            if output is not None:
                where = str(parse_object_url(output, backup=False)) if is_object_url(output) else str(Path(output).expanduser().absolute())
                if where in outputs:
                    problems.append((("jobs", index, "output"), f"also the output of job {outputs[where]!r}: each backup job keeps its own place", output))
                outputs.setdefault(where, job.name)
            for field in ("source", "target"):
                ref: TargetRef | None = getattr(job, field)
                if ref is not None and ref.tenant not in self.tenants:
                    problems.append((("jobs", index, field), f"unknown tenant {ref.tenant!r} ({self._configured()})", str(ref)))
        raise_all(problems)
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

    def storage_for(self, bucket: str) -> StorageConfig | None:
        """The `[storage.NAME]` entry of `bucket`, or None: the standard AWS settings alone."""
        return next((entry for entry in self.storage.values() if entry.bucket == bucket), None)

    def job(self, name: str) -> JobConfig:
        """The job called `name`, or a ConfigError listing the known ones."""
        for job in self.jobs:
            if job.name == name:
                return job
        known = ", ".join(job.name for job in self.jobs) or "none"
        raise ConfigError(f"unknown job {name!r} (configured: {known})")


def parse_target_ref(ref: str, settings: Settings | None = None) -> TargetRef:
    """Parse `TENANT` or `TENANT:ORG_ID`; with `settings`, the tenant must be configured.

    For command-line arguments: problems become a one-line ConfigError.
    """
    try:
        parsed = parse_ref(ref)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if settings is not None:
        settings.tenant(parsed.tenant)
    return parsed
