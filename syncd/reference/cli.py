"""The command line's reference page, read from the Typer app: every command and group in
`--help`'s order, its help text, its usage line, its arguments and options with their help.

It reads the click command tree `syncd.cli.command_tree` builds, the very objects `--help`
renders, so a command or option the help lists is one this page lists.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from syncd.reference.markdown import cell, code, paragraphs, table

__all__ = ["CommandDoc", "ParamDoc", "as_shown", "cli_reference", "commands"]

INTRO = """\
Every command and option of `syncd`, as `syncd --help` and each command's `--help` list them:
this page is generated from the command line itself when the site is built. The options before
the command (`--log-format`, `--log-level`) belong to `syncd` and go before the command's name:
`syncd --log-level debug sync src`. Exit statuses and error lines are in
[Errors, exit codes and logs](errors.md); the documents `--json` prints, in
[JSON output](json-output.md).
"""


class ParamDoc:
    """One argument or option as `--help` shows it."""

    def __init__(self, param: Any, ctx: Any) -> None:
        self.is_option = param.param_type_name == "option"
        argument = getattr(param, "display_name_raw", None) or getattr(param, "human_readable_name", param.name)
        self.names: list[str] = [*param.opts, *param.secondary_opts] if self.is_option else [argument]
        self.help: str = as_shown(getattr(param, "help", None) or "")
        self.required: bool = bool(param.required)
        shown = param.display_type_rich(ctx) if hasattr(param, "display_type_rich") else None
        self.value: str = "" if getattr(param, "is_flag", False) or getattr(param, "count", False) else str(shown or "")
        self.default: str = _default(param)
        self.repeatable: bool = bool(getattr(param, "multiple", False))


class CommandDoc:
    """One command or group: its path (`syncd mirror plan`), help, usage line and parameters."""

    def __init__(self, path: list[str], command: Any, ctx: Any) -> None:
        self.path = path
        self.name = " ".join(path)
        self.help: str = as_shown(command.help or "")
        self.is_group = hasattr(command, "commands")
        self.usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
        params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
        self.arguments = [ParamDoc(p, ctx) for p in params if p.param_type_name == "argument"]
        self.options = [ParamDoc(p, ctx) for p in params if p.param_type_name == "option"]
        self.subcommands: list[str] = list(command.list_commands(ctx)) if self.is_group else []


def as_shown(text: str) -> str:
    """A help text as `--help` prints it: typer reads help texts as rich markup (`\\[abc]` is `[abc]`)."""
    from rich.errors import MarkupError
    from rich.text import Text

    try:
        return Text.from_markup(text).plain
    except MarkupError:  # not markup after all: typer would print it as it is
        return text


def _default(param: Any) -> str:
    """The default `--help` would show, or "" (a flag off, nothing, an empty list)."""
    value = param.default
    if callable(value) or value is None or value is False or value in ((), []):
        return ""
    if getattr(param, "is_flag", False) and value is True:
        return "on"
    if isinstance(value, list | tuple):
        return " ".join(str(item) for item in value)
    return str(getattr(value, "value", value))  # an enum member: its value


def commands() -> list[CommandDoc]:
    """Every command and group of `syncd`, itself first, in `--help`'s order."""
    from syncd.cli import command_tree

    return list(_walk(command_tree(), ["syncd"], None))


def _walk(command: Any, path: list[str], parent: Any) -> Iterator[CommandDoc]:
    ctx = command.context_class(command, info_name=path[-1], parent=parent)
    yield CommandDoc(path, command, ctx)
    if hasattr(command, "commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from _walk(sub, [*path, name], ctx)


def _params_table(params: list[ParamDoc]) -> str:
    rows = []
    for param in params:
        names = ", ".join(code(name) for name in param.names)
        value = code(param.value) if param.value else ""
        notes = [note for note, on in (("required", param.required), ("repeatable", param.repeatable)) if on]
        if param.default:
            notes.append("default " + code(param.default))
        rows.append([names, value, cell(param.help), ", ".join(notes)])
    return table(["Name", "Value", "Description", "Notes"], rows)


def _section(doc: CommandDoc) -> str:
    parts = [f"## {code(doc.name)}", paragraphs(doc.help) if doc.help else "", "```text\n" + doc.usage + "\n```"]
    if doc.subcommands:
        listed = ", ".join(f"[{code(sub)}](#{_anchor(f'{doc.name} {sub}')})" for sub in doc.subcommands)
        parts.append(f"Commands: {listed}.")
    if doc.arguments:
        parts += ["**Arguments**", _params_table(doc.arguments)]
    if doc.options:
        parts += ["**Options**", _params_table(doc.options)]
    return "\n\n".join(part for part in parts if part)


def _anchor(name: str) -> str:
    """The id Python-Markdown's toc gives the heading of command `name`."""
    return "-".join(name.lower().split())


def cli_reference() -> str:
    """The page: an introduction, then a section per command."""
    return "# Command line\n\n" + INTRO + "\n" + "\n\n".join(_section(doc) for doc in commands()) + "\n"
