"""Minimal moves: a reorder reports only what really moved."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from syncd.ordering import apply_move, longest_increasing, mixed_moves, moved_items, moves_to_order, moves_waiting, other_anchor


def test_one_move_is_one_moved_item() -> None:
    old = {"a": 0, "b": 1, "c": 2, "d": 3}
    assert moved_items(["b", "c", "d", "a"], old) == ["a"]
    assert moved_items(["a", "d", "b", "c"], old) == ["d"]
    assert moved_items(["a", "b", "c", "d"], old) == []
    assert moved_items(["a", "c", "d"], old) == []  # b removed: no one moved
    assert moved_items(["x", "a", "b"], old) == []  # x is new, not moved


def test_longest_increasing_subsequence() -> None:
    assert len(longest_increasing([3, 1, 2, 5, 4, 6])) == 4
    assert longest_increasing([]) == set()


@given(st.permutations(list(range(12))))
def test_replaying_the_moves_restores_the_order(order: list[int]) -> None:
    """Moving just the reported items into place turns the old order into the new one."""
    ids = [f"i{n}" for n in range(12)]
    new_order = [ids[n] for n in order]
    moved = set(moved_items(new_order, {item: pos for pos, item in enumerate(ids)}))
    staying = [item for item in ids if item not in moved]
    assert staying == [item for item in new_order if item not in moved]  # relative order kept
    assert len(moved) == 12 - len(longest_increasing(order))


def test_random_reorders_never_report_more_than_needed() -> None:
    rng = random.Random(1)
    for _ in range(50):
        ids = [str(n) for n in range(20)]
        new = ids[:]
        a, b = rng.randrange(20), rng.randrange(20)
        new.insert(b, new.pop(a))
        assert len(moved_items(new, {item: pos for pos, item in enumerate(ids)})) <= 1


@st.composite
def _mixed_orders(draw: st.DrawFn) -> tuple[list[str], list[str], list[str]]:
    """(desired, current, extras): sections `s*` and groups `g*` in a desired order, the same
    items in a random current order, plus items of `current` not in `desired`."""
    kinds = draw(st.lists(st.sampled_from("sg"), max_size=10))
    items = [f"{kind}{n}" for n, kind in enumerate(kinds)]
    desired = draw(st.permutations(items))
    extras = [f"x{kind}{n}" for n, kind in enumerate(draw(st.lists(st.sampled_from("sg"), max_size=2)))]
    current = draw(st.permutations(items + extras))
    return list(desired), list(current), extras


def _narrow(item: str) -> bool:
    return item.lstrip("x").startswith("s")


@given(_mixed_orders())
def test_mixed_moves_order_sections_among_sections(orders: tuple[list[str], list[str], list[str]]) -> None:
    """Applying the moves yields the desired order, no section's move names a group, sections
    move no more than they must among themselves, and only misplaced groups move."""
    desired, current, extras = orders
    moves = mixed_moves(desired, current, _narrow)
    order = list(current)
    for item, anchor in moves:
        if _narrow(item) and anchor is not None:
            assert _narrow(anchor[1]), (item, anchor)
        apply_move(order, item, anchor)
    assert [item for item in order if item not in extras] == desired
    sections = [item for item in desired if _narrow(item)]
    section_moves = [item for item, _ in moves if _narrow(item)]
    assert len(section_moves) == len(moves_to_order(sections, current))
    group_moves = [item for item, _ in moves if not _narrow(item)]
    assert len(group_moves) == len(set(group_moves))
    if not extras and order == current:
        assert moves == []
    assert mixed_moves(desired, order, _narrow) == [] or extras


def test_mixed_moves_alternating_top_level() -> None:
    """The issue's shape: Section A, Group B, Section C, with A last now."""
    moves = mixed_moves(["sA", "gB", "sC"], ["gB", "sC", "sA"], _narrow)
    assert moves == [("sA", ("before", "sC")), ("gB", ("after", "sA"))]
    order = ["gB", "sC", "sA"]
    for item, anchor in moves:
        apply_move(order, item, anchor)
    assert order == ["sA", "gB", "sC"]


def test_other_anchor_names_the_same_place_the_other_way() -> None:
    order = ["a", "b", "c"]
    assert other_anchor(order, "b", ("before", "c"), lambda _: True) == (("after", "a"),)
    assert other_anchor(order, "b", ("after", "a"), lambda _: True) == (("before", "c"),)
    assert other_anchor(order, "c", ("after", "b"), lambda _: True) == (None,)  # the end: no position
    assert other_anchor(order, "a", ("before", "b"), lambda _: True) is None
    assert other_anchor(order, "b", ("before", "c"), lambda other: other != "a") is None
    assert other_anchor(order, "b", None, lambda _: True) is None


@given(st.lists(st.integers(0, 14), unique=True), st.randoms(use_true_random=False))
def test_moves_side_by_side_give_the_order_whatever_order_they_land_in(current: list[int], rng: random.Random) -> None:
    """The moves `moves_waiting` lets run together, applied in any order the waits allow (as a
    service may answer concurrent moves), still give the desired order (0-9; what is missing
    is moved in from elsewhere, 10-14 are siblings the copy leaves alone)."""
    desired = list(range(10))
    moves = moves_to_order(desired, current)
    waits = moves_waiting(moves)
    order, done, pending = list(current), set(), list(range(len(moves)))
    while pending:
        ready = [i for i in pending if waits[i] is None or waits[i] in done]
        assert ready, "the moves wait for each other in a cycle"
        pick = rng.choice(ready)
        apply_move(order, *moves[pick])
        done.add(pick)
        pending.remove(pick)
    assert [item for item in order if item < 10] == desired
    assert [item for item in order if item >= 10] == [item for item in current if item >= 10]
    assert sum(w is None for w in waits) >= min(1, len(moves))  # something can start at once
