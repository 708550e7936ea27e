"""A plan file's JSON read as a stream: the top-level object's members one by one, and the
elements of its long lists (the listing, the ops, the skips, what is left) one at a time.

Why: a plan of ~150k operations is ~60 MB; `json.loads` of it holds ~10 times that in objects.
The page needs only counts and one page of the listing, so it never holds more than one element
(and a buffer of the file) at a time. Names given twice are refused as `plan_data` refuses them.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, Protocol

from syncd.copy.planfile import _unique_names

__all__ = ["LIST_END", "STREAMED", "JsonStreamError", "Readable", "members"]

STREAMED = frozenset({"changes", "ops", "skips", "left_on_target"})
"""Top-level lists whose elements are given one at a time."""
LIST_END: Any = object()
"""The value `members` gives when a streamed list ends."""
CHUNK = 1 << 20
MAX_VALUE = 16 << 20
"""Characters of one value at most (an op whose body is a long page; the header's members):
a crafted file cannot make the reader hold one huge value."""
_WHITESPACE = " \t\n\r"


class JsonStreamError(ValueError):
    """The text is not one JSON object (or names a member twice)."""


class Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


class _Text:
    """The decoded text of a binary file, read a chunk at a time, consumed from the front."""

    def __init__(self, handle: Readable) -> None:
        self.handle = handle
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buffer = ""
        self.pos = 0
        self.ended = False
        self.json = json.JSONDecoder(object_pairs_hook=_unique_names)

    def more(self, at_least: int = 0) -> bool:
        """Read more of the file; False at its end."""
        if self.ended:
            return False
        raw = self.handle.read(max(at_least, CHUNK))
        try:
            text = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise JsonStreamError(str(exc)) from None
        if not raw:
            self.ended = True
        self.buffer = self.buffer[self.pos :] + text
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end), not consumed."""
        while True:
            while self.pos < len(self.buffer) and self.buffer[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buffer) or not self.more():
                return self.buffer[self.pos] if self.pos < len(self.buffer) else ""

    def expect(self, characters: str) -> str:
        found = self.peek()
        if not found or found not in characters:
            raise JsonStreamError(f"expected {' or '.join(repr(c) for c in characters)} at {found!r}")
        self.pos += 1
        return found

    def value(self) -> Any:
        """The next JSON value. A value that ends where the buffer does may go on (a number, or
        one cut by the chunk): read on until it ends before the buffer or the file ends."""
        self.peek()
        wanted = CHUNK
        while True:
            try:
                value, end = self.json.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.buffer) - self.pos > MAX_VALUE:
                    raise JsonStreamError(f"a value is longer than {MAX_VALUE:,} characters") from None
                if not self.more(wanted):
                    raise JsonStreamError(str(exc)) from None
                wanted *= 2  # a long value: read in growing chunks, not quadratically
                continue
            except RecursionError:
                raise JsonStreamError("it is nested too deeply") from None
            except ValueError as exc:  # a name given twice (`_unique_names`)
                raise JsonStreamError(str(exc)) from None
            if end < len(self.buffer) or not self.more(wanted):
                self.pos = end
                return value
            wanted *= 2


def members(handle: Readable) -> Iterator[tuple[str, Any, bool]]:
    """(name, value, False) for each member of the file's top-level object, and for a list
    named in `STREAMED`: (name, element, True) for each element, then (name, LIST_END, False)."""
    text = _Text(handle)
    text.expect("{")
    seen: set[str] = set()
    if text.peek() == "}":
        text.pos += 1
    else:
        while True:
            name = text.value()
            if not isinstance(name, str):
                raise JsonStreamError("a member's name must be text")
            if name in seen:
                raise JsonStreamError(f"the name {name!r} is given twice in one object")
            seen.add(name)
            text.expect(":")
            if name in STREAMED and text.peek() == "[":
                text.pos += 1
                if text.peek() == "]":
                    text.pos += 1
                else:
                    while True:
                        yield name, text.value(), True
                        if text.expect(",]") == "]":
                            break
                yield name, LIST_END, False
            else:
                yield name, text.value(), False
            if text.expect(",}") == "}":
                break
    if text.peek():
        raise JsonStreamError("text after the plan's object")
