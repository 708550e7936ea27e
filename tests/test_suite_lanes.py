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


def test_waiting_tests_share_the_first_lane_and_busy_ones_the_others() -> None:
    seconds = {"fleet": 140.0, "soak-a": 80.0, "soak-b": 80.0, "property": 70.0}
    rest = [f"t{i}" for i in range(20)]
    placed = placed_in_lanes(list(seconds), rest, 3, 2, seconds.__getitem__, lambda name: name == "property")
    assert sorted(placed) == sorted([*seconds, *rest])
    first, second, third = shares(len(placed), 3)
    assert placed[:3] == ["fleet", "soak-a", "soak-b"]  # they wait: 300 s on one worker, two keep the cores busy
    assert placed[first : first + 1] == ["property"]
    assert placed[first + 1] == "t" + str(first - 3)  # the others around them, in their order
    assert not set(seconds) & set(placed[first + second :])
    assert [name for name in placed if name in rest] == rest


def test_busy_tests_go_longest_first_to_the_busy_lane_that_ends_soonest() -> None:
    seconds = {"wait": 100.0, "b1": 90.0, "b2": 60.0, "b3": 50.0}
    rest = [f"t{i}" for i in range(40)]
    placed = placed_in_lanes(list(seconds), rest, 4, 3, seconds.__getitem__, lambda name: name != "wait")
    first, second, third, _ = shares(len(placed), 4)
    assert placed[0] == "wait"
    assert placed[first] == "b1"
    assert placed[first + second : first + second + 2] == ["b2", "b3"]  # 110 s against b1's 90
    # One lane: everything in it, waiting or not.
    assert placed_in_lanes(["a", "b"], rest, 2, 1, {"a": 9.0, "b": 5.0}.__getitem__, lambda name: name == "b")[:2] == ["a", "b"]


def test_without_room_or_lanes_the_long_tests_simply_go_first() -> None:
    seconds = {"a": 80.0, "b": 70.0, "c": 60.0}
    # Four tests on three workers: shares of 1, 1 and 2, and the second lane holds b and c.
    assert placed_in_lanes(["a", "b", "c"], ["x"], 3, 2, seconds.__getitem__, lambda name: name != "a") == ["a", "b", "c", "x"]
    assert placed_in_lanes(["a", "b"], ["x", "y"], 1, 0, seconds.__getitem__) == ["a", "b", "x", "y"]
    # Room enough: a busy b heads the second share; a waiting one follows a.
    assert placed_in_lanes(["a", "b"], ["x", "y", "z", "w"], 3, 2, seconds.__getitem__, lambda name: name == "b") == ["a", "x", "b", "y", "z", "w"]
    assert placed_in_lanes(["a", "b"], ["x", "y", "z", "w"], 3, 2, seconds.__getitem__) == ["a", "b", "x", "y", "z", "w"]
