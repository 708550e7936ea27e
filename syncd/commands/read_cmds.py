"""`syncd sync`, `syncd diff`, `syncd status`: the read side on the command line.

Exit codes: 0 done; 1 an error; 2 bad configuration or arguments; 3 the crawl finished
partial (something could not be read: what was read is merged, nothing unread is deleted);
130 interrupted (the previous snapshot stays current). A damaged state file is exit 2, a full
disk 1, a read-only or unwritable place 2 (one line each, see `syncd.cli`).

Everything shown that came from the server or a file (titles, ids, error messages, paths)
goes through `syncd.safe_text`: never read as markup, no control characters.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from syncd import interrupt
from syncd.commands.change_lines import change_lines
from syncd.commands.file_args import backup_file
from syncd.commands.machine_output import emit, human_console
from syncd.commands.progress import CrawlProgress, ExportProgress
from syncd.commands.scope_options import ExcludeOption, IncludeOption, print_scope, scope_json, scope_from
from syncd.commands.tables import Col, fitted_table
from syncd.config import Settings, TargetRef, load_settings, parse_target_ref
from syncd.errors import UsageError
from syncd.read.crawl_stats import CrawlResult
from syncd.safe_text import cell, clean, markup
from syncd.safe_text import console as make_console
from syncd.state import ChangeSummary, StateStore, StateError, summarise

if TYPE_CHECKING:
    from syncd.read.export.git_history import GitExport
    from syncd.read.sync import StateLocation

EXIT_PARTIAL = 3
ONLY_READ = "the file was only read"
"""What a stopped `status` or `diff` leaves (SIGINT/SIGTERM: exit 130/143, `syncd.interrupt`)."""
MISSING_SHOWN = 20
ConfigOption = typer.Option(None, "--config", "-c", help="Configuration file (default: config/syncd.toml when present).")
DbOption = typer.Option(None, "--db", help="Mirror file (default: STATE_DIR/syncd.db).")

console = make_console()


def settings_and_ref(config: Path | None, ref: str) -> tuple[Settings, TargetRef]:
    settings = load_settings(config)
    return settings, parse_target_ref(ref, settings)


def existing_db(path: StateLocation) -> StateLocation:
    if isinstance(path, Path) and not path.exists():  # (a state_url: StateStore says what is wrong)
        raise UsageError(f"{path}: no such mirror file (run `syncd sync` or `syncd backup` first)")
    return path


def summary_table(summary: ChangeSummary, title: str) -> Table:
    table = Table(title=cell(title))
    table.add_column("kind")
    for op in ("created", "updated", "moved", "deleted"):
        table.add_column(op, justify="right")
    for kind, *counts in summary.rows():
        table.add_row(cell(kind), *(str(n) if n else "" for n in counts))
    totals = summary.by_op()
    table.add_row("[bold]total[/bold]", *(f"[bold]{totals.get(op, 0)}[/bold]" for op in ("created", "updated", "moved", "deleted")))
    return table


def report_crawl(result: CrawlResult, requests: int, label: str) -> int:
    """Print what a crawl did; the exit code says whether it was complete."""
    stats = result.stats
    objects = sum(stats.objects.values())
    if result.summary:
        console.print(summary_table(result.summary, f"{label}: changes in run {result.run}"))
    else:
        console.print(f"{markup(label)}: no changes (run {result.run})")
    console.print(
        f"run {result.run} {markup(result.status)}: {objects} objects read with {requests} requests, "
        f"{stats.skipped_scopes} unchanged spaces skipped, {stats.failed_listings} listings failed"
    )
    if stats.lists_not_read:
        console.print(
            f"  lists without a change token (members, teams, sites, ...) of {len(stats.lists_not_read)} organization(s) "
            f"not read, recently read in full: next read {min(stats.lists_not_read.values())} UTC (--full reads them now)"
        )
    return crawl_warnings(result, console)


def crawl_warnings(result: CrawlResult, out: Console) -> int:
    """What a partial crawl could not read, on `out`; the exit code (3 partial, else 0)."""
    if result.status != "complete":
        for error in result.stats.errors[:10]:
            out.print(f"  [yellow]could not read[/yellow] {markup(error)}")
        out.print("[yellow]partial run: what could not be read keeps its previous state; run sync again to retry it[/yellow]")
        return EXIT_PARTIAL
    return 0


def crawl_document(result: CrawlResult, requests: int, tenant: str) -> dict[str, Any]:
    """A crawl's report for `--json` (schemas/sync.json); its scope names the organization by
    id, also when it was addressed by title."""
    stats = result.stats
    return {
        "run": result.run,
        "tenant": tenant,
        "scope": f"{tenant}:{result.org}" if result.org else tenant,
        "status": result.status,
        "objects": sum(stats.objects.values()),
        "objects_by_kind": dict(sorted(stats.objects.items())),
        "requests": requests,
        "skipped_spaces": stats.skipped_scopes,
        "lists_not_read": dict(stats.lists_not_read),
        "failed_listings": stats.failed_listings,
        "errors": list(stats.errors),
        "changes": result.summary.to_dict(),
    } | scope_json(result.scope.scope, result.scope.dependencies, result.scope.left_out)


def sync(
    target: str = typer.Argument(..., metavar="TENANT[:ORG]", help="A configured tenant, optionally one organization."),
    db: Path | None = DbOption,
    full: bool = typer.Option(
        False, "--full", help="Read everything: spaces whatever their change tokens, and the lists without one (read once a day otherwise)."
    ),
    config: Path | None = ConfigOption,
    as_json: bool = typer.Option(False, "--json", help="Print the run's report as JSON (schemas/sync.json); warnings go to stderr."),
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
) -> None:
    """Crawl a tenant (or one organization) into the mirror and print the changes."""
    from syncd.read.sync import SYNC_LISTS_EVERY, default_db, shown_state, sync_into

    scope = scope_from(include, exclude)
    settings, ref = settings_and_ref(config, target)
    db_path = db or default_db(settings)
    with CrawlProgress(f"sync {ref}") as progress:  # SIGINT/SIGTERM: the run is cancelled, exit 130/143
        result, client = interrupt.run(
            lambda: sync_into(settings, ref, db_path, full=full, on_progress=progress.update, scope=scope, lists_every=SYNC_LISTS_EVERY)
        )
    if as_json:
        emit(crawl_document(result, client.stats.requests, settings.tenant(ref.tenant).name) | {"db": shown_state(db_path)})
        print_scope(human_console(True), scope, result.scope.dependencies, result.scope.left_out)
        raise typer.Exit(crawl_warnings(result, human_console(True)))
    code = report_crawl(result, client.stats.requests, f"sync {ref}")
    print_scope(console, scope, result.scope.dependencies, result.scope.left_out)
    raise typer.Exit(code)


def _pick_runs(store: StateStore, run_a: int | None, run_b: int | None) -> tuple[int, int]:
    merged = [r for r in store.runs() if r["status"] in ("complete", "partial")]
    if run_b is None:
        if not merged:
            raise UsageError("the mirror has no finished run yet")
        run_b = merged[-1]["id"]
    b = store.run(run_b)
    if b is None:
        raise UsageError(f"no run {run_b} in the mirror")
    if run_a is None:
        earlier = [r for r in merged if r["id"] < run_b and r["tenant"] == b["tenant"] and r["scope_ref"] == b["scope_ref"]]
        if not earlier:
            raise UsageError(f"run {run_b} has no earlier run of {b['scope_ref']} to compare with; give --run A")
        run_a = earlier[-1]["id"]
    return run_a, run_b


def diff(
    db: Path | None = DbOption,
    run: list[int] = typer.Option([], "--run", help="Run ids: --run A --run B (default: the last two runs)."),
    show_all: bool = typer.Option(False, "--all", help="List every change and every changed field (default: the first 50 changes)."),
    as_json: bool = typer.Option(False, "--json", help="Print the changes as JSON (schemas/diff.json)."),
    config: Path | None = ConfigOption,
) -> None:
    """The changes between two runs of the mirror (default: the last two)."""
    from syncd.read.sync import default_db

    if len(run) > 2:
        raise UsageError("give --run at most twice (A then B)")
    db_path = existing_db(db or default_db(load_settings(config)))
    with interrupt.stoppable(ONLY_READ), StateStore(db_path, readonly=True) as store:  # works on read-only media, beside a writer
        run_a, run_b = _pick_runs(store, run[0] if len(run) == 2 else None, run[-1] if run else None)
        changes = store.diff(run_a, run_b)
        lines = [] if as_json else change_lines(changes, store.location, every=show_all)
    if as_json:
        keep = ("kind", "id", "op", "title", "parent_id", "old_parent_id", "position", "old_position", "old_hash", "new_hash",
                "fields", "fields_omitted")
        print(json.dumps({"from": run_a, "to": run_b, "changes": [{k: c.get(k) for k in keep} for c in changes]}, indent=2))
        return
    summary = summarise(changes)
    if not summary:
        console.print(f"no changes between run {run_a} and run {run_b}")
        return
    console.print(summary_table(summary, f"changes from run {run_a} to run {run_b}"))
    for line in lines:  # titles and values are the server's: text, never markup
        console.print(clean(line), markup=False, highlight=False, soft_wrap=True)


RUN_COLUMNS = (
    Col("run", justify="right", no_wrap=True),
    Col("job", fold_at=14),
    Col("scope", fold_at=14),  # TENANT:ORG_ID folds onto a second line on a narrow terminal
    Col("started (UTC)", no_wrap=True),
    Col("status", min_width=9),  # `cancelled` stays whole, a reason wraps
    Col("objects", justify="right", no_wrap=True),
    Col("requests", justify="right", no_wrap=True, drop=2),
    Col("changes", justify="right", no_wrap=True, drop=3),
    Col("errors", justify="right", no_wrap=True, drop=1),
)


def runs_table(console: Console, runs: list[dict[str, Any]], db_path: StateLocation) -> Table:
    """The runs of a mirror for `status`, fitted to `console`'s width (`syncd.commands.tables`)."""
    rows = []
    for r in runs:
        stats: dict[str, Any] = r.get("stats") or {}
        changes = (stats.get("mirror") or {}).get("changes")
        rows.append((
            str(r["id"]),
            cell(r["job"]),
            cell(r["scope_ref"]),
            cell(str(r["started_at"])[:16].replace("T", " ")),
            cell(r["status"] + (f" ({r['reason']})" if r.get("reason") else "")),
            str(sum((stats.get("objects") or {}).values()) or ""),
            str(stats.get("requests", "")),
            str(sum(sum(ops.values()) for ops in changes.values())) if isinstance(changes, dict) else "",
            str(stats.get("failed_listings", "")),
        ))  # fmt: skip
    from syncd.read.sync import shown_state

    return fitted_table(console, cell(f"runs in {shown_state(db_path)}"), RUN_COLUMNS, rows)


def status(
    db: Path | None = DbOption,
    as_json: bool = typer.Option(False, "--json", help="Print the runs as JSON (schemas/status.json)."),
    config: Path | None = ConfigOption,
) -> None:
    """Runs recorded in the mirror, with their outcome and statistics (the file is only read)."""
    from syncd.read.sync import default_db, shown_state

    db_path = existing_db(db or default_db(load_settings(config)))
    try:
        with interrupt.stoppable(ONLY_READ), StateStore(db_path, readonly=True) as store:
            runs = store.runs()
            counts = {tenant: store.counts(tenant) for tenant in sorted({r["tenant"] for r in runs})}
    except sqlite3.DatabaseError as exc:  # the header and schema read, a later page is damaged
        raise StateError(f"{shown_state(db_path)} cannot be read, it is damaged: {exc}") from None
    if as_json:
        emit({"runs": runs, "objects": counts})
        return
    if not runs:
        console.print(f"no runs yet in {markup(db_path)}")
        return
    console.print(runs_table(console, runs, db_path), crop=False)
    for tenant, kinds in counts.items():
        console.print(f"{markup(tenant)}: {sum(kinds.values())} current objects in {len(kinds)} kinds")


def backup(
    target: str = typer.Argument(..., metavar="TENANT[:ORG]", help="A configured tenant, optionally one organization."),
    out: str = typer.Option(
        ..., "--out", "-o", help="The backup file to write (a syncd mirror file), or s3://BUCKET/PREFIX/NAME.db in object storage."
    ),
    with_files: bool = typer.Option(False, "--with-files", help="Also download file binaries into OUT's .blobs folder."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace OUT if it exists (never with an emptier backup: see --force)."),
    force: bool = typer.Option(
        False, "--force", help="With --overwrite: replace OUT even with a backup holding no object, or fewer than half of OUT's."
    ),
    config: Path | None = ConfigOption,
    as_json: bool = typer.Option(False, "--json", help="Print the backup's report as JSON (schemas/backup.json); warnings go to stderr."),
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
) -> None:
    """Back up everything the token sees (or one organization) into one SQLite file."""
    from rich.markup import escape

    from syncd.read.backup import backup as run_backup
    from syncd.read.backup import blobs_dir
    from syncd.storage.destination import location

    place = location(out)
    scope = scope_from(include, exclude)
    settings, ref = settings_and_ref(config, target)
    uploaded = None
    with CrawlProgress(f"backup {ref}") as progress:
        if isinstance(place, Path):
            result = interrupt.run(
                lambda: run_backup(
                    settings, ref, place, with_files=with_files, overwrite=overwrite, force=force, on_progress=progress.update, scope=scope,
                    on_files=progress.files,
                ),
                what=f"the unfinished backup is removed, {out} is left as it was",
            )
        else:
            from syncd.storage import backup_to_bucket

            stored = interrupt.run(
                lambda: backup_to_bucket(
                    settings, ref, place, with_files=with_files, overwrite=overwrite, force=force, on_progress=progress.update, scope=scope,
                    on_files=progress.files,
                ),
                what=f"the backup was not uploaded whole: no object was written at {place}",
            )
            result, uploaded = stored.result, stored.uploaded
    written = str(place) if uploaded is not None else str(result.path)
    stats = result.crawl.stats
    shown = human_console(as_json, console)
    if not as_json:
        shown.print(f"backup of {markup(ref)} written to {markup(written)}: {sum(stats.objects.values())} objects, {result.requests} requests")
    print_scope(shown, scope, result.crawl.scope.dependencies, result.crawl.scope.left_out)
    code = 0
    if result.crawl.status != "complete":
        for error in stats.errors[:10]:
            shown.print(f"  [yellow]could not read[/yellow] {markup(error)}")
        shown.print("[yellow]the backup is partial: what could not be read is missing from it[/yellow]")
        code = EXIT_PARTIAL
    if result.emptier is not None:
        if force:
            shown.print(f"[yellow]the backup {escape(result.emptier)} (--force: written all the same)[/yellow]")
        else:
            shown.print(f"[yellow]the backup {escape(result.emptier)}: check the token's access[/yellow]")
            code = EXIT_PARTIAL
    if result.files is not None:
        files = result.files
        if not as_json and uploaded is None:
            shown.print(
                f"files: {files.downloaded} downloaded, {files.skipped} already present, {len(files.failed)} failed, "
                f"{files.bytes} bytes in {markup(blobs_dir(result.path))}"
            )
        elif not as_json and uploaded is not None:
            shown.print(
                f"files: {files.downloaded} downloaded, {len(files.failed)} failed; {uploaded.blobs_sent} blobs uploaded "
                f"({uploaded.blob_bytes} bytes), {uploaded.blobs_present} already in {markup(str(place.at(place.folder)))}blobs/"
            )
        for row_id, reason in list(files.failed.items())[:10]:
            shown.print(f"  [yellow]file {markup(row_id)}[/yellow]: {markup(reason)}")
        if files.failed:
            code = EXIT_PARTIAL
    if as_json:
        document = crawl_document(result.crawl, result.requests, settings.tenant(ref.tenant).name)
        files_part = None
        if result.files is not None:
            folder = f"{place.at(place.folder)}blobs/" if uploaded is not None else str(blobs_dir(result.path))
            files_part = {
                "downloaded": result.files.downloaded, "skipped": result.files.skipped, "failed": dict(result.files.failed),
                "bytes": result.files.bytes, "folder": folder,
            }  # fmt: skip
        stored_part = {"stored": uploaded.to_json()} if uploaded is not None else {}
        emit(document | {"file": written, "held_objects": result.objects, "emptier": result.emptier, "files": files_part} | stored_part)
    raise typer.Exit(code)


def export(
    source: str = typer.Argument(..., metavar="FILE.db", help="A backup or mirror file, or a backup in object storage (s3://BUCKET/PREFIX/NAME.db)."),
    out_dir: Path = typer.Argument(..., metavar="DIR", help="The folder to write (created, or a previous export)."),
    tenant: str | None = typer.Option(None, "--tenant", help="The tenant to export when the file holds several."),
    org: str | None = typer.Option(None, "--org", help="Only this organization (id or exact title)."),
    force: bool = typer.Option(
        False, "--force", help="Replace a previous export even when this one would remove all or more than half of its files."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the export's report as JSON (schemas/export.json); warnings go to stderr."),
    include: list[str] = IncludeOption,
    exclude: list[str] = ExcludeOption,
    git: bool = typer.Option(
        False, "--git", help="Keep DIR as a Git repository: commit the export when something changed, the message saying what (with every object as JSON under .syncd/, so `syncd restore DIR@COMMIT` works)."
    ),
    push: str | None = typer.Option(
        None, "--push", metavar="REMOTE", help="With --git: push the branch to this remote (an SSH or HTTPS URL, or a path), fast-forward only."
    ),
    push_token_env: str | None = typer.Option(
        None, "--push-token-env", metavar="NAME", help="With --push to an HTTPS remote: the environment variable that holds its password or token."
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="Configuration file, for the [storage] settings of a backup in object storage."),
) -> None:
    """Export a backup (only read) to a folder per space in GitBook's Git Sync layout, and JSON for the rest;
    with --git, as a commit of the folder's Git history."""
    from syncd.storage.destination import location

    if (push or push_token_env) and not git:
        raise UsageError("--push and --push-token-env go with --git")
    place = location(source)
    if isinstance(place, Path):
        _export(backup_file(place, "export"), str(place), out_dir, tenant, org, force, as_json, include, exclude, git, push, push_token_env)
        return
    from syncd.storage import fetched_backup

    with fetched_backup(load_settings(config), place) as fetched:
        _export(fetched.path, str(place), out_dir, tenant, org, force, as_json, include, exclude, git, push, push_token_env)


def _export(
    source: Path, shown_source: str, out_dir: Path, tenant: str | None, org: str | None, force: bool, as_json: bool,
    include: list[str], exclude: list[str], git: bool, push: str | None, push_token_env: str | None,
) -> None:  # fmt: skip
    from dataclasses import asdict

    from syncd.read.export import export_mirror

    scope = scope_from(include, exclude)
    stopping = interrupt.stoppable(f"the export stopped (every file in {out_dir} is whole, none half-written); run it again")
    with stopping as stop, ExportProgress(f"export {shown_source.rpartition('/')[2]}") as progress:

        def spaces(done: int, total: int | None, files: int) -> None:
            progress.update(done, total, files)
            stop.check()

        report = export_mirror(source, out_dir, tenant=tenant, org=org, force=force, scope=scope, on_progress=spaces, records=git)
    history = _commit(out_dir, push, push_token_env) if git else None
    shown = human_console(as_json, console)
    if as_json:
        emit({"source": shown_source, "out": str(out_dir), **asdict(report), **scope_json(scope, report.dependencies), "git": history.as_dict() if history else None})
    else:
        shown.print(
            f"exported {report.organizations} organization(s), {report.spaces} spaces, {report.pages} pages, "
            f"{report.change_requests} change requests, {report.assets} file binaries to {markup(out_dir)}: {report.files} files "
            f"({report.written} written, {report.removed} removed)"
        )
    print_scope(shown, scope, report.dependencies)
    missing = report.missing_binaries
    if missing:
        shown.print(
            f"[yellow]{len(missing)} file binaries are not in the backup[/yellow] (back up with --with-files to "
            "include them); pages still link to where they would be:"
        )
        for path in missing[:MISSING_SHOWN]:
            shown.print(f"  [yellow]missing[/yellow] {markup(path)}", soft_wrap=True)
        if len(missing) > MISSING_SHOWN:
            shown.print(f"  ... and {len(missing) - MISSING_SHOWN} more")
    if history is not None:
        _print_history(shown, history)
        if history.pushed is False:
            raise typer.Exit(1)


def _commit(out_dir: Path, push: str | None, token_env: str | None) -> GitExport:
    from syncd.read.export.git_history import commit_export, push_export

    history = commit_export(out_dir)
    return push_export(history, push, token_env=token_env) if push else history


def _print_history(shown: Console, history: GitExport) -> None:
    """What `export --git` did to the repository: the commit (or none), then the push."""
    from syncd.read.export.git_history import BRANCH

    if history.committed:
        shown.print(f"committed {history.commit}: {markup(history.subject or '')}", soft_wrap=True)
    else:
        where = f" (the newest commit is {history.commit})" if history.commit else ""
        shown.print(f"nothing changed since the last commit: no commit{where}")
    if history.pushed:
        shown.print(f"pushed {BRANCH} to {markup(history.remote or '')}", soft_wrap=True)
    elif history.pushed is False:
        shown.print(f"[red]{markup(history.push_error or 'the push failed')}[/red]; the commit stays in the repository, and the next push sends it", soft_wrap=True)
