"""Daemon jobs: when one runs (`Schedule`) and what it does (`JobConfig`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from syncd.config.base import NAME_RE, Seconds, StrictModel, format_duration, raise_at
from syncd.config.tenants import Ref
from syncd.cron import validate_cron, validate_timezone
from syncd.scope import Pattern, Scope, ScopeError

__all__ = ["DEFAULT_FULL_EVERY", "KEEP_RULES", "JobConfig", "JobKind", "Schedule"]

# Cron expressions and time zones are read by `syncd.cron` (the cronsim library): `validate_cron`
# and `validate_timezone` check them for the models below.


class Schedule(StrictModel):
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


class JobConfig(StrictModel):
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
        if not NAME_RE.match(value):
            raise ValueError(
                f"must match ^[a-z0-9][a-z0-9_-]*$ (lower case, digits, '_' and '-'), got {value!r}"
            )
        return value

    @model_validator(mode="after")
    def _kind_options(self) -> JobConfig:
        if self.kind == "mirror":
            if self.target is None:
                raise_at(("target",), "required for a mirror job (TENANT or TENANT:ORG_ID)", None)
            if self.target == self.source:
                raise_at(("target",), f"must differ from source, got {str(self.target)!r}", str(self.target))
        elif self.target is not None:
            raise_at(("target",), f"only allowed on mirror jobs, not on a {self.kind} job", str(self.target))
        for key in ("retention", "with_files"):
            if getattr(self, key) is not None and self.kind != "backup":
                raise_at((key,), f"only allowed on backup jobs, not on a {self.kind} job", getattr(self, key))
        for key in ("mode", "max_delete"):
            if getattr(self, key) is not None and self.kind != "mirror":
                raise_at((key,), f"only allowed on mirror jobs, not on a {self.kind} job", getattr(self, key))
        if self.full_every is not None and self.kind == "backup":
            raise_at(("full_every",), "not allowed on backup jobs (a backup always reads everything)", self.full_every)
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
                    raise_at(("schedule", "timezone"), f"differs from the job's timezone {self.timezone!r}: give it once, on the job", self.schedule.timezone)
                self.timezone = self.schedule.timezone
            elif self.schedule.timezone != self.timezone:
                self.schedule = self.schedule.model_copy(update={"timezone": self.timezone})
        for key in KEEP_RULES:
            if getattr(self, key) is not None and self.kind != "backup":
                raise_at((key,), f"only allowed on backup jobs, not on a {self.kind} job", getattr(self, key))
        if self.retention is not None:
            if self.keep_last is not None:
                raise_at(("retention",), "retention is the old name of keep_last: give keep_last only", self.retention)
            self.keep_last, self.retention = self.retention, None
        return self

    def retention_policy(self) -> dict[str, int]:
        """The keep_* rules given (`keep_daily` -> N), empty when every backup is kept."""
        return {key: getattr(self, key) for key in KEEP_RULES if getattr(self, key) is not None}


KEEP_RULES = ("keep_last", "keep_hourly", "keep_daily", "keep_weekly", "keep_monthly", "keep_yearly")
"""A backup job's retention rules, as restic names them (`syncd.retention`)."""
