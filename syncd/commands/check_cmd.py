"""`syncd check BACKUP.db`: verify a backup, reading only (`syncd.read.check`).

Exit codes: 0 the backup is whole; 1 problems were found (one line each, then a summary); 2
the file is no syncd backup or cannot be read at all (one line, `syncd: error: ...`); 130/143
stopped by SIGINT/SIGTERM (`syncd.interrupt`), the backup only read. With
`--json` the report is one JSON document on stdout (schema `syncd/schemas/check.json`) and
the lines go to stderr.
"""

from __future__ import annotations

from pathlib import Path

import typer

from syncd import interrupt
from syncd.commands.file_args import backup_file
from syncd.commands.machine_output import emit, human_console
from syncd.config.storage import ObjectUrl
from syncd.read.check import CheckReport, check_backup
from syncd.safe_text import markup

EXIT_PROBLEMS = 1


def _size(count: int) -> str:
    """`532 bytes`, `1.2 MB`: blob totals people read at a glance."""
    if count < 1000:
        return f"{count} bytes"
    value = float(count)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if value < 1000:
            break
    return f"{value:.1f} {unit}"


def summary(report: CheckReport) -> str:
    """`FILE: healthy (...)` or `FILE: 2 problems (...)`: what was checked, in one line."""
    parts = [f"SQLite integrity {report.integrity}"]
    if report.objects is not None:
        tenants = ", ".join(report.tenants) or "no tenant"
        parts.append(f"{report.runs} run{'s' if report.runs != 1 else ''} of {tenants}, {report.objects} objects")
    if report.file_rows is not None:
        parts.append(f"{report.file_rows} file rows")
    if report.blobs_folder is not None:
        parts.append(f"{report.blobs} blobs hashed ({_size(report.blob_bytes)})")
    count = len(report.problems)
    state = "healthy" if report.healthy else f"{count} problem{'s' if count != 1 else ''}"
    return f"{report.name}: {state} ({'; '.join(parts)})"


def check(
    backup: str = typer.Argument(
        ..., metavar="BACKUP.db",
        help="The backup file (its BACKUP.blobs folder, when there is one, is checked too), or s3://BUCKET/PREFIX/NAME.db with the blobs it names.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (schemas/check.json); the lines go to stderr."),
    config: Path | None = typer.Option(None, "--config", "-c", help="Configuration file, for the [storage] settings of a backup in object storage."),
) -> None:
    """Verify a backup, reading only: SQLite integrity, every blob's hash, every file's blob present."""
    from syncd.storage.destination import location

    place = location(backup)
    if isinstance(place, Path):
        path = backup_file(place, "check")
        with interrupt.stoppable("the backup was only read") as stop:  # SIGINT/SIGTERM: exit 130/143
            report = check_backup(path, on_blob=lambda size: stop.check())
    else:
        report = _check_stored(place, config)
    shown = human_console(as_json)
    for problem in report.problems:
        shown.print(f"[red]{markup(problem.kind)}[/red]: {markup(problem.subject)}: {markup(problem.message)}", soft_wrap=True)
    for note in report.notes:
        shown.print(f"note: {markup(note)}", soft_wrap=True)
    shown.print(("[green]" if report.healthy else "[red]") + markup(summary(report)) + ("[/green]" if report.healthy else "[/red]"), soft_wrap=True)
    if as_json:
        emit(report.to_json())
    raise typer.Exit(0 if report.healthy else EXIT_PROBLEMS)


def _check_stored(place: ObjectUrl, config: Path | None) -> CheckReport:
    """A backup in object storage, fetched (its object, manifest and blobs) into a staging
    folder and checked there as a local one; what differs from what was uploaded (the object's
    sha256 in its metadata, a manifest's name) is a problem too. Subjects name the bucket's keys."""
    from syncd.config import load_settings
    from syncd.read.blobs import MANIFEST
    from syncd.read.check import Problem
    from syncd.storage import fetched_backup

    settings = load_settings(config)
    with fetched_backup(settings, place) as fetched, interrupt.stoppable("the backup was only read") as stop:
        report = check_backup(fetched.path, on_blob=lambda size: stop.check())
    blobs = f"{place.at(place.folder)}blobs/"
    local = f"{fetched.path.stem}.blobs/"
    names = {str(fetched.path): str(place), f"{local}{MANIFEST}": fetched.manifest or f"{place} (no manifest)"}

    def named(subject: str) -> str:
        if subject in names:
            return names[subject]
        return blobs + subject.removeprefix(local) if subject.startswith(local) else subject

    report.problems = [Problem(p.kind, named(p.subject), p.message.replace(local, blobs)) for p in report.problems]
    report.problems += [Problem(kind, subject, message) for kind, subject, message in fetched.problems]
    report.notes = [note.replace(f"({local[:-1]})", f"(none named by {place})") for note in report.notes]
    report.shown, report.shown_blobs = str(place), blobs if report.blobs_folder is not None else None
    return report
