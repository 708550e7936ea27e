"""What one run of a daemon job does, per kind: the same engines the CLI commands use.

- `sync`: crawl TENANT[:ORG] into the state mirror (`state/syncd.db`), incrementally.
- `backup`: a full crawl into a new file `<job>-<UTC time>.db` in the job's `output` folder
  (default `state/backups/<job>/`; file binaries beside it when `with_files`; an output in
  object storage is `syncd.daemon.bucket_backup`'s), then delete the complete backups the job's retention
  policy (`keep_last`, `keep_daily`, ...: `syncd.daemon.retention`, periods in the job's time zone)
  does not keep. A backup that is not whole (something unread, a file not downloaded, or
  emptier than the job's newest complete backup: nothing found, or fewer than half its
  objects) is `partial`, renamed `<job>-<UTC time>-partial.db`, prunes nothing and never counts
  for retention; a partial backup goes once the policy is full (every rule found its N complete
  backups) and it is older than every complete backup kept.
- `mirror`: `syncd.copy.copy_org`, exactly as `syncd mirror apply`: settle what earlier runs
  left, read both sides, plan, apply, read again and verify, in rounds.
- `export`: read the source into the job's own mirror file, export it into a Git repository,
  commit what changed and push it (`syncd.daemon.export_job`).

Each kind is one `Runner` in `RUNNERS` (its settings: one model in `syncd.config.jobs`).
A run returns its outcome and a JSON-ready summary, or raises: the daemon turns any
exception into a failed run. `succeeded` means everything was read (and copied, and
verified equal); `partial` means the run finished but something could not be read or made
equal (the summary says what), which is not retried sooner than the schedule.
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

import anyio

from syncd.config import JOB_KINDS, BackupJob, JobConfig, MirrorJob, Settings, SyncJob
from syncd.config.cron import zone
from syncd.config.storage import is_object_url
from syncd.copy import copy_org
from syncd.daemon.backups import (
    BACKUP_SUFFIX,
    PARTIAL_MARK,
    Pruning,
    backup_name,
    backup_names,
    choose_pruning,
    judge_backup,
    partial_name,
    taken_time,
)
from syncd.daemon.metrics import DaemonMetrics
from syncd.daemon.progress import current as run_progress
from syncd.daemon.reasons import backup_reason, mirror_reason, sync_reason
from syncd.daemon.retention import Policy
from syncd.daemon.run_history import Outcome
from syncd.files import private_dir
from syncd.read.backup import backup, blobs_dir
from syncd.read.sync import default_db, sync_into
from syncd.selection import Dependency
from syncd.state import StateStore

__all__ = [
    "BACKUP_SUFFIX", "PARTIAL_MARK", "RUNNERS", "JobOutcome", "Pruning", "Runner", "backup_dir", "backup_files",
    "delete_backups", "execute_job", "partial_backups", "plan_pruning", "prune_backups", "save_mirror_plan", "state_files", "taken_time",
]  # fmt: skip


@dataclass
class JobOutcome:
    outcome: Outcome
    summary: dict[str, Any] = field(default_factory=dict)


def state_files(settings: Settings, job: JobConfig) -> list[Path | str]:
    """What a run of `job` writes, as keys: runs of one process sharing one are serialized. The
    SQLite file as a whole; in a PostgreSQL state each tenant's part (its writer lock is per
    tenant there), so jobs of other tenants run side by side. A kind whose runs write no state
    (a backup writes its own new file) has none."""
    if not RUNNERS[job.kind].writes_state:
        return []
    if settings.state_url is None:
        return [default_db(settings)]
    tenants = [settings.tenant(ref.tenant).name for ref in (job.source, job.target) if ref is not None]
    return [f"state tenant {name}" for name in sorted(set(tenants))]


def backup_dir(settings: Settings, job: JobConfig) -> Path:
    """The folder of a backup job's files: its `output`, else `STATE_DIR/backups/JOB/` (a job
    whose output is in object storage stages each backup under the temporary directory instead)."""
    output = getattr(job, "output", None)
    if output is not None and not is_object_url(output):
        return Path(output).expanduser()
    return settings.state_dir / "backups" / job.name


def _named(folder: Path, job: str, mark: str) -> list[Path]:
    if not folder.is_dir():
        return []
    files = {path.name: path for path in folder.iterdir() if path.is_file()}
    return [files[name] for name in backup_names(files, job, mark)]


def backup_files(folder: Path, job: str) -> list[Path]:
    """The job's complete backup files, oldest first (their names sort by time); partial
    ones (`partial_backups`) and other files in the folder are not counted."""
    return _named(folder, job, "")


def partial_backups(folder: Path, job: str) -> list[Path]:
    """The job's partial backup files (`<job>-<UTC time>-partial.db`), oldest first."""
    return _named(folder, job, PARTIAL_MARK)


def plan_pruning(folder: Path, job: str, policy: Policy | int, tz: tzinfo = UTC) -> Pruning[Path]:
    """What `choose_pruning` does to the job's backup files in `folder`. Deletes nothing."""
    return choose_pruning(backup_files(folder, job), partial_backups(folder, job), policy, tz)


def delete_backups(paths: list[Path]) -> None:
    """Delete backup files with their `.blobs/` folders."""
    for path in paths:
        path.unlink(missing_ok=True)
        shutil.rmtree(blobs_dir(path), ignore_errors=True)


def prune_backups(folder: Path, job: str, keep: Policy | int, tz: tzinfo = UTC) -> list[Path]:
    """Delete what `plan_pruning` dooms (with the `.blobs/` folders); returns it, oldest first."""
    doomed = plan_pruning(folder, job, keep, tz).doomed
    delete_backups(doomed)
    return doomed


def _mark_partial(path: Path) -> Path:
    """Rename a backup that is not whole (and its `.blobs/` folder) so it never counts as one."""
    marked = path.with_name(partial_name(path.name))
    if blobs_dir(path).exists():
        blobs_dir(path).rename(blobs_dir(marked))
    path.rename(marked)
    return marked


def _backup_path(folder: Path, job: str, now: datetime) -> Path:
    """`<job>-20261126T001544.123Z.db`: names sort by time, which retention relies on."""
    taken = [path.name for path in folder.iterdir()] if folder.is_dir() else []
    return folder / backup_name(job, now, taken)


def _record_objects(metrics: DaemonMetrics, db: Path, *tenants: str) -> int:
    """Publish the tenants' object counts; returns how many objects they hold together."""
    with StateStore(db) as store:
        counts = {tenant: store.counts(tenant) for tenant in dict.fromkeys(tenants)}
    for tenant, kinds in counts.items():
        metrics.set_objects(tenant, kinds)
    return sum(sum(kinds.values()) for kinds in counts.values())


def _scoped(job: JobConfig, dependencies: list[Dependency]) -> dict[str, Any]:
    """A scoped job's patterns and what it found outside its scope (the first 20), for its run summary."""
    if job.scope.everything:
        return {}
    return {"include": job.include, "exclude": job.exclude, "dependencies": [d.line() for d in dependencies[:20]]}


async def _run_sync(settings: Settings, job: SyncJob, metrics: DaemonMetrics, full: bool) -> JobOutcome:
    db = default_db(settings)
    result, client = await sync_into(
        settings, job.source, db, job=job.name, full=full, scope=job.scope, on_progress=run_progress().reading, lists_every=job.full_every
    )
    tenant = settings.tenant(job.source.tenant).name
    mirrored = _record_objects(metrics, db, tenant)
    outcome: Outcome = "succeeded" if result.status == "complete" else "partial"
    summary: dict[str, Any] = {
        "full": full,
        "mirror_run": result.run,
        "db": str(db) if isinstance(db, Path) else None,
        "status": result.status,
        "changed": result.summary.by_op(),
        "changes": result.summary.to_dict(),
        "objects_read": sum(result.stats.objects.values()),
        "objects_mirrored": mirrored,
        "skipped_scopes": result.stats.skipped_scopes,
        "lists_not_read": result.stats.lists_not_read,
        "requests": client.stats.requests,
        "retries": client.stats.retries,
        "rate_limited": client.stats.rate_limited,
        "errors": result.stats.errors[:20],
        **_scoped(job, result.scope.dependencies),
    }
    summary["reason"] = sync_reason(outcome, summary)
    return JobOutcome(outcome, summary)


async def _run_backup(settings: Settings, job: BackupJob, metrics: DaemonMetrics, full: bool) -> JobOutcome:
    if job.output is not None and is_object_url(job.output):
        from syncd.daemon.bucket_backup import run_backup_to_bucket

        outcome, summary = await run_backup_to_bucket(settings, job, metrics)
        return JobOutcome(outcome, summary)
    folder = backup_dir(settings, job)
    private_dir(folder)
    out = _backup_path(folder, job.name, datetime.now(UTC))
    earlier = backup_files(folder, job.name)
    try:
        # Compared with the newest complete backup: one that finds nothing, or far less, is
        # likelier a token that lost access than a tenant emptied overnight.
        result = await backup(
            settings, job.source, out, with_files=bool(job.with_files), baseline=earlier[-1] if earlier else None, scope=job.scope,
            on_progress=run_progress().reading, on_files=run_progress().files,
        )
    except BaseException:
        # Cancelled or failed while fetching file binaries: the file is in place but the
        # backup is not whole, and retention must not count it.
        out.unlink(missing_ok=True)
        shutil.rmtree(blobs_dir(out), ignore_errors=True)
        raise
    summary, complete = judge_backup(job, result)
    summary = {"file": str(out), **summary}
    if not complete:
        # Not a whole backup: named so that retention never counts it (nor compares with it).
        summary["file"] = str(_mark_partial(out))
    elif job.retention_policy():
        # Only a whole backup makes room: a run of partial ones must not prune the last good one.
        pruning = plan_pruning(folder, job.name, Policy.of(job.retention_policy()), zone(job.timezone))
        delete_backups(pruning.doomed)
        summary["pruned"] = [path.name for path in pruning.doomed]
        summary["kept"] = {path.name: reasons for path, reasons in pruning.kept.items()}
    metrics.backup_stored(job.name, summary["file"], datetime.now(UTC).timestamp())
    outcome: Outcome = "succeeded" if complete else "partial"
    summary["reason"] = backup_reason(outcome, summary)
    return JobOutcome(outcome, summary)


async def _run_mirror(settings: Settings, job: MirrorJob, metrics: DaemonMetrics, full: bool) -> JobOutcome:
    assert job.target is not None  # required for a mirror job: checked when the configuration was read
    db = default_db(settings)
    # A refused plan (deletes beyond the job's max_delete) raises PlanRefused: the run fails.
    report = await copy_org(
        settings, job.source, job.target, mode=job.mode, max_delete=job.max_delete, db=db, full=full, scope=job.scope,
        with_access=job.with_access, on_read=run_progress().reading, on_apply=run_progress().applying,
    )
    summary: dict[str, Any] = {"full": full, **report.summary(), "warnings": report.warnings[:20], "objects_read": run_progress().objects_read}
    _record_objects(metrics, db, settings.tenant(job.source.tenant).name, settings.tenant(job.target.tenant).name)
    metrics.set_left_on_target(job.name, len(report.left_on_target))
    outcome: Outcome = "succeeded" if report.equal and report.read_cleanly else "partial"
    verify = f"syncd mirror verify {job.source} {job.target}" + (" --mode mirror" if job.mode == "mirror" else "") + (" --with-access" if job.with_access else "")
    summary["reason"] = mirror_reason(outcome, summary, verify)
    return JobOutcome(outcome, summary)


async def _run_export(settings: Settings, job: Any, metrics: DaemonMetrics, full: bool) -> JobOutcome:
    from syncd.daemon.export_job import run_export

    return JobOutcome(*await run_export(settings, job, metrics, full))


async def save_mirror_plan(settings: Settings, job: MirrorJob, folder: Path, now: datetime) -> Path:
    """The plan `job` would apply now, saved in `folder` as `mirror plan --out` saves one (for
    the page to show; `mirror apply --plan` can apply it). Reads both organizations into the
    state mirror, as `mirror plan` does; writes to neither organization."""
    from syncd.copy import plan_org
    from syncd.copy.engine import saved_plan
    from syncd.copy.planfile import plan_fields, plan_options, save_plan
    from syncd.copy.review import review

    assert job.target is not None
    reading, plan = await plan_org(
        settings, job.source, job.target, mode=job.mode, max_delete=job.max_delete, db=default_db(settings), scope=job.scope,
        with_access=job.with_access, on_read=run_progress().reading,
    )  # fmt: skip
    saved = saved_plan(reading, plan, job.source, job.target, job.mode, plan_options(job.max_delete, True, job.with_access, job.scope))
    path = folder / f"{job.name}-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}.json"

    def write() -> None:  # tens of MB of JSON for a big plan: not on the event loop
        items = review(plan, reading.source.snapshot, reading.target.snapshot, reading.idmap)
        private_dir(folder)
        save_plan(path, plan_fields(saved, items))

    await anyio.to_thread.run_sync(write)
    return path


@dataclass(frozen=True)
class Runner:
    """What the daemon does for one kind of job."""

    run: Callable[[Settings, Any, DaemonMetrics, bool], Awaitable[JobOutcome]]
    """One run: `(settings, job, metrics, full)`, `job` of the kind's model."""
    writes_state: bool
    """Whether a run writes the state mirror (`state_files`)."""


RUNNERS: dict[str, Runner] = {
    "sync": Runner(_run_sync, writes_state=True),
    "backup": Runner(_run_backup, writes_state=False),
    "mirror": Runner(_run_mirror, writes_state=True),
    "export": Runner(_run_export, writes_state=False),  # its own mirror file and repository
}
"""The runner of each kind of job (`syncd.config.JOB_KINDS`), by its tag."""
assert RUNNERS.keys() == JOB_KINDS.keys(), "every kind of job has one runner"


async def execute_job(settings: Settings, job: JobConfig, metrics: DaemonMetrics, *, full: bool = False) -> JobOutcome:
    """Run `job` once (`full`: read everything, whatever the change tokens say); any
    exception means the run failed (the caller records why). Where it is goes to the sink
    of `syncd.daemon.progress.reporting`, when the caller set one."""
    return await RUNNERS[job.kind].run(settings, job, metrics, full)
