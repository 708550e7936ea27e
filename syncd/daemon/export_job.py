"""One run of an `export` job: the documentation's history as a Git repository.

The job reads its source into a mirror file of its own (`STATE_DIR/exports/<job>.db`, so it
neither waits for nor blocks the jobs that write the state, on SQLite or PostgreSQL alike),
incrementally as a sync job does (with `with_files`, the file binaries it lacks into a blob
folder beside it); exports it into its repository (`syncd export --git`: the
Git Sync layout and every object as JSON under `.syncd/`), commits what changed with a message
that says what (`syncd.read.export.git_history`), and pushes the branch when the job has a
`push` remote. So each run that found a change is one commit, and a run that found none makes
none.

A failed push fails the run (`RunFailed`, its summary kept: the commit it made and why the
push failed); the commit stays in the repository and the next run pushes it with its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from syncd.config import Settings
from syncd.config.jobs import ExportJob
from syncd.daemon.metrics import DaemonMetrics
from syncd.daemon.progress import current as run_progress
from syncd.daemon.reasons import sync_reason
from syncd.daemon.run_end import RunFailed
from syncd.daemon.run_history import Outcome
from syncd.files import private_dir
from syncd.read.backup import blobs_dir, file_rows
from syncd.read.blob_download import MAX_DOWNLOADS, download_files
from syncd.read.blobs import BlobStore
from syncd.read.export import export_mirror
from syncd.read.export.git_history import GitExport, commit_export, push_export
from syncd.read.sync import sync_into

__all__ = ["export_folder", "export_repository", "run_export"]


def export_folder(settings: Settings) -> Path:
    return settings.state_dir / "exports"


def export_repository(settings: Settings, job: ExportJob) -> Path:
    """Where the job's Git repository is: its `repository`, else `STATE_DIR/exports/<job>`."""
    return job.repository if job.repository is not None else export_folder(settings) / job.name


async def run_export(settings: Settings, job: ExportJob, metrics: DaemonMetrics, full: bool) -> tuple[Outcome, dict[str, Any]]:
    """Sync, export, commit, push (module docstring): the run's outcome and summary."""
    private_dir(export_folder(settings))
    db = export_folder(settings) / f"{job.name}.db"
    result, client = await sync_into(
        settings, job.source, db, job=job.name, full=full, on_progress=run_progress().reading, lists_every=job.full_every
    )
    tenant = settings.tenant(job.source.tenant).name
    repository = export_repository(settings, job)
    files = None
    if job.with_files:  # each binary fetched once: those the blob folder holds are skipped
        rows = await anyio.to_thread.run_sync(file_rows, db)
        downloads = min(settings.tenant(job.source.tenant).concurrency, MAX_DOWNLOADS)
        files = await download_files(rows, BlobStore(blobs_dir(db)), concurrency=downloads, on_progress=run_progress().files)

    def export_and_commit() -> tuple[Any, GitExport]:
        report = export_mirror(db, repository, tenant=tenant, org=result.org, records=True)
        return report, commit_export(repository)

    report, history = await anyio.to_thread.run_sync(export_and_commit)
    if job.push:
        push = job.push
        history = await anyio.to_thread.run_sync(lambda: push_export(history, push, token_env=job.push_token_env))
    outcome: Outcome = "succeeded" if result.status == "complete" and not (files and files.failed) else "partial"
    summary: dict[str, Any] = {
        "full": full,
        "status": result.status,
        "changed": result.summary.by_op(),
        "objects_read": sum(result.stats.objects.values()),
        "skipped_scopes": result.stats.skipped_scopes,
        "requests": client.stats.requests,
        "retries": client.stats.retries,
        "rate_limited": client.stats.rate_limited,
        "errors": result.stats.errors[:20],
        "exported": {"spaces": report.spaces, "pages": report.pages, "files": report.files, "written": report.written, "removed": report.removed},
        "git": history.as_dict(),
        "commit": history.commit,
        "remote": history.remote,
    }
    if files is not None:
        summary["files"] = {"downloaded": files.downloaded, "skipped": files.skipped, "failed": len(files.failed)}
        summary["errors"] += [f"file {row}: {why}" for row, why in list(files.failed.items())[:10]]
    metrics.set_export(job.name, history.commit, history.remote, history.pushed)
    if history.pushed is False:
        summary["reason"] = f"{history.push_error}: the commit {str(history.commit)[:12]} stays in {repository}, and the next run pushes it"
        raise RunFailed(summary["reason"], summary)
    summary["reason"] = sync_reason(outcome, summary)
    return outcome, summary
