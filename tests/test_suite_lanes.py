"""The suite's own scheduling (tests/conftest.py): the `long` tests are shared between lanes at
the front of xdist's contiguous shares, so no worker runs them all one after another."""

from __future__ import annotations

from tests.conftest import placed_in_lanes


def shares(total: int, workers: int) -> list[int]:
    """What xdist's worksteal scheduler hands each idle worker at the start: the rest divided by
    the workers left, from the front."""
    out, remaining = [], total
    for i in range(workers):
        out.append(remaining // (workers - i))
        remaining -= out[-1]
    return out


def test_long_tests_head_the_first_shares_longest_first_to_the_lane_that_ends_soonest() -> None:
    seconds = {"fleet": 140.0, "soak-a": 80.0, "soak-b": 80.0, "property": 70.0}
    rest = [f"t{i}" for i in range(20)]
    placed = placed_in_lanes(list(seconds), rest, 3, 2, seconds.__getitem__)
    assert sorted(placed) == sorted([*seconds, *rest])
    first, second, third = shares(len(placed), 3)
    assert placed[:2] == ["fleet", "property"]  # 140 + 70 s
    assert placed[first : first + 2] == ["soak-a", "soak-b"]  # 160 s
    assert not set(seconds) & set(placed[first + second :])
    assert [name for name in placed if name in rest] == rest  # the others keep their order


def test_without_room_or_lanes_the_long_tests_simply_go_first() -> None:
    seconds = {"a": 80.0, "b": 70.0, "c": 60.0}
    # Four tests on three workers: shares of 1, 1 and 2, and the second lane holds b and c.
    assert placed_in_lanes(["a", "b", "c"], ["x"], 3, 2, seconds.__getitem__) == ["a", "b", "c", "x"]
    assert placed_in_lanes(["a", "b"], ["x", "y"], 1, 0, seconds.__getitem__) == ["a", "b", "x", "y"]
    # Room enough: b heads the second share.
    assert placed_in_lanes(["a", "b"], ["x", "y", "z", "w"], 3, 2, seconds.__getitem__) == ["a", "x", "b", "y", "z", "w"]
