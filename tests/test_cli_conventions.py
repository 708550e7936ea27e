"""The conventions people expect from a command line: `--version`, shell completion, flags
that read as flags in `--help`, tables that fit 80 columns."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from typing import Any

import pytest
import typer

from syncd.cli import _COMMANDS, _command_named, _register, app, main
from syncd.commands.completion_cmd import completion_script
from tests.console_script import run_installed
from tests.hostile.cli_support import clean_env


def _commands() -> list[list[str]]:
    """The path of every command and group (`[]` is syncd itself)."""
    _register()
    found: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:  # typer's click: typer vendors it
        found.append(path)
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_version_is_the_installed_package_version(tmp_path: Path) -> None:
    ran = run_installed("--version", env=clean_env(), cwd=tmp_path)
    assert ran.code == 0, ran.show()
    assert ran.stdout == f"syncd {version('syncd')}\n" and ran.stderr == ""


def test_completion_script_is_generated_and_answers(tmp_path: Path) -> None:
    ran = run_installed("completion", "bash", env=clean_env(), cwd=tmp_path)
    assert ran.code == 0, ran.show()
    assert "_SYNCD_COMPLETE=complete_bash" in ran.stdout
    assert ran.stdout.rstrip().endswith("complete -o default -F _syncd_completion syncd")
    # What the script does on <TAB>: call syncd back with the words typed so far.
    asked = run_installed(env=clean_env(_SYNCD_COMPLETE="complete_bash", COMP_WORDS="syncd sta", COMP_CWORD="1"), cwd=tmp_path)
    assert asked.code == 0, asked.show()
    assert sorted(asked.stdout.split()) == ["state", "status"]  # the commands that begin so
    asked = run_installed(env=clean_env(_SYNCD_COMPLETE="complete_bash", COMP_WORDS="syncd status --j", COMP_CWORD="2"), cwd=tmp_path)
    assert asked.stdout.split() == ["--json"], asked.show()


@pytest.mark.parametrize("shell", ["zsh", "fish", "powershell"])
def test_completion_scripts_of_other_shells(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    out = capsys.readouterr().out
    assert out == completion_script(shell) and "_SYNCD_COMPLETE=complete_" in out.replace("$Env:_SYNCD_COMPLETE = \"", "_SYNCD_COMPLETE=")


def test_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "tcsh"]) == 2
    assert "tcsh" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["emulator", "serve", "--port", "0"], "emulator"),
        (["--log-format", "json", "--log-level=debug", "sync", "src"], "sync"),
        (["--log-level", "debug", "mirror", "plan"], "mirror"),
        (["--help"], None),
        ([], None),
        (["synk"], None),  # every command, so that click's error names `sync`
        (["--log-format", "sync"], None),  # `sync` is the option's value here
    ],
)
def test_a_process_adds_only_the_command_it_runs(argv: list[str], named: str | None) -> None:
    assert _command_named(argv) == named


def test_the_emulator_starts_without_the_libraries_of_other_commands(tmp_path: Path) -> None:
    """`syncd emulator serve` (started hundreds of times by the tests and the bench) imports what
    it needs: not the mirror's sqlite-utils, the configuration's pydantic-settings, the crawl or the copy."""
    probe = (
        "import sys\n"
        "from syncd.cli import main\n"
        "code = main(['emulator', 'serve', '--help'])\n"
        "print(code, sorted(m for m in ('sqlite_utils', 'pydantic_settings', 'syncd.read.crawl', 'syncd.copy') if m in sys.modules))\n"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=clean_env(), timeout=60, check=False)
    assert ran.returncode == 0 and ran.stdout.splitlines()[-1] == "0 []", (ran.stdout[-2000:], ran.stderr[-2000:])


def test_help_lists_every_command_in_order_after_one_was_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["orgs", "--help"]) == 0  # adds `orgs` alone, when it is the first command run here
    capsys.readouterr()
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    first_words = [line[2:].split(" ", 1)[0] for line in out.splitlines() if line.startswith("│ ") and line[2:3] != " "]
    commands = [name for name, _, attribute in _COMMANDS if attribute != "app"]
    groups = [name for name, _, attribute in _COMMANDS if attribute == "app"]
    assert [word for word in first_words if word in commands + groups] == commands + groups  # typer lists groups last


def test_flags_read_as_flags_in_every_help(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    flags_seen = 0
    for path in _commands():
        assert main([*path, "--help"]) == 0, path
        text = capsys.readouterr().out
        assert "<bool>" not in text, (path, text)
        assert "--help " in text and "Show this message and exit." in text
        flags_seen += text.count("--json ") + text.count("--wait ") + text.count("--full ")
    assert flags_seen >= 6  # the check saw the flags it is about
    assert main(["sync", "--help"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "--db" in line)
    assert "<path>" in line  # options that take a value keep their type


def _render(table_of: Any, width: int, terminal: bool = True) -> str:
    """The table as printed on a terminal `width` columns wide (fitted to it), or, `terminal`
    False, into a pipe while COLUMNS says `width` (every value whole, however wide)."""
    from io import StringIO

    from rich.console import Console

    console = Console(width=width, file=StringIO(), color_system=None, force_terminal=terminal)
    console.print(table_of(console), crop=False)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert max(len(line) for line in text.splitlines()) <= width or not terminal
    return text


def test_status_table_fits_80_columns_without_cutting_dates_or_outcomes() -> None:
    from syncd.commands.read_cmds import runs_table

    stats = {"objects": {"space": 21700}, "requests": 15200, "failed_listings": 3, "mirror": {"changes": {"space": {"created": 11700}}}}
    runs = [
        {"id": 12, "job": "nightly-backup", "scope_ref": "src:6nGisiWgNZq6ITZM5jtg", "started_at": "2026-11-26T10:00:32.912+00:00",
         "status": "cancelled", "reason": "the crawl was interrupted or failed", "stats": stats},
        {"id": 13, "job": "sync", "scope_ref": "src", "started_at": "2026-11-27T23:59:01.000+00:00", "status": "partial", "reason": None, "stats": stats},
        {"id": 14, "job": "sync", "scope_ref": "src", "started_at": "2026-11-28T00:00:00.000+00:00", "status": "complete", "reason": None, "stats": None},
    ]  # fmt: skip
    for width in (80, 100, 160):
        text = _render(lambda console: runs_table(console, runs, Path("/var/lib/syncd/state/syncd.db")), width)
        assert "…" not in text, text
        for date in ("2026-11-26 10:00", "2026-11-27 23:59", "2026-11-28 00:00"):
            assert date in text, (width, text)
        words = text.split()
        assert {"cancelled", "partial", "complete", "21700", "interrupted"} <= set(words), (width, text)
    assert "requests" in _render(lambda console: runs_table(console, runs, Path("x.db")), 160)  # wide: every column


def test_jobs_table_fits_80_columns_without_cutting_times_or_outcomes() -> None:
    from datetime import UTC, datetime, timedelta

    from syncd.commands.daemon_cmds import jobs_table

    now = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)

    def iso(moment: datetime) -> str:
        return moment.isoformat().replace("+00:00", "Z")

    error = "GET http://127.0.0.1:8787/v1/orgs/6nGisiWgNZq6ITZM5jtg/spaces: 503 Service Unavailable after 8 attempts"
    jobs = [
        {"name": "nightly-backup", "kind": "backup", "schedule": "cron 30 2 * * MON-FRI in Europe/Berlin (jitter 5m)", "state": "running",
         "current_run": 1234, "next_run_at": None, "last_run": {"id": 1233, "outcome": "succeeded", "seconds": 123.4, "error": None},
         "last_success_at": iso(now - timedelta(hours=20))},
        {"name": "mirror-prod-to-staging", "kind": "mirror", "schedule": "every 15m", "state": "idle", "current_run": None,
         "next_run_at": iso(now + timedelta(minutes=4, seconds=30)), "last_run": {"id": 17, "outcome": "failed", "seconds": 2.0, "error": error},
         "last_success_at": None},
        {"name": "sync", "kind": "sync", "schedule": "on trigger only", "state": "idle", "current_run": None, "next_run_at": None,
         "last_run": {"id": 18, "outcome": "cancelled", "seconds": 0.5, "error": None}, "last_success_at": None},
    ]  # fmt: skip
    for width in (80, 120, 200):
        text = _render(lambda console: jobs_table(console, jobs, "http://127.0.0.1:8790", now), width)
        assert "…" not in text, text
        words = text.split()
        assert {"succeeded", "failed", "cancelled", "running", "in", "4m30s", "#1233", "(123.4s)"} <= set(words), (width, text)


def test_tables_into_a_pipe_keep_every_id_and_name_whole() -> None:
    """Not a terminal (`syncd status | cat`, `syncd jobs > file`): no width to fit, so no id,
    name or reason is cut or folded, and each row is one line, whatever COLUMNS says."""
    from datetime import UTC, datetime

    from syncd.commands.daemon_cmds import jobs_table
    from syncd.commands.read_cmds import runs_table

    runs = [
        {"id": 12, "job": "nightly-backup-of-the-handbook", "scope_ref": "demo:6nGisiWgNZq6ITZM5jtg", "started_at": "2026-11-26T10:00:32+00:00",
         "status": "cancelled", "reason": "the crawl was interrupted or failed", "stats": {"objects": {"space": 21700}, "requests": 15200}},
        {"id": 13, "job": "sync", "scope_ref": "demo:aJGuxLObZi4zjlGeiWnY", "started_at": "2026-11-27T23:59:01+00:00", "status": "complete",
         "reason": None, "stats": None},
    ]  # fmt: skip
    text = _render(lambda console: runs_table(console, runs, Path("/var/lib/syncd/state/syncd.db")), 40, terminal=False)
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.split() and line.split()[0] in ("12", "13")}
    assert rows["12"][1:5] == ["nightly-backup-of-the-handbook", "demo:6nGisiWgNZq6ITZM5jtg", "2026-11-26", "10:00"], text
    assert " ".join(rows["12"][5:11]) == "cancelled (the crawl was interrupted or", text
    assert rows["13"][1:3] == ["sync", "demo:aJGuxLObZi4zjlGeiWnY"] and "requests" in text and "errors" in text, text  # every column

    now = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
    error = "GET http://127.0.0.1:8787/v1/orgs/6nGisiWgNZq6ITZM5jtg/spaces: 503 Service Unavailable"
    jobs = [{"name": "mirror-prod-to-staging-every-night", "kind": "mirror", "schedule": "every 15m", "state": "idle", "current_run": None,
             "next_run_at": None, "last_run": {"id": 17, "outcome": "failed", "seconds": 2.0, "error": error}, "last_success_at": None}]  # fmt: skip
    text = _render(lambda console: jobs_table(console, jobs, "http://127.0.0.1:8790", now), 40, terminal=False)
    row = next(line for line in text.splitlines() if "mirror-prod-to-staging-every-night" in line)
    assert f"#17 failed (2.0s): {error}" in row and "mirror " in row and row.rstrip().endswith("never"), text


@pytest.mark.parametrize("args", [["check", "{url}"], ["export", "{url}", "{dir}"], ["restore", "{url}", "local:o1"]])
def test_a_postgresql_url_where_a_backup_file_goes_is_one_clear_line(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The PostgreSQL state is no file: say what to give instead, not "postgresql:/host: no such file"."""
    url = "postgresql://syncd@127.0.0.1/fleet"
    assert main([a.format(url=url, dir=tmp_path / "out") for a in args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"syncd {args[0]} reads a backup file" in err and "syncd backup" in err, err
    assert not (tmp_path / "out").exists()
