"""What a page's markdown says, apart from how it is written.

Why: content reaches a target by an import, and an importer turns HTML back into markdown in
its own style (docs/concepts/open-points.md, row `import-style`): `*` or `_` emphasis, `-` or
`*` bullets, inline or reference links, `#` or underlined headings, escapes, blank lines. An
importer that reads only the HTML (rows `import-reads-markdown-alternate`,
`import-first-heading`) gives the platform's blocks back as the plain markdown of their
rendering (docs/concepts/content.md): a hint as a quote, a tab's title as a line, an
embed as a link, and may keep the page's title as a first heading. A copy compared byte for
byte would import the same space again every round and never be equal.

Two levels, both pure and total (any text in, a string out):
- `meaning` keeps what a reader sees: the words in order, headings and their levels, list
  items, table cells, link and image targets, code exactly with its language; the blocks read
  as their plain markdown (`syncd.content.blocks.lower`), quote markers and a leading level-1
  heading that is the page's title dropped.
- `form` is the same with the blocks and quotes as written: two pages of one meaning whose
  forms differ lost structure in an import (verify counts them, `restructured`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import unquote

from syncd.content.blocks import lower

__all__ = ["form", "meaning"]

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_REF_DEF = re.compile(r"^\s{0,3}\[([^\]\n]+)\]:\s*<?(\S+?)>?(?:\s+[\"'(].*[\"')])?\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-+*]\s+")
_NUMBERED = re.compile(r"^(\s*)\d{1,9}[.)]\s+")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_REF_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\[([^\]\n]*)\]")
_AUTOLINK = re.compile(r"<([^<>\s]+)>")
_TARGET = re.compile(r"\]\(<([^<>\n]*)>\)|\]\(([^()\s]*)\)")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_MARKERS = re.compile(r"(?<![\w\\])[*_]+|[*_]+(?![\w])")
_SPACES = re.compile(r"\s+")


_CACHED = 2048
"""Pages whose meaning is kept: each entry holds its markdown, so a cache of every page of a
large organization would hold all of its words (issue 46); a few spaces' pages are enough for
the comparisons of one space that follow each other."""


@lru_cache(maxsize=_CACHED)
def meaning(markdown: str | None, title: str | None = None) -> str:
    """The markdown's words and structure, one normalized line per block element; a first
    level-1 heading equal to `title` (the page's) is the title, not part of the content.
    Cached: a round compares the same pages in its plan and again in its verify (about
    0.1 ms a page)."""
    return _normalize(lower(markdown), title, quotes=False) if markdown else ""


@lru_cache(maxsize=_CACHED)
def form(markdown: str | None, title: str | None = None) -> str:
    """`meaning` with the platform's blocks and quotes as written (their structure)."""
    return _normalize(markdown, title, quotes=True) if markdown else ""


def _normalize(markdown: str, title: str | None, quotes: bool) -> str:
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    references: dict[str, str] = {}
    body: list[tuple[bool, str, str]] = []  # (code: kept as written, quote prefix, line)
    fence_quotes = -1  # quote depth of the open fence (-1: none)
    for line in lines:
        depth, rest = _unquote(line, None if fence_quotes < 0 else fence_quotes)
        prefix = "> " * depth if quotes else ""
        fence = _FENCE.match(rest)
        if fence_quotes >= 0:
            if fence and not fence.group(2):
                fence_quotes = -1
                body.append((True, prefix, "```"))
            else:
                body.append((True, prefix, rest))
        elif fence:
            fence_quotes = depth
            body.append((True, prefix, "```" + fence.group(2)))
        elif definition := _REF_DEF.match(rest):
            references[definition.group(1).casefold()] = definition.group(2)  # used before or after
        else:
            body.append((False, prefix, rest))
    out: list[str] = []
    for code, prefix, line in body:
        if code:
            out.append(prefix + line)
        elif _SETEXT.match(line) and out and out[-1] and not out[-1].startswith(("#", "- ", "1. ", "```", "---", "|")):
            out[-1] = ("# " if line.strip().startswith("=") else "## ") + out[-1]
        elif _RULE.match(line):
            out.append(prefix + "---")
        elif line.strip().startswith("|") and _TABLE_RULE.match(line):
            out.append(prefix + "|---|")
        elif line.strip().startswith("|"):
            cells = _CELL_SPLIT.split(line.strip().strip("|") if line.strip().endswith("|") else line.strip()[1:])
            out.append(prefix + "| " + " | ".join(_block(cell, references) for cell in cells) + " |")
        else:
            out.append(prefix + _block(line, references))
    kept = [part for part in (line.strip() for line in out) if part]
    if title is not None and kept and kept[0] == "# " + _block(title, {}):
        kept = kept[1:]
    return "\n".join(kept)


def _unquote(line: str, limit: int | None) -> tuple[int, str]:
    """(quote depth, the line without its quote markers), at most `limit` markers."""
    depth = 0
    while (limit is None or depth < limit) and (marker := _QUOTE.match(line)):
        line = line[marker.end() :]
        depth += 1
    return depth, line


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

    def target(match: re.Match[str]) -> str:
        return f"]({unquote(match.group(1) if match.group(1) is not None else match.group(2))})"  # `<a b>` or `a%20b`: one target

    text = _TARGET.sub(target, _AUTOLINK.sub(r"[\1](\1)", _REF_LINK.sub(resolve, text)))
    text = _ESCAPE.sub(r"\1", text)
    return _MARKERS.sub("", text)
