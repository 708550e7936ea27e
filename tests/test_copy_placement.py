"""The turn of creates into one listing (`syncd.copy.placement`): the plan's order, last-first
for a kind seen to land new objects first, and a cancelled waiter never keeps the turn."""

from __future__ import annotations

import anyio

from syncd.copy.placement import Placement, Turnstile


async def _order(placement: Placement, ops: list[tuple[int, str]]) -> list[int]:
    """Indexes in the order they got the turn: the first takes it, the rest queue meanwhile."""
    turnstile, got = Turnstile(placement), []

    async def op(index: int, kind: str) -> None:
        await turnstile.acquire(index, kind)
        got.append(index)
        await anyio.sleep(0.01)
        turnstile.release(index)

    async with anyio.create_task_group() as tg:
        for index, kind in ops:
            tg.start_soon(op, index, kind)
            await anyio.sleep(0)  # in this order at the turnstile
    return got


async def test_the_turn_goes_in_plan_order_then_last_first_where_new_objects_land_first() -> None:
    ops = [(0, "space"), (3, "space"), (1, "space"), (2, "space"), (4, "collection")]
    assert await _order(Placement(), ops) == [0, 1, 2, 3, 4]
    first = Placement()
    assert first.look("space", "a", "b", ["b", "a", "x"]) == "first"
    assert await _order(first, ops) == [0, 3, 2, 1, 4]  # the spaces last-first; the collection after them
    last = Placement()
    assert last.look("space", "a", "b", ["x", "a", "b"]) == "last" and not last.newest_first("space")


def test_a_look_that_does_not_show_both_objects_tells_nothing_and_looking_stops_after_three() -> None:
    placement = Placement()
    for _ in range(Placement.LOOKS):
        assert placement.wanted("site-space")
        assert placement.look("site-space", "a", "b", ["b", "x"]) is None
    assert not placement.wanted("site-space") and not placement.newest_first("site-space")


async def test_a_waiter_cancelled_before_its_turn_leaves_the_queue() -> None:
    turnstile = Turnstile(Placement())
    await turnstile.acquire(0, "space")
    got: list[int] = []

    async def op(index: int, scope: anyio.CancelScope | None = None) -> None:
        with scope or anyio.CancelScope():
            await turnstile.acquire(index, "space")
            got.append(index)
            turnstile.release(index)

    async with anyio.create_task_group() as tg:
        doomed = anyio.CancelScope()
        tg.start_soon(op, 1, doomed)
        tg.start_soon(op, 2)
        await anyio.sleep(0.01)
        assert turnstile.waiting == 2
        doomed.cancel()
        await anyio.sleep(0.01)
        assert turnstile.waiting == 1  # 1 is gone; the turn is still 0's
        turnstile.release(0)
    assert got == [2] and not turnstile.held and turnstile.waiting == 0
