"""Unique names among siblings (`notes`, `notes-2`, `notes-3`, ...) in time linear in their
number: for each way of numbering a name, where the search for a free number stopped is kept.
Names are only ever added, so a number once found taken stays taken (issue 41: counting up
from 2 again for every duplicate made 8,000 same-titled pages take quadratic time)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable


class SiblingNames:
    """The names taken among siblings (as `fold` makes them: lower-cased where case does not
    tell names apart), and the first number not known taken per numbering."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self.taken: set[str] = set(reserved)
        self._next: dict[Hashable, int] = {}

    def free(self, name: str, fold: Callable[[str], str] = str) -> bool:
        """True, and `name` joins the taken, when it is not taken yet."""
        if fold(name) in self.taken:
            return False
        self.taken.add(fold(name))
        return True

    def numbered(self, key: Hashable, name: Callable[[int], str], start: int, end: int | None = None, fold: Callable[[str], str] = str) -> str | None:
        """The first `name(n)` for n in [start, end) that is `free`; None if there is none.
        `key` names the numbering (`name(n)` must depend only on it and n): the search
        goes on where the last one with this key stopped."""
        number = self._next.get(key, start)
        while end is None or number < end:
            candidate = name(number)
            number += 1
            if self.free(candidate, fold):
                self._next[key] = number
                return candidate
        self._next[key] = number
        return None
