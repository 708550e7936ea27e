"""What a page's markdown says, apart from how it is written.

Why: content reaches a target by an import, and an importer turns HTML back into markdown in
its own style (README, "Behaviour profiles", row `import-style`): `*` or `_` emphasis, `-` or
`*` bullets, inline or reference links, `#` or underlined headings, escapes, blank lines. A
copy compared byte for byte would import the same space again every round and never be
equal. `meaning` keeps what a reader sees: the words in order, headings and their levels, list
items, link targets, code exactly; and drops the rest. Pure and total: any text in, a string
out.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["meaning"]

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_REF_DEF = re.compile(r"^\s{0,3}\[([^\]\n]+)\]:\s*<?(\S+?)>?(?:\s+[\"'(].*[\"')])?\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-+*]\s+")
_NUMBERED = re.compile(r"^(\s*)\d{1,9}[.)]\s+")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_REF_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\[([^\]\n]*)\]")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_MARKERS = re.compile(r"(?<![\w\\])[*_]+|[*_]+(?![\w])")
_SPACES = re.compile(r"\s+")


@lru_cache(maxsize=16384)
def meaning(markdown: str | None) -> str:
    """The markdown's words and structure, one normalized line per block element. Cached: a
    round compares the same pages in its plan and again in its verify (about 0.1 ms a page)."""
    if not markdown:
        return ""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    references: dict[str, str] = {}
    body: list[tuple[bool, str]] = []  # (inside a code fence, line)
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
            body.append((True, "```"))
        elif not fenced and (definition := _REF_DEF.match(line)):
            references[definition.group(1).casefold()] = definition.group(2)  # used before or after
        else:
            body.append((fenced, line))
    out: list[str] = []
    for code, line in body:
        if code:
            out.append(line)  # code is kept as written
        elif _SETEXT.match(line) and out and out[-1] and not out[-1].startswith(("#", "- ", "1. ", "```", "---")):
            out[-1] = ("# " if line.strip().startswith("=") else "## ") + out[-1]
        elif _RULE.match(line):
            out.append("---")
        else:
            out.append(_block(line, references))
    return "\n".join(part for part in (line.strip() for line in out) if part)


def _block(line: str, references: dict[str, str]) -> str:
    prefix = ""
    if heading := _ATX.match(line):
        prefix, line = "#" * len(heading.group(1)) + " ", heading.group(2)
    elif bullet := _BULLET.match(line):
        prefix, line = "- ", line[bullet.end():]
    elif number := _NUMBERED.match(line):
        prefix, line = "1. ", line[number.end():]
    parts = re.split(r"(`+[^`]*`+)", line)
    for index in range(0, len(parts), 2):
        parts[index] = _inline(parts[index], references)
    return prefix + _SPACES.sub(" ", "".join(parts)).strip()


def _inline(text: str, references: dict[str, str]) -> str:
    def resolve(match: re.Match[str]) -> str:
        label = match.group(3) or match.group(2)
        url = references.get(label.casefold())
        return f"{match.group(1)}[{match.group(2)}]({url})" if url is not None else match.group(0)

    text = _ESCAPE.sub(r"\1", _REF_LINK.sub(resolve, text))
    return _MARKERS.sub("", text)
