"""`syncd pause`, `syncd resume`, `syncd cancel`: an operator holds a job or stops its run.

They talk to the running daemon as `syncd trigger` does (`syncd.daemon.remote.ControlClient`),
and say who asks (`user@host`), which the daemon keeps with the pause and in a cancelled run's
reason. Exit codes: 0 done (pausing a paused job, resuming one that was not paused: nothing to
do, said so); 1 the daemon refused (unknown job, no running run to cancel) or, with `cancel
--wait`, the run ended otherwise than cancelled; 3 no daemon answers.
"""

from __future__ import annotations

import getpass
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import typer

from syncd.catalog import segment
from syncd.commands.daemon_cmds import UrlOption, _relative
from syncd.commands.machine_output import emit, human_console
from syncd.commands.read_cmds import ConfigOption
from syncd.config import load_settings
from syncd.safe_text import markup
from syncd.safe_text import console as make_console

console = make_console()
JsonOption = typer.Option(False, "--json", help="Print the daemon's answer as JSON (schemas/pause.json, schemas/cancel.json).")


def operator() -> str:
    """Who asks, as the daemon records it: the local user at this host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "someone"
    return f"{user}@{socket.gethostname()} (syncd command line)"


def _ask(config: Path | None, url: str | None, job: str, action: str) -> tuple[Any, Any]:
    """The client, and the daemon's answer to `POST /jobs/JOB/ACTION` asked by `operator()`."""
    from syncd.daemon.remote import ControlClient

    client = ControlClient.from_settings(load_settings(config), url)
    return client, anyio.run(client.call, "POST", f"/jobs/{segment(job)}/{action}", {"by": operator()})


def _since(paused: dict[str, Any]) -> str:
    return f"since {_relative(paused['at'], datetime.now(UTC))}, by {paused['by']}"


def _tell(as_json: bool, answer: Any, lines: list[str]) -> None:
    """`lines` for a person (stderr with --json, each whole: a command in it stays one line), then the answer."""
    shown = human_console(as_json, console)
    for line in lines:
        shown.print(markup(line), highlight=False, soft_wrap=True)
    if as_json:
        emit(answer)


def pause(
    job: str = typer.Argument(..., help="The job to pause."),
    config: Path | None = ConfigOption,
    url: str | None = UrlOption,
    as_json: bool = JsonOption,
) -> None:
    """Pause a job of the running daemon: its schedule does not fire and triggers are refused
    until `syncd resume JOB` (a run in progress goes on: `syncd cancel JOB` ends it)."""
    _client, answer = _ask(config, url, job, "pause")
    view = answer["job"]
    if answer["status"] == "already paused":
        lines = [f"{job} was already paused ({_since(view['paused'])})"]
    else:
        lines = [f"{job} paused: its schedule does not fire and triggers are refused until `syncd resume {job}`"]
    if view["current_run"]:
        lines.append(f"run #{view['current_run']} goes on: `syncd cancel {job}` ends it")
    _tell(as_json, answer, lines)


def resume(
    job: str = typer.Argument(..., help="The job to resume."),
    config: Path | None = ConfigOption,
    url: str | None = UrlOption,
    as_json: bool = JsonOption,
) -> None:
    """Resume a paused job: its schedule fires again from its next time (the times it missed
    while paused give no run), and triggers are taken again."""
    _client, answer = _ask(config, url, job, "resume")
    view = answer["job"]
    if answer["status"] == "not paused":
        line = f"{job} was not paused"
    elif view["current_run"]:  # a run that went on through the pause has no next time yet
        line = f"{job} resumed: run #{view['current_run']} is running now"
    else:
        when = _relative(view["next_run_at"], datetime.now(UTC)) if view["next_run_at"] else "on trigger only"
        line = f"{job} resumed: next run {when}"
    _tell(as_json, answer, [line])


def cancel(
    job: str = typer.Argument(..., help="The job whose running run to cancel."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the run to end; exit 1 unless it ended cancelled."),
    timeout: float = typer.Option(60.0, "--timeout", help="With --wait: give up waiting after this many seconds."),
    config: Path | None = ConfigOption,
    url: str | None = UrlOption,
    as_json: bool = JsonOption,
) -> None:
    """Cancel the running run of a job (on whichever replica of a fleet holds it): it ends
    `cancelled` within seconds, what it wrote kept for the next run to continue from."""
    client, answer = _ask(config, url, job, "cancel")
    run = answer["run"]
    if not wait:
        _tell(as_json, answer, [f"{job}: cancelling run #{run['id']}"])
        return
    human_console(as_json, console).print(markup(f"{job}: cancelling run #{run['id']}"), highlight=False, soft_wrap=True)
    run = anyio.run(lambda: client.wait_run(run["id"], timeout))
    ended = f"run #{run['id']} of {job}: {run['outcome']}" + (f": {run['reason']}" if run["reason"] else "")
    _tell(as_json, {"status": answer["status"], "run": run}, [ended])  # with --json the run as it ended
    raise typer.Exit(0 if run["outcome"] == "cancelled" else 1)
