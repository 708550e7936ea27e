"""A run of a backup job whose `output` is in object storage (`s3://BUCKET/PREFIX/`).

The same backup as into a folder (`syncd.read.backup`, staged under the temporary directory),
judged the same way (`syncd.daemon.backups.judge_backup`), then uploaded complete or not at all
(`syncd.storage.upload`) under the name retention reads: `<job>-<UTC time>.db`, or
`...-partial.db` for one that is not whole. Only after a whole backup is in place does retention
delete the backups its policy lets go (one object each) and collect what no backup names any
more (`syncd.storage.pruning`). A failed upload fails the run, with the reason in words, and
prunes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from syncd.config import BackupJob, Settings
from syncd.config.cron import zone
from syncd.config.storage import parse_object_url
from syncd.daemon.backups import PARTIAL_MARK, backup_name, backup_names, choose_pruning, judge_backup, partial_name
from syncd.daemon.metrics import DaemonMetrics
from syncd.daemon.progress import current as run_progress
from syncd.daemon.reasons import backup_reason
from syncd.daemon.retention import Policy
from syncd.daemon.run_history import Outcome
from syncd.read.backup import backup
from syncd.storage.bucket import Bucket, open_bucket
from syncd.storage.destination import backup_metadata, held_in, staging
from syncd.storage.pruning import backups_in, collect_garbage, delete_objects
from syncd.storage.upload import upload_backup

__all__ = ["run_backup_to_bucket"]


async def run_backup_to_bucket(settings: Settings, job: BackupJob, metrics: DaemonMetrics) -> tuple[Outcome, dict[str, Any]]:
    """One run (module docstring): its outcome and summary; raises when the backup could not
    be made or uploaded (the daemon records the run as failed, with the error's words)."""
    assert job.output is not None
    place = parse_object_url(job.output, backup=False)
    prefix = place.key
    async with open_bucket(settings, place.bucket) as bucket:
        listed = await backups_in(bucket, prefix)
        complete_ones = backup_names(listed, job.name)
        newest = place.at(prefix + complete_ones[-1]) if complete_ones else None
        # Compared with the newest complete backup, by what its metadata says it holds.
        baseline = held_in(await bucket.head(newest.key), newest) if newest is not None else None
        name = backup_name(job.name, datetime.now(UTC), listed)
        with staging(settings, "upload") as folder:
            result = await backup(
                settings, job.source, folder / name, with_files=bool(job.with_files), baseline=baseline, scope=job.scope,
                on_progress=run_progress().reading, on_files=run_progress().files,
            )  # fmt: skip
            judged, complete = judge_backup(job, result)
            url = place.at(prefix + (name if complete else partial_name(name)))
            uploaded = await upload_backup(bucket, result.path, url, backup_metadata(result))
        summary: dict[str, Any] = {"file": str(url), "stored": uploaded.to_json(), **judged}
        if complete:
            await _prune(bucket, job, prefix, url.key, summary)
    metrics.backup_stored(job.name, str(url), datetime.now(UTC).timestamp())
    outcome: Outcome = "succeeded" if complete else "partial"
    summary["reason"] = backup_reason(outcome, summary)
    return outcome, summary


async def _prune(bucket: Bucket, job: BackupJob, prefix: str, made: str, summary: dict[str, Any]) -> None:
    """Retention after a whole backup: the policy's doomed backups deleted, then what no backup
    names any more collected (by the service's clock: the time the new backup was stored)."""
    if job.retention_policy():
        listed = await backups_in(bucket, prefix)
        pruning = choose_pruning(
            backup_names(listed, job.name), backup_names(listed, job.name, PARTIAL_MARK), Policy.of(job.retention_policy()), zone(job.timezone)
        )  # fmt: skip
        await delete_objects(bucket, [prefix + name for name in pruning.doomed])
        summary["pruned"] = list(pruning.doomed)
        summary["kept"] = dict(pruning.kept)
    stored = await bucket.head(made)
    if stored is not None:
        garbage = await collect_garbage(bucket, prefix, stored.modified)
        summary["collected"] = {"manifests": len(garbage.manifests), "blobs": len(garbage.blobs)}
