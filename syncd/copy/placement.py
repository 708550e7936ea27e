"""Where the service puts a new object among its siblings, as observed in this run, and the
turn of the creates into one listing chosen from it.

The spec does not say whether a created collection, space, section or site-space lands first
or last among its siblings (docs/concepts/open-points.md, row `new-object-place`). Whatever it does, the settle steps list the
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

import bisect
from collections.abc import Sequence
from typing import Literal

import anyio

from syncd.copy.overlap import overlap_width, placement_settled

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
    """The turn among the ops that create into one listing. The next op is the waiting one
    first in the plan, or, of a kind observed to land first, the last in the plan of that kind
    (so that the source's order comes out). It goes alone, as before, unless its name tells it
    apart from its siblings and its kind's placement is settled (`syncd.copy.overlap`): then
    up to `wide` such ops hold the turn together; an op that must go alone waits for them.

    `last_made`: per kind, the id the latest create of the listing made (the writer's look
    compares the next one with it). `peak`: the most ops that held the turn together."""

    def __init__(self, placement: Placement, wide: int = 1) -> None:
        self.placement = placement
        self.wide = max(1, wide)
        self.holders: dict[int, bool] = {}
        """index -> whether it entered beside others (its siblings may be in flight)."""
        self.peak = 0
        self.last_made: dict[str, str] = {}
        self._waiting: dict[int, tuple[str, bool, anyio.Event]] = {}
        self._by_kind: dict[str, list[int]] = {}
        """kind -> the indexes of its waiting ops, sorted: the next one is found without a scan
        of every waiting op (3,200 space creates wait in one listing at 3,200 spaces)."""

    @property
    def held(self) -> bool:
        return bool(self.holders)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def acquire(self, index: int, kind: str, distinct: bool = False) -> bool:
        """Wait for the turn of the op at `index` of the plan (its kind: `kind`; `distinct`:
        its name tells it apart). Returns whether it holds the turn beside others."""
        event = anyio.Event()
        self._waiting[index] = (kind, distinct, event)
        bisect.insort(self._by_kind.setdefault(kind, []), index)
        self._admit()
        try:
            await event.wait()
        except BaseException:
            if not self._forget(index):  # cancelled as the turn was handed over
                self.release(index)
            raise
        return self.holders[index]

    def release(self, index: int) -> None:
        """The op at `index` is done creating: the turn goes on (see the class docstring)."""
        self.holders.pop(index, None)
        self._admit()

    def _width(self, kind: str, distinct: bool) -> int:
        return overlap_width(distinct, placement_settled(kind, self.placement.wanted(kind)), self.wide)

    def _forget(self, index: int) -> bool:
        """Take the op at `index` off the waiting ones; False when it was not waiting."""
        waiting = self._waiting.pop(index, None)
        if waiting is None:
            return False
        indexes = self._by_kind[waiting[0]]
        del indexes[bisect.bisect_left(indexes, index)]
        return True

    def _next(self) -> int:
        first = min(indexes[0] for indexes in self._by_kind.values() if indexes)
        kind = self._waiting[first][0]
        if self.placement.newest_first(kind):
            first = self._by_kind[kind][-1]
        return first

    def _admit(self) -> None:
        while self._waiting:
            index = self._next()
            kind, distinct, event = self._waiting[index]
            beside = self._width(kind, distinct) > 1
            if self.holders and not (beside and all(self.holders.values()) and len(self.holders) < self.wide):
                return
            self._forget(index)
            self.holders[index] = beside
            self.peak = max(self.peak, len(self.holders))
            event.set()
