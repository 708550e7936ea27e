"""`syncd completion SHELL`: the shell completion script, printed, to source or install.

typer's `--install-completion` / `--show-completion` guess the shell from the parent
process; this command takes it as an argument, so a script, a Dockerfile or a package can
generate it (`syncd completion bash > /etc/bash_completion.d/syncd`). The script calls
`syncd` back with `_SYNCD_COMPLETE` set, and typer answers with the commands, options and
values that fit."""

from __future__ import annotations

from enum import StrEnum

import typer

PROG_NAME = "syncd"
COMPLETE_VAR = "_SYNCD_COMPLETE"


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"
    powershell = "powershell"


def completion_script(shell: str) -> str:
    """The completion script of `shell` for the `syncd` command."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=PROG_NAME, complete_var=COMPLETE_VAR, shell=shell).strip() + "\n"


def completion(shell: Shell = typer.Argument(..., help="bash, zsh, fish or powershell.")) -> None:
    """Print the shell completion script (e.g. `source <(syncd completion bash)`)."""
    typer.echo(completion_script(shell.value), nl=False)
