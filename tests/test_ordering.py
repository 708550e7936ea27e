"""Minimal moves: a reorder reports only what really moved."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from syncd.ordering import longest_increasing, moved_items


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
