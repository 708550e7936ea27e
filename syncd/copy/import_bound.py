"""How many content imports of one run are in flight at once: as many as syncd's content
source can serve, learned from what it sees rather than assumed.

Each import makes the service read a whole website from the content source, with as many
connections as its importer opens. The spec does not say how many that is (row
`importer-connections` of docs/concepts/open-points.md; the emulator's importer opens 8 or 32), and the
content source holds at most `max_connections`, closing the rest at once. So the imports at
once are `max_connections` ÷ the connections one import takes, where that figure is a guess
(`FIRST_GUESS`) until the content source has served an import, then the most it saw one
import open; an import that failed while the content source closed connections it could not
hold doubles it (the importer overran the source: fewer at once) and is sent again once a
place is free, at most `ATTEMPTS` times in all. Such an import was refused (an answer came):
the service made nothing of it, so sending it again duplicates nothing.

`imports_at_once` is pure; `ImportBound` holds the run's figure and its limiter.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["ATTEMPTS", "FIRST_GUESS", "ImportBound", "imports_at_once", "per_import_after"]

FIRST_GUESS = 16
"""Connections one import is taken to open before the content source has seen one."""
ATTEMPTS = 4
"""Times an import is sent in all while the content source refuses connections under it."""


def imports_at_once(max_connections: int, per_import: int) -> int:
    """Imports the content source can serve together: at least one, whatever its size."""
    return max(1, max_connections // max(1, per_import))


def per_import_after(per_import: int, seen: int, refused: bool, max_connections: int) -> int:
    """The connections one import is taken to open, after an import that opened `seen` of them
    and, when `refused`, failed while the content source closed connections it could not hold:
    the most seen, doubled on a refusal, never above the whole source."""
    grown = max(per_import, seen)
    if refused:
        grown = max(grown, per_import * 2)
    return max(1, min(grown, max_connections))


class ImportBound:
    """The run's imports in flight (`slot`), sized as the module docstring says. `seen` and
    `refused` read the content source (None when the run serves no content: nothing is
    learned, the first guess stays)."""

    def __init__(self, max_connections: int, *, seen: Callable[[str], int] | None = None, refused: Callable[[], int] | None = None) -> None:
        self.max_connections = max(1, max_connections)
        self.per_import = FIRST_GUESS
        self.observed = False
        """Whether `per_import` comes from an import the content source served."""
        self._seen, self._refused = seen, refused
        self.limiter = anyio.CapacityLimiter(imports_at_once(self.max_connections, self.per_import))
        self.resent = 0
        """Imports sent again after the content source refused connections under them."""

    @property
    def width(self) -> int:
        return int(self.limiter.total_tokens)

    def refusals(self) -> int:
        """Connections the content source has closed at once so far (0 without one)."""
        return self._refused() if self._refused is not None else 0

    def learn(self, space: str | None, refused_since: int | None) -> bool:
        """Take in what the import of `space` showed (`refused_since`: the refusal count when it
        began, or None when it did not fail); returns whether to send it again."""
        seen = self._seen(space) if self._seen is not None and space is not None else 0
        refused = refused_since is not None and self.refusals() > refused_since
        if seen and not self.observed and not refused:
            self.per_import = seen  # the first import served whole replaces the guess
        self.observed = self.observed or bool(seen)
        self.per_import = per_import_after(self.per_import, seen, refused, self.max_connections)
        self.limiter.total_tokens = imports_at_once(self.max_connections, self.per_import)
        return refused

    @property
    def narrowed(self) -> bool:
        """Whether the operator has something to hear: an import was sent again, or imports
        take more connections than first guessed (fewer at once)."""
        return bool(self.resent) or self.per_import > FIRST_GUESS

    def describe(self) -> str:
        """One line for the run's notes: what the bound came to, and why."""
        source = "the most one import opened" if self.observed else "a first guess"
        line = (
            f"content imports: {self.width} at once, {self.max_connections} connections of the content source "
            f"÷ {self.per_import} per import ({source})"
        )
        if self.resent:
            line += f"; {self.resent} sent again after the content source refused connections (raise content_source.max_connections to serve more at once)"
        return line
