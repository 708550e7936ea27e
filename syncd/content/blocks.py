"""The block syntax of the platform's markdown (GitBook flavour), read into a tree (pure).

Why: a page's markdown holds blocks that CommonMark does not know: `{% hint %}`, `{% tabs %}`
and `{% tab %}`, `{% code title %}`, `{% embed %}`, `$$` math, and two HTML blocks the
platform writes itself (`<figure><img><figcaption>` and `<details><summary>`). The content
source renders them as plain semantic HTML (syncd/content/site.py) and verify reads them as
what they say (syncd/copy/meaning.py); both read them here, the one way. Everything else is
left as markdown text (`Text`), and so is a block tag that is never closed: nothing from an
organization becomes HTML but through the renderer, which escapes it.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

__all__ = ["Block", "Text", "lower", "parse", "read"]

_TAG = re.compile(r"^\s{0,3}\{%\s*(end)?([a-z][a-z-]*)((?:\s+[A-Za-z][\w-]*=\"[^\"\n]*\")*)\s*%\}\s*$")
_ATTR = re.compile(r"([A-Za-z][\w-]*)=\"([^\"\n]*)\"")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_FIGURE = re.compile(
    r"^\s{0,3}<figure>\s*<img\s+([^<>]*?)/?>\s*(?:<figcaption>\s*(?:<p>)?(.*?)(?:</p>)?\s*</figcaption>)?\s*</figure>\s*$", re.I
)
_IMG_ATTR = re.compile(r"([a-z]+)=\"([^\"]*)\"", re.I)
_DETAILS_OPEN = re.compile(r"^\s{0,3}<details(?:\s+open)?>\s*$", re.I)
_DETAILS_CLOSE = re.compile(r"^\s{0,3}</details>\s*$", re.I)
_SUMMARY = re.compile(r"^\s{0,3}<summary>(.*?)</summary>\s*$", re.I)
_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*\S")
_MATH_LINE = re.compile(r"^\s{0,3}\$\$(.+?)\$\$\s*$")
_MATH_FENCE = re.compile(r"^\s{0,3}\$\$\s*$")
SINGLE = frozenset({"embed"})
"""Tags that stand alone when no end tag follows."""
DEPTH = 16
"""Blocks nested deeper than this are read as text (bounded recursion on hostile input)."""


@dataclass
class Text:
    """Markdown between blocks, as written."""

    markdown: str


@dataclass
class Block:
    """A block: `kind` is the tag's name (`hint`, `tabs`, `tab`, `code`, `embed`, ...),
    `details`, `figure` or `math`; `attrs` its attributes (HTML entities of the platform's
    HTML blocks decoded: still untrusted text); `children` what it holds; `text` the formula
    of `math`."""

    kind: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Text | Block] = field(default_factory=list)
    text: str = ""


def parse(markdown: str) -> list[Text | Block]:
    """The markdown as text and blocks, in order (a block only where it is closed)."""
    return read(markdown)[0]


def read(markdown: str) -> tuple[list[Text | Block], list[str]]:
    """`parse` of the markdown, and its link reference definition lines (outside code), from
    one reading of its lines: a block's text is rendered apart from the rest, and its
    `[text][label]` links must still resolve."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    parser = _Parser(lines)
    found = [line for line, code in zip(lines, parser.fenced, strict=True) if not code and _DEFINITION.match(line)]
    return parser.items(0, len(lines), 0), found


def lower(markdown: str) -> str:
    """The markdown with its blocks written as the plain markdown an HTML-only importer gives
    back for their rendering (docs/concepts/content.md)."""
    return "\n".join(_lower(parse(markdown)))


def _lower(items: list[Text | Block]) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, Text):
            out.append(item.markdown)
            continue
        kind, attrs = item.kind, item.attrs
        if kind == "math":
            out += ["", "```math", item.text, "```", ""]
            continue
        if kind == "figure":
            out += ["", f"![{attrs.get('alt', '')}]({attrs.get('src', '')})", "", attrs.get("caption", ""), ""]
            continue
        head = {"tab": "title", "code": "title", "details": "summary"}.get(kind)
        if head and attrs.get(head):
            out += ["", attrs[head], ""]
        if kind == "embed" and attrs.get("url"):
            out += ["", f"[{attrs['url']}]({attrs['url']})", ""]
        out += ["", *_lower(item.children), ""]
    return out


class _Parser:
    """One pass finds the fences and pairs each block's open and end lines (a stack per
    name, so nesting counts), then `items` reads the tree: linear in the lines, whatever
    an organization writes."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.fenced = self._fences()
        self.ends = self._pairs()

    def _fences(self) -> list[bool]:
        """Whether each line is inside (or opens or closes) a fenced code block."""
        out, fence = [], ""
        for line in self.lines:
            match = _FENCE.match(line)
            if fence:
                out.append(True)
                if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) and not line.strip()[len(match.group(1)) :].strip():
                    fence = ""
            elif match:
                fence = match.group(1)
                out.append(True)
            else:
                out.append(False)
        return out

    def _pairs(self) -> dict[int, int]:
        """Open line -> its end line, for tags, `<details>` and `$$` math (unclosed: absent)."""
        ends: dict[int, int] = {}
        open_tags: dict[str, list[int]] = {}
        math: int | None = None
        for index, line in enumerate(self.lines):
            if self.fenced[index]:
                continue
            if math is not None:
                if _MATH_FENCE.match(line):
                    ends[math], math = index, None
                continue
            if tag := _TAG.match(line):
                stack = open_tags.setdefault(tag.group(2), [])
                if not tag.group(1):
                    stack.append(index)
                elif stack:
                    ends[stack.pop()] = index
            elif _DETAILS_OPEN.match(line):
                open_tags.setdefault("<details>", []).append(index)
            elif _DETAILS_CLOSE.match(line) and open_tags.get("<details>"):
                ends[open_tags["<details>"].pop()] = index
            elif _MATH_FENCE.match(line):
                math = index
        return ends

    def items(self, start: int, stop: int, depth: int) -> list[Text | Block]:
        out: list[Text | Block] = []
        text: list[str] = []
        index = start
        while index < stop:
            found = self._block(index, stop, depth) if not self.fenced[index] and depth < DEPTH else None
            if found is None:
                text.append(self.lines[index])
                index += 1
                continue
            block, index = found
            if text:
                out.append(Text("\n".join(text)))
                text = []
            out.append(block)
        if text:
            out.append(Text("\n".join(text)))
        return out

    def _block(self, index: int, stop: int, depth: int) -> tuple[Block, int] | None:
        line = self.lines[index]
        end = self.ends.get(index)
        if end is not None and end >= stop:
            end = None  # closed outside the block around it: not a block here
        if tag := _TAG.match(line):
            if tag.group(1):
                return None  # a stray end tag: text
            name = tag.group(2)
            attrs = dict(_ATTR.findall(tag.group(3)))
            if end is None:
                return (Block(name, attrs), index + 1) if name in SINGLE else None
            return Block(name, attrs, self.items(index + 1, end, depth + 1)), end + 1
        if figure := _FIGURE.match(line):
            attrs = {k.lower(): html.unescape(v) for k, v in _IMG_ATTR.findall(figure.group(1)) if k.lower() in ("src", "alt")}
            attrs["caption"] = html.unescape(re.sub(r"<[^>]*>", "", figure.group(2) or "")).strip()
            return Block("figure", attrs), index + 1
        if _DETAILS_OPEN.match(line):
            if end is None:
                return None
            body = index + 1
            while body < end and not self.lines[body].strip():
                body += 1
            summary = _SUMMARY.match(self.lines[body]) if body < end else None
            attrs = {"summary": html.unescape(re.sub(r"<[^>]*>", "", summary.group(1))).strip()} if summary else {}
            return Block("details", attrs, self.items(body + 1 if summary else index + 1, end, depth + 1)), end + 1
        if math := _MATH_LINE.match(line):
            return Block("math", text=math.group(1).strip()), index + 1
        if _MATH_FENCE.match(line) and end is not None:
            return Block("math", text="\n".join(self.lines[index + 1 : end]).strip("\n")), end + 1
        return None
