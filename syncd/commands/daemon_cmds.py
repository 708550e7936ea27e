"""`syncd serve`, `syncd jobs`, `syncd trigger`: run the daemon and talk to it.

Exit codes: 0 done (a stopped daemon exits 0); 1 a triggered run failed or ended partial
(`--wait`); 2 bad configuration, or the state directory is in use by another daemon;
3 no daemon answers.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from syncd import event_loop
from syncd.catalog import segment
from syncd.commands.machine_output import emit, human_console
from syncd.commands.progress import StepDisplay, show_run
from syncd.commands.read_cmds import ConfigOption
from syncd.commands.tables import Col, fitted_table
from syncd.config import format_duration, load_settings
from syncd.one_shot import window
from syncd.safe_text import cell, markup
from syncd.safe_text import console as make_console

console = make_console()
UrlOption = typer.Option(None, "--url", help="The daemon's control API (default: from STATE_DIR/daemon.json, else daemon.host/port).")
JsonOption = typer.Option(False, "--json", help="Print the daemon's answer as JSON (schemas/jobs.json, schemas/trigger.json).")


def serve(config: Path | None = ConfigOption) -> None:
    """Run the configured jobs on their schedules, with the control API, until SIGTERM/SIGINT."""
    from syncd.daemon.replica import daemon_for
    from syncd.logging import LOG_OPTIONS, configure_logging

    settings = load_settings(config)
    configure_logging(LOG_OPTIONS.get("format", settings.log_format), LOG_OPTIONS.get("level", settings.log_level))  # type: ignore[arg-type]
    if not settings.jobs:
        console.print("[yellow]no jobs configured: the daemon only serves its control API[/yellow]", highlight=False)
    with window(None):  # the daemon rides out a server's restart: its runs keep the whole retry budget
        event_loop.run(daemon_for(settings).serve)


def _relative(iso: str | None, now: datetime) -> str:
    """`in 12s` / `3m ago`: what a person wants from a timestamp in a status table."""
    if not iso:
        return "-"
    seconds = (datetime.fromisoformat(iso) - now).total_seconds()
    text = format_duration(round(abs(seconds))) if abs(seconds) >= 1 else "now"
    if text == "now":
        return text
    return f"in {text}" if seconds > 0 else f"{text} ago"


def jobs(
    config: Path | None = ConfigOption,
    url: str | None = UrlOption,
    as_json: bool = JsonOption,
) -> None:
    """List the running daemon's jobs: schedule, state, next run, last outcome."""
    from syncd.daemon.remote import ControlClient

    client = ControlClient.from_settings(load_settings(config), url)
    answer = anyio.run(client.call, "GET", "/jobs")
    if as_json:
        emit(answer)
        return
    console.print(jobs_table(console, answer["jobs"], client.url, datetime.now(UTC)), crop=False)


JOB_COLUMNS = (
    Col("job", fold_at=16),
    Col("kind", drop=1),
    Col("schedule"),
    Col("state", min_width=7),  # `running`, `waiting` stay whole
    Col("next run", no_wrap=True),
    Col("last run", min_width=9, fold_at=24),  # the outcome (`succeeded`) stays whole, an error wraps
    Col("last success", no_wrap=True, drop=2),
)


def jobs_table(console: Console, jobs: list[dict[str, Any]], url: str, now: datetime) -> Table:
    """The daemon's jobs for `syncd jobs`, fitted to `console`'s width (`syncd.commands.tables`)."""
    rows = []
    for job in jobs:
        last = job["last_run"]
        last_text = f"#{last['id']} {last['outcome']} ({last['seconds']:.1f}s)" if last else "-"
        said = last and (last.get("reason") or (last["error"] if last["outcome"] == "failed" else None))
        if said:
            last_text += f": {said}"  # why it is not a plain success, in the run's own words
        state = job["state"] + (f" (run #{job['current_run']})" if job["current_run"] else "")
        success = _relative(job["last_success_at"], now) if job["last_success_at"] else "never"
        row = (job["name"], job["kind"], job["schedule"], state, _relative(job["next_run_at"], now), last_text, success)
        rows.append([cell(text) for text in row])  # names and errors are outside text, never markup
    return fitted_table(console, cell(f"jobs of the daemon at {url}"), JOB_COLUMNS, rows)


def trigger(
    job: str = typer.Argument(..., help="The job to run now."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the run to end; exit 1 unless it succeeded."),
    timeout: float = typer.Option(3600.0, "--timeout", help="With --wait: give up waiting after this many seconds."),
    config: Path | None = ConfigOption,
    url: str | None = UrlOption,
    as_json: bool = JsonOption,
) -> None:
    """Run a job of the running daemon now (coalesced into one follow-up run if it is running)."""
    from syncd.daemon.remote import ControlClient

    client = ControlClient.from_settings(load_settings(config), url)
    answer = anyio.run(client.call, "POST", f"/jobs/{segment(job)}/run")
    run = answer["run"]
    shown = human_console(as_json, console)  # with --json, stdout is the JSON document alone
    if answer["status"] == "coalesced":
        shown.print(f"{markup(job)} is running: run #{run['id']} will follow it", highlight=False)
    else:
        shown.print(f"{markup(job)}: run #{run['id']} started", highlight=False)
    if not wait:
        if as_json:
            emit(answer)
        return
    run_id = run["id"]
    with StepDisplay(f"run #{run_id} of {job}") as display:  # stderr: a bar on a terminal, a log line elsewhere
        run = anyio.run(lambda: client.wait_run(run_id, timeout, on_poll=lambda seen: show_run(display, seen)))
    if as_json:
        emit({"status": answer["status"], "run": run})  # the answer's shape, with the run as it ended
        raise typer.Exit(0 if run["outcome"] == "succeeded" else 1)
    line = f"run #{run['id']} of {job}: {run['outcome']} in {run['seconds']:.1f}s"
    said = run.get("reason") or run["error"]  # one sentence: why it is not a plain success
    if said:
        line += f": {said}"
    console.print(markup(line), highlight=False)
    summary = run["summary"]
    if summary.get("file"):
        console.print(f"backup file: {markup(summary['file'])}", highlight=False)
    for text in history_lines(summary):
        console.print(markup(text), highlight=False)
    if run["outcome"] == "partial":
        for warning in summary.get("warnings", [])[:10]:
            console.print(f"  [yellow]warning: {markup(str(warning))}[/yellow]", highlight=False)
    raise typer.Exit(0 if run["outcome"] == "succeeded" else 1)


def history_lines(summary: dict[str, Any]) -> list[str]:
    """Where an export run's Git history went: its commit (new, or the one that stands), the remote."""
    git = summary.get("git")
    if not isinstance(git, dict) or not git.get("commit"):
        return []
    lines = [f"commit {git['commit']}: " + (str(git.get("subject")) if git.get("committed") else "nothing changed, no new commit")]
    if git.get("remote"):
        lines.append(f"remote {git['remote']}: " + ("pushed" if git.get("pushed") else "not pushed"))
    return lines
