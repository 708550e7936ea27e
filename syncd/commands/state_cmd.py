"""`syncd state migrate --from STATE_DIR --to postgresql://...`: move a SQLite state into the
PostgreSQL state a fleet shares (issue 13; the work is `syncd.state.migrate_state`, the daemon's
run history's part of it `syncd.daemon.history_copy`).

Exit codes: 0 copied and verified; 1 the server cannot be used, or what it holds after the copy
is not what the file holds (nothing committed); 2 nothing to copy or a refusal (no state, a
damaged file, runs still open, a live writer, a target that is not empty, not a URL): one
line each. Rows copied per table go to stderr while it works; with `--json` the report is one
JSON document on stdout (schema `syncd/schemas/state-migrate.json`) and the rest goes to stderr.
"""

from __future__ import annotations

from pathlib import Path

import typer

from syncd.commands.machine_output import emit, human_console
from syncd.commands.progress import StepDisplay
from syncd.commands.tables import Col, fitted_table
from syncd.safe_text import cell, markup
from syncd.safe_text import console as make_console

app = typer.Typer(help="Move the state (mirror, id map, journal, run history) between backends.", no_args_is_help=True)
console = make_console()
COLUMNS = (Col("table", no_wrap=True), Col("from", no_wrap=True), Col("rows", justify="right"), Col("in PostgreSQL", justify="right"))


@app.callback()
def _group() -> None:
    """Move the state (mirror, id map, journal, run history) between backends."""


@app.command("migrate")
def migrate(
    source: Path = typer.Option(
        ..., "--from", metavar="STATE_DIR", help="The state directory (its syncd.db and daemon.db), or one state file."
    ),
    target: str = typer.Option(
        ..., "--to", metavar="URL", envvar="SYNCD_STATE_URL", show_envvar=True,
        help="The PostgreSQL state, postgresql://USER@HOST/DB (empty; its tables are created). "
        "A URL with a password is best given in SYNCD_STATE_URL.",
    ),  # fmt: skip
    with_open_runs: bool = typer.Option(
        False, "--with-open-runs",
        help="Copy runs a dead process left open as they are (the next writer of their tenant on PostgreSQL ends them as failed).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (schemas/state-migrate.json); the rest goes to stderr."),
) -> None:
    """Copy a SQLite state into an empty PostgreSQL state in one transaction, and verify it."""
    from syncd.daemon.history_copy import DaemonHistoryCopy  # psycopg: only for this command
    from syncd.state.migrate_state import migrate_state

    shown = human_console(as_json, console)
    with StepDisplay("state migrate", log_every=2.0) as display:
        report = migrate_state(
            source, target, with_open_runs=with_open_runs, progress=lambda table, done, total: display.step(table, done, total),
            part_of=DaemonHistoryCopy.of,  # the daemon's run history moves with the mirror
        )
    rows = [(cell(t.table), cell(t.source), str(t.rows), str(t.copied)) for t in report.tables]
    shown.print(fitted_table(shown, cell(f"{report.source} -> {report.target}"), COLUMNS, rows), crop=False)
    objects = sum(sum(kinds.values()) for kinds in report.objects.values())
    shown.print(
        f"[green]verified[/green]: {sum(t.copied for t in report.tables)} rows in {len(report.tables)} tables, "
        f"{objects} current objects of {len(report.objects)} tenant(s) read back the same; next run id {report.next_run_id}",
        highlight=False,
    )
    notes = [
        (report.open_runs, f"open runs copied as they are: {', '.join(map(str, report.open_runs))} "
         "(the next writer of their tenant ends them as failed)"),
        (report.closed_daemon_runs, f"{report.closed_daemon_runs} daemon run(s) left queued or running were closed, as a daemon restart would"),
        (report.replaced_nul, f"{report.replaced_nul} value(s) held a NUL character, stored as U+FFFD (PostgreSQL text cannot hold one)"),
    ]  # fmt: skip
    for shown_when, line in notes:
        if shown_when:
            shown.print(line, highlight=False)
    shown.print(f"point state_url at {markup(report.target)} to use it", highlight=False)
    if as_json:
        emit(report.to_json())
