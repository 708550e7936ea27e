"""The `syncd` command line: one typer app, each command group in `syncd.commands`.

`main` is the last line of defence of "one line, not a traceback": a SyncdError is printed
as one clean line (a configuration's problems: a line each; control characters and escape
sequences of server text removed, secrets masked) with its exit code; so are the failures the world causes rather than syncd, even
when they arrive raw or inside an exception group: a file system that is full (exit 1) or
read-only / not writable (exit 2), a damaged state file (exit 2), a PostgreSQL state that fails
mid-command (exit 1), input nested too deeply to parse (exit 1). Anything else is a bug and
keeps its traceback. Everything the command creates is private (umask 077 while it runs, see `syncd.files`).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sqlite3
import sys
from typing import Any

import typer

from syncd.commands.typer_compat import flags_read_as_flags
from syncd.errors import SyncdError
from syncd.files import private_umask, storage_error
from syncd.one_shot import ONE_SHOT_WINDOW, window

app = typer.Typer(
    name="syncd",
    help="Sync, back up and migrate organizations of the Documentation Management API.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion; `syncd completion SHELL` prints the script
)
flags_read_as_flags()


def _print_version(value: bool) -> None:
    """`--version`: the installed package's version, then exit."""
    if value:
        from importlib.metadata import version

        typer.echo(f"syncd {version('syncd')}")
        raise typer.Exit()


@app.callback()
def _global_options(
    _version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, expose_value=False, help="Print syncd's version and exit."
    ),
    log_format: str | None = typer.Option(None, "--log-format", help="console (human; the default) or json (one JSON object a line)."),
    log_level: str | None = typer.Option(None, "--log-level", help="debug, info (the default), warning or error."),
) -> None:
    """Sync, back up and migrate organizations of the Documentation Management API."""
    from syncd.errors import UsageError
    from syncd.logging import LOG_OPTIONS, configure_logging

    if log_format is not None and log_format not in ("console", "json"):
        raise UsageError(f"--log-format must be console or json, got {log_format!r}")
    if log_level is not None and log_level.lower() not in ("debug", "info", "warning", "error"):
        raise UsageError(f"--log-level must be debug, info, warning or error, got {log_level!r}")
    LOG_OPTIONS.clear()
    LOG_OPTIONS.update({k: v.lower() for k, v in (("format", log_format), ("level", log_level)) if v is not None})
    configure_logging(LOG_OPTIONS.get("format", "console"), LOG_OPTIONS.get("level", "info"))  # type: ignore[arg-type]


# Each command and group, in `--help`'s order: its name, the module in `syncd.commands` that
# defines it, and there the function (a command) or the typer app (a group, "app").
_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("demo", "demo_cmd", "demo"),
    ("sync", "read_cmds", "sync"),
    ("diff", "read_cmds", "diff"),
    ("status", "read_cmds", "status"),
    ("backup", "read_cmds", "backup"),
    ("export", "read_cmds", "export"),
    ("check", "check_cmd", "check"),
    ("restore", "mirror_cmds", "restore"),
    ("serve", "daemon_cmds", "serve"),
    ("jobs", "daemon_cmds", "jobs"),
    ("trigger", "daemon_cmds", "trigger"),
    ("pause", "control_cmds", "pause"),
    ("resume", "control_cmds", "resume"),
    ("cancel", "control_cmds", "cancel"),
    ("mirror", "mirror_cmds", "app"),
    ("config", "config_cmd", "app"),
    ("emulator", "emulator_cmd", "app"),
    ("state", "state_cmd", "app"),
    ("orgs", "orgs_cmd", "orgs"),
    ("completion", "completion_cmd", "completion"),
)
_BY_NAME = {entry[0]: entry for entry in _COMMANDS}
_OPTIONS_WITH_VALUES = ("--log-format", "--log-level")


def _register(argv: list[str] | None = None) -> None:
    """Add the commands to `app`: only the one `argv` names when it names one (a process
    imports what that command needs, not every command's libraries: `syncd emulator serve`
    starts in a third of the time), else all of them, in `--help`'s order. `main` runs many
    times in one process (the tests): a command added once stays."""
    wanted = _command_named(argv)
    registered = {info.name for info in app.registered_commands} | {info.name for info in app.registered_groups}
    if wanted is not None:
        if wanted not in registered:
            _add(*_BY_NAME[wanted])
        return
    if registered == _BY_NAME.keys():
        return
    app.registered_commands.clear()
    app.registered_groups.clear()
    for entry in _COMMANDS:
        _add(*entry)


def command_tree() -> Any:
    """The whole command line as click holds it, every command added: what `syncd --help`
    and each command's `--help` render, read by the documentation (`syncd.reference.cli`)."""
    _register([])
    return typer.main.get_command(app)


def _add(name: str, module_name: str, attribute: str) -> None:
    module = importlib.import_module(f"syncd.commands.{module_name}")
    if attribute == "app":
        app.add_typer(module.app, name=name)
    else:
        app.command(name)(getattr(module, attribute))


def _command_named(argv: list[str] | None) -> str | None:
    """The command `argv` (the process's arguments when None) runs, when it is one of
    `_COMMANDS`; None for help, shell completion or a name syncd does not have (then every
    command is added, so that help lists them and click's error names the near ones)."""
    if os.environ.get("_SYNCD_COMPLETE"):
        return None
    args = sys.argv[1:] if argv is None else argv
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _OPTIONS_WITH_VALUES:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return arg if arg in _BY_NAME else None
    return None


def _click_modules() -> list[Any]:
    """click's exception modules: typer vendors click in recent releases, uses it in older ones."""
    found = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return found


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def known_failure(exc: BaseException) -> SyncdError | None:
    """The one-line error for `exc` when it is one the user can act on (module docstring);
    an exception group counts when every exception in it does (the first one is told)."""
    from syncd.state.store import database_failure

    if isinstance(exc, BaseExceptionGroup):
        leaves = [leaf for leaf in _leaves(exc) if not isinstance(leaf, asyncio.CancelledError)]
        failures = [known_failure(leaf) for leaf in leaves]
        if failures and all(failure is not None for failure in failures):
            return failures[0]
        return None
    if isinstance(exc, SyncdError):
        return exc
    if isinstance(exc, RecursionError):
        return SyncdError(
            "input nested too deeply to be read (a JSON answer or file hundreds of thousands of levels deep); "
            "run with --log-level debug for the details"
        )
    if isinstance(exc, OSError):
        return storage_error(exc)
    if isinstance(exc, sqlite3.DatabaseError):
        return database_failure("a state file", exc)
    psycopg = sys.modules.get("psycopg")  # loaded when the state is in PostgreSQL, not before
    if psycopg is not None and isinstance(exc, psycopg.Error):
        from syncd.pg.connect import state_failure

        return state_failure(exc)
    return None


def _interrupted(exc: BaseException) -> bool:
    """A KeyboardInterrupt inside a group, or a query SIGINT stopped: where no `interrupt.stoppable`
    catches it, SIGINT raises KeyboardInterrupt inside SQLite's progress handler, which aborts
    the query (`syncd.state.sqlite_file.stop_on_request`) and leaves that error instead."""
    from syncd.state.sqlite_file import stopped

    return any(isinstance(leaf, KeyboardInterrupt) or stopped(leaf) for leaf in _leaves(exc))


def error_lines(exc: BaseException) -> str:
    """`syncd: error: ...`, one line per problem (a configuration may have several, most
    errors are one): no control characters, no secrets."""
    from syncd.logging import redact_text
    from syncd.safe_text import one_line

    said = exc.lines() if isinstance(exc, SyncdError) else [str(exc)]
    return "\n".join(f"syncd: error: {redact_text(one_line(line))}" for line in said)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a SyncdError (or a failure of the world, module docstring) becomes one
    line on stderr and its exit code."""
    _register(argv)
    with private_umask():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        with window(ONE_SHOT_WINDOW):  # a server nothing answers at is given up on soon (`serve` waits longer)
            code = app(args=argv, prog_name="syncd", standalone_mode=False)  # one name, so completion's _SYNCD_COMPLETE
        if code == 130:  # typer turns Ctrl-C into this status
            raise KeyboardInterrupt
        if isinstance(code, int):
            return code
    except SyncdError as exc:
        from syncd.interrupt import Interrupted

        # Stopped by SIGINT/SIGTERM (exit 130/143) is what the user asked for, not an error.
        print(error_lines(exc).replace("error: ", "", 1) if isinstance(exc, Interrupted) else error_lines(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("syncd: interrupted", file=sys.stderr)
        return 130
    except typer.Exit as exc:  # raised by commands that pick their own status
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # click usage errors, and failures the world causes
        if not isinstance(exc, Exception) and not isinstance(exc, BaseExceptionGroup):
            raise
        if _interrupted(exc):
            print("syncd: interrupted", file=sys.stderr)
            return 130
        failure = known_failure(exc)
        if failure is not None:
            _log_cause(exc)
            print(error_lines(failure), file=sys.stderr)
            return failure.exit_code
        for module in _click_modules():
            if isinstance(exc, module.ClickException):
                exc.show()
                return exc.exit_code
            if isinstance(exc, getattr(module, "Abort", ())):
                print("syncd: aborted", file=sys.stderr)
                return 1
        raise
    return 0


def _log_cause(exc: BaseException) -> None:
    """The traceback behind a one-line error, at debug level (`--log-level debug`)."""
    from syncd.logging import get_logger

    try:
        get_logger("syncd.cli").debug("error.cause", exc_info=exc)
    except RecursionError:  # a traceback too deep to render
        pass


if __name__ == "__main__":
    sys.exit(main())
