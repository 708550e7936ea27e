"""The `syncd` command line: one typer app, each command group in `syncd.commands`."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

from syncd.errors import SyncdError

app = typer.Typer(
    name="syncd",
    help="Sync, back up and migrate organizations of the Documentation Management API.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _global_options(
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


def _register() -> None:
    from syncd.commands import config_cmd, daemon_cmds, demo_cmd, emulator_cmd, mirror_cmds, read_cmds

    app.command("demo")(demo_cmd.demo)
    app.command("sync")(read_cmds.sync)
    app.command("diff")(read_cmds.diff)
    app.command("status")(read_cmds.status)
    app.command("backup")(read_cmds.backup)
    app.command("export")(read_cmds.export)
    app.command("restore")(mirror_cmds.restore)
    app.command("serve")(daemon_cmds.serve)
    app.command("jobs")(daemon_cmds.jobs)
    app.command("trigger")(daemon_cmds.trigger)
    app.add_typer(mirror_cmds.app, name="mirror")
    app.add_typer(config_cmd.app, name="config")
    app.add_typer(emulator_cmd.app, name="emulator")


def _click_modules() -> list[Any]:
    """click's exception modules: typer vendors click in recent releases, uses it in older ones."""
    found = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a SyncdError becomes one line on stderr and its exit code."""
    _register()
    try:
        code = app(args=argv, standalone_mode=False)
        if code == 130:  # typer turns Ctrl-C into this status
            raise KeyboardInterrupt
        if isinstance(code, int):
            return code
    except SyncdError as exc:
        print(f"syncd: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("syncd: interrupted", file=sys.stderr)
        return 130
    except typer.Exit as exc:  # raised by commands that pick their own status
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # click usage errors and the like
        for module in _click_modules():
            if isinstance(exc, module.ClickException):
                exc.show()
                return exc.exit_code
            if isinstance(exc, getattr(module, "Abort", ())):
                print("syncd: aborted", file=sys.stderr)
                return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
