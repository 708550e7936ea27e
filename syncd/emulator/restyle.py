"""Another importer's markdown style: what `import_restyles` makes of the pages a website
import reads (docs/concepts/open-points.md, row `import-style`).

The spec says an import takes a URL and answers how many resources it imported; it does not
say that the pages come back byte for byte. An importer that turns HTML back into markdown
writes in its own style. This one writes `_` emphasis and `__` strong, `*` bullets, setext
headings for levels 1 and 2, reference links numbered in order of use, escaped literal
`*`, and two trailing newlines. The words, the links' targets and the structure stay.
"""

from __future__ import annotations

import re

__all__ = ["restyle"]

_FENCE = re.compile(r"^\s*(```|~~~)")
_BULLET = re.compile(r"^(\s*)[-+*](\s+)(?=\S)")
_ATX = re.compile(r"^(#{1,2})\s+(.+?)\s*#*\s*$")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*\\])\*(?=[^\s*])(.+?)(?<=[^\s*\\])\*(?![\w*])")
_INLINE_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)\)")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")


def restyle(markdown: str) -> str:
    """`markdown` in this importer's style (code blocks and spans left as they are)."""
    if not markdown.strip():
        return markdown
    links: list[str] = []
    out: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            out.append(line)
            continue
        if fenced or line.startswith("    ") or _RULE.match(line):
            out.append(line)
            continue
        heading = _ATX.match(line)
        if heading:
            text = _restyle_inline(heading.group(2), links)
            out += [text, ("=" if len(heading.group(1)) == 1 else "-") * max(3, len(text))]
            continue
        line = _BULLET.sub(lambda m: f"{m.group(1)}*{m.group(2)}", line)
        out.append(_restyle_inline(line, links))
    if links:
        out += ["", *(f"[{n}]: {url}" for n, url in enumerate(links, 1))]
    return "\n".join(out).rstrip("\n") + "\n\n"


def _restyle_inline(line: str, links: list[str]) -> str:
    """Emphasis, strong and links of one line, code spans kept."""
    parts = re.split(r"(`[^`]*`)", line)
    for index in range(0, len(parts), 2):
        text = parts[index]
        bullet = re.match(r"^\s*\*\s+", text) if index == 0 else None
        head, text = (text[: bullet.end()], text[bullet.end():]) if bullet else ("", text)
        text = _STRONG.sub(lambda m: f"__{m.group(1)}__", text)
        text = _EMPHASIS.sub(lambda m: f"_{m.group(1)}_", text)

        def reference(match: re.Match[str]) -> str:
            links.append(match.group(2))
            return f"[{match.group(1)}][{len(links)}]"

        parts[index] = head + _INLINE_LINK.sub(reference, text)
    return "".join(parts)
