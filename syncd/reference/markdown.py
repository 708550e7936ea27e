"""Writing the code's own words into markdown without markdown reading them as syntax: a help
text's `*.db` is not emphasis, its `<token>` is not an HTML tag, its `A|B` does not end a
table's cell. Code spans (`...`) are kept as they are: the help texts use them on purpose.
"""

from __future__ import annotations

import re

__all__ = ["cell", "code", "paragraphs", "prose", "table"]

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_SPECIAL = {"*": r"\*", "<": "&lt;", ">": "&gt;", "\\": "\\\\"}
_PROSE = str.maketrans(_SPECIAL)
_CELL = str.maketrans({**_SPECIAL, "|": r"\|"})


def _outside_code(text: str, table: dict[int, str]) -> str:
    """`text` with the characters of `table` replaced outside its code spans."""
    out: list[str] = []
    at = 0
    for match in _CODE_SPAN.finditer(text):
        out.append(text[at : match.start()].translate(table))
        out.append(match.group(0))
        at = match.end()
    out.append(text[at:].translate(table))
    return "".join(out)


def prose(text: str) -> str:
    """`text` as markdown that shows it as written: markup characters outside code spans escaped."""
    return _outside_code(text, _PROSE)


def paragraphs(text: str) -> str:
    """A docstring or help text as markdown paragraphs: its lines joined, blank lines kept as
    paragraph breaks, each paragraph escaped (`prose`)."""
    blocks = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(prose(" ".join(block.split())) for block in blocks if block.strip())


def cell(text: str) -> str:
    """`text` as one cell of a table: one line, its pipes escaped outside code spans (a table
    row splits at those; Python-Markdown's tables leave a code span whole)."""
    return _outside_code(" ".join(text.split()), _CELL)


def code(text: str) -> str:
    """`text` as a code span, fenced with more backticks than it holds in a row."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table; cells are given as markdown already (`cell`, `code`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
