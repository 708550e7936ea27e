"""Text from outside syncd, made safe to show: on a terminal, in a rich table, in a log line.

Why one module: titles, names, paths and error messages come from API answers and files,
and anyone who can edit a space can choose them. Shown as they are, `Docs [/bold]` is rich
markup (a MarkupError traceback, or styles the server chose), and `\\x1b]0;...\\x07` or
`\\x1b[2J` are terminal escape sequences (a retitled window, a cleared screen, a forged line).
So every piece of outside text goes through here before it reaches rich or a terminal:

- `clean(text)`: ANSI escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, two-byte
  escapes, their 8-bit C1 forms) removed whole, other C0/C1 control characters removed, and
  the bidirectional overrides and isolates (U+202A-202E, U+2066-2069) that make a terminal
  show text in another order than it is; tab and newline kept only with `newlines=True`
  (where text is printed as lines);
- `one_line(text)`: `clean`, with every run of white space that holds a line break made one
  space: an error message is one line, whatever the server put in it;
- `markup(text)`: `clean` + `rich.markup.escape`, to put outside text inside our markup;
- `cell(text)`: a `rich.text.Text` (never parsed as markup) for table cells and titles;
- `check_secret(value)`: a token holding a control character (a line break pasted with it,
  an escape) is refused when the configuration is read, in one line that never shows it:
  sent, it would be a header injection (aiohttp refuses it with a traceback).

The consoles of the commands are made with `console()`: no emoji codes (`:smile:` in a title
stays text), and soft wrap as asked. JSON output needs none of this: `json.dumps` escapes
control characters itself.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

__all__ = ["cell", "check_secret", "clean", "console", "markup", "one_line"]

_ESCAPES = re.compile(
    r"""
      \x1b\[ [0-?]* [ -/]* [@-~]?                     # CSI: ESC [ parameters intermediates final
    | \x9b   [0-?]* [ -/]* [@-~]?                     # CSI, 8-bit
    | \x1b\] [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)?   # OSC ... BEL or ST (window titles, links)
    | \x9d   [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)?   # OSC, 8-bit
    | \x1b[PX^_] [^\x1b\x9c]* (?:\x1b\\|\x9c)?        # DCS, SOS, PM, APC strings
    | [\x90\x98\x9e\x9f] [^\x1b\x9c]* (?:\x1b\\|\x9c)? # the same, 8-bit
    | \x1b [ -/]* [0-~]?                              # other escapes (charset, keypad, RIS...)
    """,
    re.VERBOSE,
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROLS_AND_LAYOUT = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_BREAKS = re.compile(r"[ \t]*(?:\r\n|[\n\r\x0b\x0c\x85\u2028\u2029])\s*")


def clean(text: Any, *, newlines: bool = False) -> str:
    """`text` (anything: it is made a string) without escape sequences or control characters.

    With `newlines=False` (a table cell, one line) a tab becomes a space and a line break
    one space; with `newlines=True` (text printed as lines) tab and newline stay."""
    value = text if isinstance(text, str) else str(text)
    if value.isprintable():  # the common case: nothing to do
        return value
    value = _ESCAPES.sub("", value)
    if newlines:
        return _CONTROLS.sub("", value.replace("\r\n", "\n"))
    value = _BREAKS.sub(" ", value).replace("\t", " ")
    return _CONTROLS_AND_LAYOUT.sub("", value)


def one_line(text: Any) -> str:
    """`clean(text)` on one line, trailing white space dropped: for error messages."""
    return clean(text).strip()


def markup(text: Any) -> str:
    """`text` cleaned and escaped, to put inside a string rich reads as markup."""
    return escape(clean(text))


def cell(text: Any, style: str = "") -> Text:
    """A rich Text of `text`, cleaned: shown as it is (no markup, no emoji codes)."""
    return Text(clean(text), style=style)


def check_secret(value: str, where: str | None = None) -> str:
    """`value` when it holds no control character (C0, DEL, C1: a line break, a tab, an
    escape); else ValueError (for a pydantic validator: the field is named by it) or, with
    `where` (`tenants.NAME.token_file`), a ConfigError naming that. Never the value."""
    if not _CONTROLS_AND_LAYOUT.search(value):
        return value
    message = "must not contain control characters (a line break, a tab, an escape): check how it was copied"
    if where is None:
        raise ValueError(message)
    from syncd.errors import ConfigError, ConfigProblem

    raise ConfigError(problems=[ConfigProblem(None, where, f"the token {message}")])


def console(*, stderr: bool = False, soft_wrap: bool = False) -> Console:
    """A rich Console for a command's output: emoji codes off, so `:name:` in outside text
    stays text; markup stays on for syncd's own strings (outside text goes in through
    `markup` or `cell`)."""
    return Console(stderr=stderr, soft_wrap=soft_wrap, emoji=False)
