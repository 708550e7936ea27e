"""Order arithmetic shared by change detection and move planning.

When siblings are reordered, the fewest items that "moved" are those outside a longest
increasing subsequence of their old positions taken in their new order: every other item
kept its place relative to the rest. Reporting (and replaying) only those keeps a single
move from showing up as a shift of every later sibling.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
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


Anchor = tuple[str, Any]
"""("before" | "after", sibling): where a move puts an item."""


def moves_to_order(desired: Sequence[Any], current: Sequence[Any]) -> list[tuple[Any, Anchor | None]]:
    """The fewest moves that put the items of `desired` in that order among `current` (the
    live order of the container); items of `desired` not in `current` are moved in. Each move
    names a neighbour that is already in place when it runs (None: to the end); other items of
    `current` are left alone. Run them in the order given."""
    wanted = set(desired)
    present = [item for item in current if item in wanted]
    position = {item: float(index) for index, item in enumerate(present)}
    moved = set(moved_items([item for item in desired if item in position], position))
    moving = {item for item in desired if item in moved or item not in position}
    if not moving:
        return []
    kept = [index for index, item in enumerate(desired) if item not in moving]
    out: list[tuple[Any, Anchor | None]] = []
    if not kept:
        previous = None
        for item in desired:
            out.append((item, ("after", previous) if previous is not None else None))
            previous = item
        return out
    for index in range(kept[0] - 1, -1, -1):
        out.append((desired[index], ("before", desired[index + 1])))
    for index in range(kept[0] + 1, len(desired)):
        if desired[index] in moving:
            out.append((desired[index], ("after", desired[index - 1])))
    return out


def moves_waiting(moves: Sequence[tuple[Any, Anchor | None]]) -> list[int | None]:
    """For each move of `moves_to_order`, the earlier move it must wait for: the one of the
    sibling it is anchored on (None: its anchor stays where it is, so it may run beside the
    others). A move to the end waits for the move before it. Whatever order the service
    then answers them in, each names a neighbour already in place."""
    index: dict[Any, int] = {}
    out: list[int | None] = []
    for position, (item, anchor) in enumerate(moves):
        if anchor is None:
            out.append(position - 1 if position else None)
        else:
            out.append(index.get(anchor[1]))
        index[item] = position
    return out


def apply_move(order: list[Any], item: Any, anchor: Anchor | None) -> None:
    """`order` after a move of `item` to `anchor` (the API's documented move semantics)."""
    side, sibling = anchor if anchor is not None else (None, None)
    place(order, item, sibling if side == "before" else None, sibling if side == "after" else None)


def path_changes(current: dict[Any, str], wanted: dict[Any, str], temporary: str = "-syncd-tmp") -> tuple[list[tuple[Any, str]], list[Any]]:
    """The path changes that give each item of `wanted` its path, among siblings whose paths
    must stay unique (`current`: every sibling's path now). A change waits for the sibling
    holding its path to leave it; a cycle goes through a temporary path. Returns the changes
    in order and the items whose path is held by a sibling that is not to change."""
    pending = {item: path for item, path in wanted.items() if current.get(item) != path}
    holder = {path: item for item, path in current.items()}
    now = dict(current)
    changes: list[tuple[Any, str]] = []
    blocked: list[Any] = []

    def change(item: Any, path: str) -> None:
        holder.pop(now.get(item), None)  # type: ignore[arg-type]
        holder[path] = item
        now[item] = path
        changes.append((item, path))

    while pending:
        progress = False
        for item, path in list(pending.items()):
            blocker = holder.get(path)
            if blocker is None or blocker == item:
                change(item, path)
            elif blocker not in pending:
                blocked.append(item)
            else:
                continue
            del pending[item]
            progress = True
        if not progress:
            item, path = next(iter(pending.items()))
            stand_in, n = f"{path}{temporary}", 2
            while stand_in in holder:
                stand_in, n = f"{path}{temporary}-{n}", n + 1
            change(item, stand_in)
    return changes, blocked


def mixed_moves(desired: Sequence[Any], current: Sequence[Any], narrow: Callable[[Any], bool]) -> list[tuple[Any, Anchor | None]]:
    """Moves that put `current` (a container's live order) in the order `desired`, where a
    `narrow` item (a site's top-level section) may be placed relative to narrow items only
    and the others (section groups) relative to any sibling.

    Phase 1 orders the narrow items among themselves with the fewest moves (`moves_to_order`
    over their subsequence: every anchor is narrow); phase 2 walks `desired` and moves each
    other item that is not right after its desired predecessor to right after it (before the
    first item when it comes first). Every item then follows its desired predecessor, so the
    items of `desired` are in that order; items of `current` not in `desired` are left alone.
    Run the moves in the order given."""
    order = list(current)
    out: list[tuple[Any, Anchor | None]] = []
    for item, anchor in moves_to_order([item for item in desired if narrow(item)], order):
        apply_move(order, item, anchor)
        out.append((item, anchor))
    for index, item in enumerate(desired):
        if narrow(item):
            continue
        anchor: Anchor | None
        if index == 0:
            if order and order[0] == item:
                continue
            anchor = ("before", order[0]) if order else None
        else:
            previous = desired[index - 1]
            at = order.index(item) if item in order else -1
            if at > 0 and order[at - 1] == previous:
                continue
            anchor = ("after", previous)
        apply_move(order, item, anchor)
        out.append((item, anchor))
    return out


def other_anchor(order: Sequence[Any], item: Any, anchor: Anchor | None, allowed: Callable[[Any], bool]) -> tuple[Anchor | None] | None:
    """The same place as `anchor` named the other way, from `order` as it is once `item` is
    there: `after` the item before it for `before` the item after it, and `before` the item
    after it (or the end, with no position) for `after` the item before it. None when there
    is no such way: a move to the end, or a neighbour `allowed` refuses as a reference."""
    if anchor is None or item not in order:
        return None
    at = list(order).index(item)
    if anchor[0] == "before":
        return (("after", order[at - 1]),) if at > 0 and allowed(order[at - 1]) else None
    if at + 1 == len(order):
        return (None,)
    return (("before", order[at + 1]),) if allowed(order[at + 1]) else None
