"""The bound on content imports at once (`syncd.copy.import_bound`) as pure functions and as
a limiter: it follows the connections the content source saw one import open, and a refusal
halves the imports at once, never widens them."""

from __future__ import annotations

import anyio
import pytest

from syncd.copy.import_bound import FIRST_GUESS, ImportBound, imports_at_once, per_import_after


@pytest.mark.parametrize(("connections", "per_import", "expected"), [(128, 16, 8), (128, 32, 4), (32, 32, 1), (8, 32, 1), (128, 3, 42)])
def test_imports_at_once_is_the_source_over_an_import(connections: int, per_import: int, expected: int) -> None:
    assert imports_at_once(connections, per_import) == expected


def test_a_refusal_doubles_the_figure_and_a_smaller_import_never_lowers_it() -> None:
    assert per_import_after(8, 32, refused=False, max_connections=128) == 32
    assert per_import_after(32, 4, refused=False, max_connections=128) == 32
    assert per_import_after(8, 6, refused=True, max_connections=128) == 16
    assert per_import_after(100, 6, refused=True, max_connections=128) == 128  # never above the whole source


async def _learned(seen: list[int], refusals: list[int], max_connections: int = 128) -> ImportBound:
    """A bound that took in imports that opened `seen` connections, the source's refusal count
    moving as `refusals` says (before and after each import)."""
    count = [0]
    bound = ImportBound(max_connections, seen=lambda space: seen[int(space)], refused=lambda: count[0])
    for n, refused in enumerate(refusals):
        before = bound.refusals()
        count[0] += refused
        bound.learn(str(n), before if refused else None)
    return bound


async def test_the_first_whole_import_replaces_the_guess_then_the_most_seen_holds() -> None:
    bound = ImportBound(128)
    assert bound.width == 128 // FIRST_GUESS and not bound.narrowed
    bound = await _learned([4, 2], [0, 0])
    assert (bound.per_import, bound.width, bound.narrowed) == (4, 32, False)
    bound = await _learned([4, 32, 2], [0, 0, 0])
    assert (bound.per_import, bound.width, bound.narrowed) == (32, 4, True)
    assert "4 at once, 128 connections of the content source ÷ 32 per import (the most one import opened)" in bound.describe()


async def test_a_refused_import_never_widens_the_bound() -> None:
    bound = await _learned([3], [1])  # cut short at 3 connections: the guess is not replaced by 3
    assert bound.per_import == 2 * FIRST_GUESS and bound.width == 4


async def test_the_limiter_follows_the_figure_while_imports_hold_places() -> None:
    bound = ImportBound(64, seen=lambda space: 32, refused=lambda: 0)
    held = [object(), object()]
    for borrower in held:  # two in flight at the first guess (4 at once)
        await bound.limiter.acquire_on_behalf_of(borrower)
    bound.learn("a", None)
    assert bound.width == 2 and bound.limiter.available_tokens == 0
    for borrower in held:
        bound.limiter.release_on_behalf_of(borrower)
    assert bound.limiter.available_tokens == 2
