"""Daemon jobs: when one runs (`Schedule`) and what it does, one model per kind.

A kind of job is one model here (its own options, and `kind: Literal[...]` naming it), listed
in `AnyJob`, plus one runner in `syncd.daemon.jobs`. `JobConfig` validates a job with the model
its `kind` names. Options of another kind (a target on a sync job, retention on a mirror job)
are errors rather than silently ignored: they mean the user expects something. Every job still
answers every kind's option, None where it is not its own (`job.target` of a sync job), because
the daemon and `config check` read them of any job.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticKnownError

from syncd.config.base import NAME_RE, Problem, Seconds, StrictModel, format_duration, raise_all, raise_at
from syncd.config.cron import validate_cron, validate_timezone
from syncd.config.storage import is_object_url, parse_object_url
from syncd.config.tenants import Ref
from syncd.scope import Pattern, Scope, ScopeError

__all__ = [
    "DEFAULT_FULL_EVERY", "JOB_KINDS", "KEEP_RULES", "AnyJob", "BackupJob", "ExportJob", "JobBase", "JobConfig",
    "MirrorJob", "Schedule", "SyncJob",
]  # fmt: skip

# Cron expressions and time zones are read by `syncd.config.cron` (the cronsim library): `validate_cron`
# and `validate_timezone` check them for the models below.


class Schedule(StrictModel):
    """When a daemon job runs: `every` (interval) or `cron` (5 fields or a macro such as
    `@daily`, read in `timezone`; see `syncd.config.cron`), plus random jitter."""

    every: Seconds | None = Field(default=None, gt=0)
    """Run at this interval, start to start (`15m`); give `every` or `cron`, not both."""
    cron: str | None = None
    """Run at the times of a cron expression: 5 fields (minute hour day-of-month month day-of-week,
    names allowed: `0 9 * * MON-FRI`) or a macro (`@hourly`, `@daily`, `@weekly`, `@monthly`,
    `@yearly`), read in the job's `timezone`."""
    jitter: Seconds = 0.0
    """A random delay, up to this long, added to each scheduled run (spreads jobs that share a schedule)."""
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


DEFAULT_FULL_EVERY = 86400.0

KEEP_RULES = ("keep_last", "keep_hourly", "keep_daily", "keep_weekly", "keep_monthly", "keep_yearly")
"""A backup job's retention rules, as restic names them (`syncd.daemon.retention`)."""

FullEvery = Annotated[Seconds, Field(ge=0)]
"""Read everything again (not only what change tokens say changed) when the last full read is
older than this; default 1d, 0 never. Catches edits that move no change token (a comment edited
in place, a custom field value)."""

KeepRule = Annotated[int | None, Field(ge=1)]
"""Keep this many backups of a period (`syncd.daemon.retention`); None: the rule is not given."""


class JobBase(StrictModel):
    """What every job has, whatever its kind; each kind's model adds its own options.

    Validated on its own only when the `kind` is missing or unknown, so that a broken job
    reports its problems (the kind among them) as one flat model did.
    """

    name: str
    """The job's name, unique among the jobs: lower case letters, digits, '_' and '-'."""
    kind: Any  # each kind's model narrows it to its own `Literal`
    """What the job does: `sync` keeps the state mirror of the source current, `backup` writes a
    backup file of it, `mirror` makes the target match it, `export` commits it to a Git history."""
    source: Ref
    """What the job reads: `TENANT` (every organization the token sees) or `TENANT:ORG_ID`."""
    schedule: Schedule | None = None
    """When the job runs: `{ every = "15m" }` or `{ cron = "30 2 * * *" }`, and a `jitter`.
    Without one the job runs only when triggered (`syncd trigger`, the control API, the page)."""
    timezone: str = "UTC"
    """The IANA time zone of the job's cron schedule and of its retention's hours, days, weeks."""
    include: list[str] = Field(default_factory=list)
    """The job's scope, as `--include`: rclone-style globs on collection and space paths
    (`Engineering/API`) and site titles; when any is given, only what one matches is synced,
    backed up or mirrored. None given: everything."""
    exclude: list[str] = Field(default_factory=list)
    """What the job leaves out, as `--exclude`: globs like `include`'s; what one matches is not
    synced, backed up or mirrored (and its copy on a mirror's target is left alone)."""

    refused: ClassVar[Mapping[str, str]] = {}
    """Why an option of another kind is refused on this kind, where `only allowed on ... jobs`
    would not say it."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError(
                f"must match ^[a-z0-9][a-z0-9_-]*$ (lower case, digits, '_' and '-'), got {value!r}"
            )
        return value

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: object) -> object:
        if not (isinstance(value, str) and value in JOB_KINDS):
            raise PydanticKnownError("literal_error", {"expected": _either(list(JOB_KINDS))})
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        return validate_timezone(value)

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                Pattern.parse(value, "pattern")
            except ScopeError as exc:
                raise ValueError(str(exc)) from None
        return values

    @model_validator(mode="wrap")
    @classmethod
    def _own_options_only(cls, data: Any, handler: ModelWrapValidatorHandler[JobBase]) -> JobBase:
        """Refuse every option of another kind (in `SHOWN_KEYS` order), after the problems of
        the job's own settings. Without a known kind (`JobBase`) no option is another kind's:
        the kind is the problem. An option given as null (JSON in `SYNCD_JOBS`) is one not given."""
        if not isinstance(data, Mapping):
            return handler(data)
        given = {key: value for key, value in data.items() if not (value is None and key in OPTION_OWNERS)}
        foreign = [key for key in SHOWN_KEYS if key in given and key in OPTION_OWNERS and key not in cls.model_fields]
        refused: list[Problem] = [
            ((key,), cls.refused.get(key) or f"only allowed on {' and '.join(OPTION_OWNERS[key])} jobs, not on a {given.get('kind')} job", given[key])
            for key in foreign
            if cls is not JobBase
        ]  # fmt: skip
        try:
            job = handler({key: value for key, value in given.items() if key not in foreign})
        except ValidationError as found:
            raise_all(refused, found)
            raise
        raise_all(refused)
        return job

    @model_validator(mode="after")
    def _one_time_zone(self) -> JobBase:
        """One time zone for the schedule and the retention: the job's, or its schedule's."""
        if self.schedule is not None:
            if "timezone" in self.schedule.model_fields_set:
                if "timezone" in self.model_fields_set and self.schedule.timezone != self.timezone:
                    raise_at(("schedule", "timezone"), f"differs from the job's timezone {self.timezone!r}: give it once, on the job", self.schedule.timezone)
                self.timezone = self.schedule.timezone
            elif self.schedule.timezone != self.timezone:
                self.schedule = self.schedule.model_copy(update={"timezone": self.timezone})
        return self

    @model_serializer(mode="wrap")
    def _with_every_option(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The job's settings with every kind's options (None where not its own), in one order
        for all kinds: what `config check --json` shows."""
        own: dict[str, Any] = handler(self)
        return {key: own.get(key) for key in SHOWN_KEYS if key in own or key not in type(self).model_fields}

    @property
    def scope(self) -> Scope:
        """The job's scope (its patterns were checked when the configuration was read)."""
        return Scope.parse(self.include, self.exclude)

    def retention_policy(self) -> dict[str, int]:
        """The keep_* rules given (`keep_daily` -> N), empty when every backup is kept."""
        return {key: getattr(self, key) for key in KEEP_RULES if getattr(self, key) is not None}


class SyncJob(JobBase):
    """Refresh the state mirror: read the source into it, incrementally."""

    kind: Literal["sync"]
    full_every: FullEvery = DEFAULT_FULL_EVERY
    """Read everything again, not only what change tokens say changed, when the last full read is
    this old (`0s`: never); catches edits that move no change token (a comment edited in place)."""


class BackupJob(JobBase):
    """A full read of the source into a new backup file, then retention prunes older ones."""

    kind: Literal["backup"]
    retention: int | None = Field(default=None, ge=1)
    """The old name of `keep_last` (an alias)."""
    keep_last: KeepRule = None
    """After each complete backup, keep the newest N backups. With the other `keep_*` rules this
    is restic's retention policy: a backup any rule keeps stays, the others are deleted; no rule
    given keeps every backup."""
    keep_hourly: KeepRule = None
    """Keep the newest backup of each of the last N hours that have one (in the job's `timezone`)."""
    keep_daily: KeepRule = None
    """Keep the newest backup of each of the last N days that have one (in the job's `timezone`)."""
    keep_weekly: KeepRule = None
    """Keep the newest backup of each of the last N ISO weeks that have one (in the job's `timezone`)."""
    keep_monthly: KeepRule = None
    """Keep the newest backup of each of the last N months that have one (in the job's `timezone`)."""
    keep_yearly: KeepRule = None
    """Keep the newest backup of each of the last N years that have one (in the job's `timezone`)."""
    with_files: bool | None = None
    """Also fetch file binaries into a `FILE.blobs/` folder beside each backup; unset or false: not."""
    output: str | None = None
    """Where the job's backups go: a folder, or `s3://BUCKET/PREFIX/` in object storage (S3, R2,
    MinIO, GCS: the bucket's `[storage.NAME]`, else the standard AWS settings), where the file
    binaries of all its backups are stored once by hash under `PREFIX/blobs/`. Unset:
    `STATE_DIR/backups/JOB/`."""

    refused: ClassVar[Mapping[str, str]] = {"full_every": "not allowed on backup jobs (a backup always reads everything)"}

    @field_validator("output")
    @classmethod
    def _output(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if is_object_url(value):
            return str(parse_object_url(value, backup=False))
        if not value.strip():
            raise ValueError("must not be empty: a folder, or s3://BUCKET/PREFIX/")
        return value

    @model_validator(mode="after")
    def _retention_is_keep_last(self) -> BackupJob:
        if self.retention is not None:
            if self.keep_last is not None:
                raise_at(("retention",), "retention is the old name of keep_last: give keep_last only", self.retention)
            self.keep_last, self.retention = self.retention, None
        return self


class MirrorJob(JobBase):
    """Copy the source onto the target (`syncd mirror apply`), bounded by `max_delete`."""

    kind: Literal["mirror"]
    target: Ref | None = None  # required; optional here so that its absence reads `required for a mirror job`
    """The organization the job makes match the source: `TENANT:ORG_ID` (or `TENANT`); required, and
    not the source."""
    mode: Literal["copy", "mirror"] = "copy"
    """`copy` creates and updates only; `mirror` also deletes what syncd created on the target and
    the source no longer has."""
    max_delete: int = Field(default=100, ge=0)
    """A run that would delete more than this many resources on the target is refused."""
    full_every: FullEvery = DEFAULT_FULL_EVERY
    """Read everything again, not only what change tokens say changed, when the last full read is
    this old (`0s`: never); catches edits that move no change token (a comment edited in place)."""
    with_access: bool = False
    """Also copy who may join or sign in (`--with-access`); by default the target keeps its own."""

    @model_validator(mode="after")
    def _target_elsewhere(self) -> MirrorJob:
        if self.target is None:
            raise_at(("target",), "required for a mirror job (TENANT or TENANT:ORG_ID)", None)
        if self.target == self.source:
            raise_at(("target",), f"must differ from source, got {str(self.target)!r}", str(self.target))
        return self


class ExportJob(JobBase):
    """Read the source into the job's own mirror file, export it into a Git repository and commit
    what changed (`syncd export --git`), then push it: the repository's log is the history of
    the documentation."""

    kind: Literal["export"]
    repository: Path | None = None
    """The Git repository the export is written and committed into (its work tree is the export;
    made at the first run); default `STATE_DIR/exports/<job name>`."""
    push: str | None = None
    """Where each run pushes the branch `main`, fast-forward only: an SSH URL (`git@host:org/docs.git`,
    with the `ssh` client), an HTTPS URL (`https://user@host/org/docs.git`, its token in `push_token_env`)
    or a path. A failed push fails the run; its commit stays in the repository and the next run pushes it."""
    push_token_env: str | None = None
    """The environment variable holding the password or token of an HTTPS `push` remote (the user
    name is the URL's); never the token itself in the file."""
    with_files: bool | None = None
    """Also fetch file binaries (into `<job>.blobs/` beside the job's mirror file, each once) and
    commit them under the spaces' `.gitbook/assets/`; unset or false: pages link to where they would be."""
    full_every: FullEvery = DEFAULT_FULL_EVERY
    """Read everything again, not only what change tokens say changed, when the last full read is
    this old (`0s`: never); catches edits that move no change token (a comment edited in place)."""

    @model_validator(mode="after")
    def _whole(self) -> ExportJob:
        for key in ("include", "exclude"):
            if getattr(self, key):
                raise_at((key,), "not allowed on export jobs (a Git history holds whole organizations: restoring a commit needs them)", getattr(self, key))
        if self.push_token_env is not None and self.push is None:
            raise_at(("push_token_env",), "goes with push (the remote whose token it holds)", self.push_token_env)
        return self


AnyJob = SyncJob | BackupJob | MirrorJob | ExportJob
"""Every kind of job. A new kind: its model above, named here, and its runner in `syncd.daemon.jobs`."""


def _tag(model: type[JobBase]) -> str:
    (tag,) = get_args(model.model_fields["kind"].annotation)
    return str(tag)


def _either(tags: list[str]) -> str:
    """`'sync', 'backup' or 'mirror'`, as pydantic words a Literal."""
    quoted = [repr(tag) for tag in tags]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


JOB_KINDS: dict[str, type[JobBase]] = {_tag(model): model for model in get_args(AnyJob)}
"""The model of each kind of job, by its tag."""


def _option_owners(kinds: Mapping[str, type[JobBase]]) -> dict[str, list[str]]:
    """Each kind's own option (a field not of `JobBase`) -> the kinds that take it."""
    owners: dict[str, list[str]] = {}
    for kind, model in kinds.items():
        for key in model.model_fields:
            if key not in JobBase.model_fields:
                owners.setdefault(key, []).append(kind)
    return owners


OPTION_OWNERS = _option_owners(JOB_KINDS)

_FLAT_ORDER = ("name", "kind", "source", "target", "schedule", "timezone", "retention", *KEEP_RULES, "mode", "max_delete", "with_files", "full_every", "include", "exclude")
"""The order a job's settings were always shown in (one flat model, before a model per kind)."""
SHOWN_KEYS = [*_FLAT_ORDER, *(key for key in OPTION_OWNERS if key not in _FLAT_ORDER)]
"""Every key `config check --json` shows of a job, whatever its kind; a new option comes last."""


def _answer_other_kinds_options(kinds: Mapping[str, type[JobBase]]) -> None:
    """A job answers every other kind's option with None: the daemon and `config check` read
    them of any job (`job.target`, `job.full_every`, `job.mode`...)."""
    for model in kinds.values():
        for key in OPTION_OWNERS:
            if key not in model.model_fields:
                setattr(model, key, None)


_answer_other_kinds_options(JOB_KINDS)


def _as_written(data: Any, union: ValidatorFunctionWrapHandler) -> JobBase:
    """Validate a job with the model of its kind, its errors located as the user wrote them.

    pydantic's discriminated union (`union`, which also picks the serializer by tag) would put
    the tag into every error's location (`jobs[0].sync.name`) and word a missing or unknown
    kind its own way; a job without a known kind is read with `JobBase`, which says so."""
    if isinstance(data, JobBase):
        return union(data)  # type: ignore[no-any-return]
    if not isinstance(data, Mapping):
        raise ValidationError.from_exception_data(
            "JobConfig", [InitErrorDetails(type="model_type", loc=(), input=data, ctx={"class_name": "JobConfig"})]
        )
    kind = data.get("kind")
    model = JOB_KINDS.get(kind) if isinstance(kind, str) else None
    # Without a known kind, JobBase fails at `kind` (and says what else is wrong with the job).
    return (model or JobBase).model_validate(data)


JobConfig = Annotated[AnyJob, Discriminator("kind"), WrapValidator(_as_written)]
"""A daemon job of any kind: its settings are those of the model its `kind` names."""
