"""The conventions people expect from a command line: `--version`, shell completion, flags
that read as flags in `--help`, tables that fit 80 columns."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

from typing import Any

import pytest
import typer

from syncd.cli import _register, app, main
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
    assert asked.stdout.split() == ["status"]
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
