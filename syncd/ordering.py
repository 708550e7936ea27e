"""Order arithmetic shared by change detection and move planning.

When siblings are reordered, the fewest items that "moved" are those outside a longest
increasing subsequence of their old positions taken in their new order: every other item
kept its place relative to the rest. Reporting (and replaying) only those keeps a single
move from showing up as a shift of every later sibling.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any


def longest_increasing(values: Sequence[float]) -> set[int]:
    """Indexes of one longest strictly increasing subsequence of `values` (O(n log n))."""
    tails: list[float] = []
    tail_index: list[int] = []
    previous: list[int] = [-1] * len(values)
    for index, value in enumerate(values):
        slot = bisect_left(tails, value)
        if slot == len(tails):
            tails.append(value)
            tail_index.append(index)
        else:
            tails[slot] = value
            tail_index[slot] = index
        previous[index] = tail_index[slot - 1] if slot else -1
    kept: set[int] = set()
    index = tail_index[-1] if tail_index else -1
    while index != -1:
        kept.add(index)
        index = previous[index]
    return kept


def moved_items(ids_in_new_order: Sequence[str], old_position: dict[str, float]) -> list[str]:
    """The fewest ids whose moves turn the old order into the new one (ids present in both)."""
    common = [item for item in ids_in_new_order if item in old_position]
    kept = longest_increasing([old_position[item] for item in common])
    return [item for index, item in enumerate(common) if index not in kept]


class PositionError(ValueError):
    """A move names a sibling that is not there, or a malformed position."""


def place(order: list[Any], item: Any, before: Any = None, after: Any = None) -> None:
    """Put `item` in the sibling list `order` before/after a sibling, or at the end: the
    API's move semantics (shared by the emulator and the planner's model of a target)."""
    if before is not None and before not in order:
        raise PositionError(f"position.before: {before!r} is not a sibling of the moved item")
    if after is not None and after not in order:
        raise PositionError(f"position.after: {after!r} is not a sibling of the moved item")
    if item in order:
        order.remove(item)
    if before is not None and before != item:
        order.insert(order.index(before), item)
    elif after is not None and after != item:
        order.insert(order.index(after) + 1, item)
    else:
        order.append(item)


def parse_position(position: Any, types: tuple[str, ...], key: str) -> tuple[str | None, str | None]:
    """(before, after) sibling ids of a move body's `position` ({before|after: {type, key}})."""
    if not position:
        return None, None
    if not isinstance(position, dict):
        raise PositionError("position: must be an object")
    ends: list[str | None] = []
    for side in ("before", "after"):
        ref = position.get(side)
        if ref is None:
            ends.append(None)
        elif isinstance(ref, dict) and ref.get("type") in types and isinstance(ref.get(key), str):
            ends.append(ref[key])
        else:
            raise PositionError(f"position.{side}: must be {{type: {types[0]!r}, {key}: <id>}}")
    if ends[0] is not None and ends[1] is not None:
        raise PositionError("position: give before or after, not both")
    return ends[0], ends[1]
