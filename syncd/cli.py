"""The `syncd` command line: one typer app, each command group in `syncd.commands`."""

from __future__ import annotations

import sys

import typer

from syncd.errors import SyncdError

app = typer.Typer(
    name="syncd",
    help="Sync, back up and migrate organizations of the Documentation Management API.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _register() -> None:
    from syncd.commands import config_cmd, demo_cmd, emulator_cmd

    app.command("demo")(demo_cmd.demo)
    app.add_typer(config_cmd.app, name="config")
    app.add_typer(emulator_cmd.app, name="emulator")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a SyncdError becomes one line on stderr and its exit code."""
    _register()
    try:
        app(args=argv, standalone_mode=False)
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
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, click.exceptions.Abort):
            print("syncd: aborted", file=sys.stderr)
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
