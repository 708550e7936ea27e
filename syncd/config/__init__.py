"""Settings of syncd: a TOML file plus `SYNCD_*` environment variables, validated at start-up.

The modules, lowest first (each imports only those above it):

- `base`: the strict base model, durations (`15m`), names, errors located at a field.
- `tenants`: API endpoints and their tokens, the retry budget, `TENANT[:ORG_ID]` references.
- `cron`: the cron expressions and time zones a schedule is written in (cronsim reads them;
  the daemon's `schedule` asks it for the next time).
- `jobs`: daemon jobs, one model per kind (`sync`, `backup`, `mirror`), and their schedules.
- `daemon`: the control API; `fleet`: replicas sharing a PostgreSQL state; `content`: the
  content source a target service imports from.
- `settings`: `Settings`, all of the above together, and the checks across them.
- `loading`: `load_settings`, the file and the environment over it, every problem a line.
"""

from syncd.config.base import Host, Seconds, format_duration, parse_duration
from syncd.config.content import ContentSourceConfig, shown_url
from syncd.config.cron import validate_cron
from syncd.config.daemon import DaemonConfig, host_key
from syncd.config.daemon import _is_loopback as _is_loopback  # syncd.daemon.service: a loopback address needs no token
from syncd.config.fleet import FleetConfig, names_postgres
from syncd.config.jobs import (
    JOB_KINDS,
    KEEP_RULES,
    AnyJob,
    BackupJob,
    JobBase,
    JobConfig,
    MirrorJob,
    Schedule,
    SyncJob,
)
from syncd.config.loading import DEFAULT_CONFIG_PATH, load_settings
from syncd.config.settings import ENV_PREFIX, Settings, parse_target_ref
from syncd.config.tenants import TOKEN_MASK, RetryConfig, TargetRef, TenantConfig

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "ENV_PREFIX",
    "JOB_KINDS",
    "KEEP_RULES",
    "TOKEN_MASK",
    "AnyJob",
    "BackupJob",
    "ContentSourceConfig",
    "DaemonConfig",
    "FleetConfig",
    "Host",
    "JobBase",
    "JobConfig",
    "MirrorJob",
    "RetryConfig",
    "Schedule",
    "Seconds",
    "Settings",
    "SyncJob",
    "TargetRef",
    "TenantConfig",
    "format_duration",
    "host_key",
    "load_settings",
    "names_postgres",
    "parse_duration",
    "parse_target_ref",
    "shown_url",
    "validate_cron",
]
