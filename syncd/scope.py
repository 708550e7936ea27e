"""Scopes: which collections, spaces and docs sites a run takes part in (`--include`,
`--exclude`, a job's `include` / `exclude`).

A pattern is an rclone-style glob matched against a *path*: the titles of an object's
collections and its own title, joined with `/` (`Engineering/API/Reference`); a docs site's
path is its title alone. What the glob characters mean:

- `*` any run of characters inside one path segment; `**` any run, across segments;
- `?` one character (not `/`); `[abc]`, `[a-z]`, `[!abc]` one character of (not of) a set;
- `{a,b}` one of the alternatives (not nested); `\\x` the character x itself (`\\*`,
  `\\{`; `\\/` a `/` inside a title);
- a pattern starting with `/` is anchored at the organization's root; otherwise it matches
  at any depth (`API` matches `API` and `Engineering/API`, as rclone's `file.jpg` does);
- a pattern ending with `/` matches collections only.

Matching is case-sensitive. The rule (simpler than rclone's ordered filter list, and the same
for every command): an object is in scope when no `--exclude` matches it and, if any
`--include` is given, one matches it. A match on a collection counts for everything under it:
`--include Engineering` brings the collection and all it holds, `--exclude Archive` leaves out
the collection and all it holds (an exclude wins over an include). Which other objects come
along, and what is reported, is `syncd.selection`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from syncd.errors import UsageError

__all__ = ["EVERYTHING", "Pattern", "Scope", "ScopeError", "path_text"]

_SLASH = "\x00"
"""How a `/` inside a title is written in the string a pattern is matched against."""


class ScopeError(UsageError):
    """A pattern that cannot be read (exit 2)."""


def path_text(path: Sequence[str]) -> str:
    """A path as people read it: titles joined with `/`."""
    return "/".join(path)


def _subject(path: Sequence[str]) -> str:
    return "/".join(part.replace("/", _SLASH) for part in path)


def _class(text: str, start: int, where: str) -> tuple[str, int]:
    """The regex of a `[...]` set opened at `start`, and the index after its `]`."""
    i = start + 1
    negate = i < len(text) and text[i] in "!^"
    if negate:
        i += 1
    body: list[str] = []
    first = True
    while i < len(text) and (text[i] != "]" or first):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            body.append(re.escape(text[i + 1]))
            i += 2
        elif char == "-" and body and i + 1 < len(text) and text[i + 1] != "]":
            body.append("-")
            i += 1
        else:
            body.append(re.escape(char))
            i += 1
        first = False
    if i >= len(text):
        raise ScopeError(f"{where}: '[' at position {start + 1} is never closed with ']'")
    inner = "".join(body)
    try:
        re.compile(f"[{inner}]")
    except re.error as exc:
        raise ScopeError(f"{where}: the set at position {start + 1} is not valid ({exc.msg})") from None
    return (f"[^/{inner}]" if negate else f"(?!/)[{inner}]"), i + 1


def _translate(text: str, where: str) -> str:
    """The regex of a pattern's body (no anchor, no trailing `/`)."""
    out: list[str] = []
    braced: int | None = None
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            if i + 1 >= len(text):
                raise ScopeError(f"{where}: ends with a lone '\\' (write '\\\\' for a backslash)")
            following = text[i + 1]
            out.append(_SLASH if following == "/" else re.escape(following))
            i += 2
            continue
        if char == "*":
            if text.startswith("**", i):
                out.append(".*")
                i += 2
                while i < len(text) and text[i] == "*":
                    i += 1
            else:
                out.append("[^/]*")
                i += 1
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[":
            regex, i = _class(text, i, where)
            out.append(regex)
            continue
        elif char == "{":
            if braced is not None:
                raise ScopeError(f"{where}: '{{' at position {i + 1} is inside another '{{' (braces do not nest)")
            braced = i
            out.append("(?:")
        elif char == "," and braced is not None:
            out.append("|")
        elif char == "}":
            if braced is None:
                raise ScopeError(f"{where}: '}}' at position {i + 1} closes no '{{' (write '\\}}' for the character)")
            braced = None
            out.append(")")
        elif char == "/" and text.startswith("//", i):
            raise ScopeError(f"{where}: '//' at position {i + 1} is an empty path segment")
        else:
            out.append(re.escape(char))
        i += 1
    if braced is not None:
        raise ScopeError(f"{where}: '{{' at position {braced + 1} is never closed with '}}'")
    return "".join(out)


@dataclass(frozen=True)
class Pattern:
    """One glob (see the module docstring), compiled."""

    text: str
    anchored: bool
    collections_only: bool
    regex: re.Pattern[str] = field(compare=False, repr=False)

    @classmethod
    def parse(cls, text: str, option: str = "--include") -> Pattern:
        """The pattern; ScopeError (one line naming `option` and the pattern) when invalid."""
        where = f"{option} {text!r}"
        if not isinstance(text, str) or not text.strip():
            raise ScopeError(f"{option}: an empty pattern matches nothing; give a title or a glob")
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in text):
            raise ScopeError(f"{option} {text.encode('unicode_escape').decode()!r}: holds a control character")
        anchored = text.startswith("/")
        body = text[1:] if anchored else text
        collections_only = body.endswith("/") and not body.endswith("\\/")
        if collections_only:
            body = body[:-1]
        if not body:
            raise ScopeError(f"{where}: names no title (the organization itself is always in scope)")
        if body.startswith("/"):
            raise ScopeError(f"{where}: '//' at position 1 is an empty path segment")
        regex = _translate(body, where)
        prefix = "" if anchored else "(?:.*/)?"
        return cls(text, anchored, collections_only, re.compile(f"{prefix}{regex}", re.DOTALL))

    def matches(self, path: Sequence[str], collection: bool = False) -> bool:
        """Whether the pattern matches exactly this path (not counting what is above it)."""
        if self.collections_only and not collection:
            return False
        return bool(path) and self.regex.fullmatch(_subject(path)) is not None


@dataclass(frozen=True)
class Scope:
    """Include and exclude patterns; `Scope()` (EVERYTHING) takes part in everything."""

    include: tuple[Pattern, ...] = ()
    exclude: tuple[Pattern, ...] = ()

    @classmethod
    def parse(cls, include: Iterable[str] = (), exclude: Iterable[str] = (), *, names: tuple[str, str] = ("--include", "--exclude")) -> Scope:
        """The scope of these patterns; ScopeError on the first invalid one. `names` say
        where the patterns come from in errors (a job's `include`, say)."""
        return cls(
            tuple(Pattern.parse(text, names[0]) for text in include or ()),
            tuple(Pattern.parse(text, names[1]) for text in exclude or ()),
        )

    @property
    def everything(self) -> bool:
        return not self.include and not self.exclude

    def _hit(self, patterns: tuple[Pattern, ...], path: Sequence[str], collection: bool) -> bool:
        """Whether a pattern matches the path or one of the collections above it."""
        for depth in range(1, len(path) + 1):
            is_collection = collection or depth < len(path)
            if any(pattern.matches(path[:depth], is_collection) for pattern in patterns):
                return True
        return False

    def selects(self, path: Sequence[str], collection: bool = False) -> bool:
        """Whether the object at `path` is in scope (the module docstring's rule); `collection`
        when the object itself is a collection (every segment above it is one)."""
        if self._hit(self.exclude, path, collection):
            return False
        return not self.include or self._hit(self.include, path, collection)

    def describe(self) -> str:
        """`include A, B; exclude C` (empty for everything), for run names and reports."""
        parts = []
        if self.include:
            parts.append("include " + ", ".join(p.text for p in self.include))
        if self.exclude:
            parts.append("exclude " + ", ".join(p.text for p in self.exclude))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"include": [p.text for p in self.include], "exclude": [p.text for p in self.exclude]}


EVERYTHING = Scope()
