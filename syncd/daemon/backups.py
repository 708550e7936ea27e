"""A backup job's backups, wherever they are kept (a folder, a prefix of object storage):
their names (`<job>-<UTC time>.db`, `-partial` before `.db` for one that is not whole), when each
was taken, which ones retention lets go (`choose_pruning`, around `syncd.daemon.retention`), and
what a run says of the backup it made (`judge_backup`). Pure: the runners in
`syncd.daemon.jobs` (a folder) and `syncd.daemon.bucket_backup` (object storage) do the I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Generic, TypeVar

from syncd.config import BackupJob
from syncd.daemon.retention import Policy, choose_kept
from syncd.read.backup import BackupResult

__all__ = [
    "BACKUP_SUFFIX", "PARTIAL_MARK", "Pruning", "backup_name", "backup_names", "choose_pruning", "judge_backup", "partial_name", "taken_time",
]  # fmt: skip

BACKUP_SUFFIX = ".db"
PARTIAL_MARK = "-partial"
"""Added to the name of a backup that is not whole: `<job>-<UTC time>-partial.db`."""



def backup_names(names: Iterable[str], job: str, mark: str = "") -> list[str]:
    """Of `names`, the job's backups (`<job>-<UTC time><mark>.db`), oldest first: their names
    sort by time. `mark` "" the complete ones, `PARTIAL_MARK` the partial ones."""
    pattern = re.compile(re.escape(job) + r"-\d{8}T\d{6}\.\d{3}Z" + re.escape(mark + BACKUP_SUFFIX))
    return sorted(name for name in names if pattern.fullmatch(name))


def _taken_at(backup: Path | str) -> str:
    name = backup if isinstance(backup, str) else backup.name
    return name.removesuffix(BACKUP_SUFFIX).removesuffix(PARTIAL_MARK)


def taken_time(backup: Path | str) -> datetime:
    """When a backup was taken, from its name (`<job>-20261126T001544.123Z.db`), a file's or an object's."""
    stamp = _taken_at(backup)[-len("20261126T001544.123Z") :]
    return datetime.strptime(stamp, "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=UTC)


B = TypeVar("B", Path, str)


@dataclass
class Pruning(Generic[B]):
    """What retention does to a job's backups: those it deletes and those it keeps (files, or
    the names of objects)."""

    doomed: list[B] = field(default_factory=list)
    """Complete and partial backups to delete, oldest first."""
    kept: dict[B, list[str]] = field(default_factory=dict)
    """Complete backups kept, newest first, each with the rules that keep it."""


def choose_pruning(complete: list[B], partial: list[B], policy: Policy | int, tz: tzinfo = UTC) -> Pruning[B]:
    """What `policy` (an int: `keep_last`) keeps of the job's `complete` backups (`choose_kept`,
    periods in `tz`), and the `partial` backups that go with them: those older than every kept
    backup, once the policy is full. A partial one never counts, so it never pushes out a
    complete one. Pure: the same for files and for objects."""
    if isinstance(policy, int):
        policy = Policy(last=policy)
    choice = choose_kept([(item, taken_time(item)) for item in complete], policy, tz)
    doomed = list(choice.doomed)
    if choice.full and choice.kept:
        oldest = min(_taken_at(item) for item in choice.kept)
        doomed += [item for item in partial if _taken_at(item) < oldest]
    doomed.sort(key=_taken_at)
    return Pruning(doomed, choice.kept)




def partial_name(name: str) -> str:
    """The name a backup that is not whole is kept under (`<job>-<UTC time>-partial.db`)."""
    return name.removesuffix(BACKUP_SUFFIX) + PARTIAL_MARK + BACKUP_SUFFIX


def backup_name(job: str, now: datetime, taken: Iterable[str] = ()) -> str:
    """`<job>-20261126T001544.123Z.db`: names sort by time, which retention relies on; a name in
    `taken` (complete or partial) moves on by a millisecond."""
    used = set(taken)
    when = now.astimezone(UTC)
    while True:
        name = f"{job}-{when.strftime('%Y%m%dT%H%M%S')}.{when.microsecond // 1000:03d}Z{BACKUP_SUFFIX}"
        if name not in used and partial_name(name) not in used:
            return name
        when += timedelta(milliseconds=1)


def _scoped(job: BackupJob, result: BackupResult) -> dict[str, Any]:
    dependencies = result.crawl.scope.dependencies
    if job.scope.everything:
        return {}
    return {"include": job.include, "exclude": job.exclude, "dependencies": [d.line() for d in dependencies[:20]]}


def judge_backup(job: BackupJob, result: BackupResult) -> tuple[dict[str, Any], bool]:
    """A run's summary of the backup it made, and whether the backup is whole: everything read,
    every file downloaded, and not emptier than the job's newest complete backup."""
    summary: dict[str, Any] = {
        "status": result.crawl.status,
        "objects": sum(result.crawl.stats.objects.values()),
        "held": result.objects,
        "requests": result.requests,
        "retries": result.retries,
        "rate_limited": result.rate_limited,
        "errors": result.crawl.stats.errors[:20],
        **_scoped(job, result),
    }
    complete = result.crawl.status == "complete"
    if result.emptier is not None:
        complete = False
        summary["reason"] = f"the backup {result.emptier}: kept as partial, nothing pruned"
        summary["warnings"] = [summary["reason"]]
    if result.files is not None:
        summary["files"] = {"downloaded": result.files.downloaded, "skipped": result.files.skipped, "failed": len(result.files.failed)}
        complete = complete and not result.files.failed
    return summary, complete
