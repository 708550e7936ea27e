"""Order arithmetic shared by change detection and move planning.

When siblings are reordered, the fewest items that "moved" are those outside a longest
increasing subsequence of their old positions taken in their new order: every other item
kept its place relative to the rest. Reporting (and replaying) only those keeps a single
move from showing up as a shift of every later sibling.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence


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
