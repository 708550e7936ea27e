"""Where the service puts a new object among its siblings, as observed in this run, and the
turn of the creates into one listing chosen from it.

The spec does not say whether a created collection, space, section or site-space lands first
or last among its siblings (README, open points). Whatever it does, the settle steps list the
target afterwards and move what is not where the source has it; but when new objects land
first, creating a container's items in the source's order lands them in reverse, and the
settle step then moves nearly all of them, one after another (each move is anchored on the
one before it). So the run looks once per positional kind (the catalog's `ordered` ones):
after the second create into one listing it lists it and sees where the newer object went.
From then on the creates of that kind waiting for their turn go last-first where new objects
land first, and the settle step finds little or nothing to move. A wrong or missing
observation costs moves, never correctness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import anyio

Landing = Literal["first", "last"]


class Placement:
    """Per kind: where a new object landed (observed), and whether a look is still wanted."""

    LOOKS = 3
    """Looks per kind that may tell nothing (the listing did not show both objects) before
    the run stops looking."""

    def __init__(self) -> None:
        self.landing: dict[str, Landing] = {}
        self._looks: dict[str, int] = {}

    def wanted(self, kind: str) -> bool:
        """Whether a look at the listing after the next create of `kind` is worth a read."""
        return kind not in self.landing and self._looks.get(kind, 0) < self.LOOKS

    def look(self, kind: str, older: str, newer: str, siblings: Sequence[str]) -> Landing | None:
        """Note where `newer` (created just after `older`, in one listing) is among `siblings`
        (that listing's ids, in its order); None when the listing does not show both."""
        self._looks[kind] = self._looks.get(kind, 0) + 1
        if older not in siblings or newer not in siblings or kind in self.landing:
            return self.landing.get(kind)
        self.landing[kind] = "first" if siblings.index(newer) < siblings.index(older) else "last"
        return self.landing[kind]

    def newest_first(self, kind: str) -> bool:
        return self.landing.get(kind) == "first"


class Turnstile:
    """The turn among the ops that create into one listing: one at a time, the next one the
    waiting op first in the plan, or, of a kind observed to land first, the last in the plan
    of that kind (so that the source's order comes out).

    `last_made`: per kind, the id the latest create of the listing made (the writer's look
    compares the next one with it)."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        self.held = False
        self.last_made: dict[str, str] = {}
        self._waiting: dict[int, tuple[str, anyio.Event]] = {}

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def acquire(self, index: int, kind: str) -> None:
        """Wait for the turn of the op at `index` of the plan (its kind: `kind`)."""
        if not self.held and not self._waiting:
            self.held = True
            return
        event = anyio.Event()
        self._waiting[index] = (kind, event)
        try:
            await event.wait()
        except BaseException:
            if self._waiting.pop(index, None) is None:  # cancelled as the turn was handed over
                self.release()
            raise

    def release(self) -> None:
        """Hand the turn to the next op (see the class docstring), or free it."""
        if not self._waiting:
            self.held = False
            return
        first = min(self._waiting)
        kind = self._waiting[first][0]
        if self.placement.newest_first(kind):
            first = max(index for index, (other, _) in self._waiting.items() if other == kind)
        _, event = self._waiting.pop(first)
        event.set()  # the turn passes to it: `held` stays True
