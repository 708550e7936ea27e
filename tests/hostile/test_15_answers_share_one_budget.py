"""Issue 22, case 11 (answers): the answers in flight share one memory budget.

Before: the answer cap (`max_answer_bytes`, 64 MiB) was per request, so eight requests in
flight each fed a chunked 200 MB answer held 8 x 64 MiB at once (580 MB RSS), and a refused
answer's bytes stayed alive in the traceback of its error (740 MB in `bench/answer_memory.py`).
Now every byte of a body is reserved from the process's `answer_budget` before it is kept, the
budget is shared by every client of the process, and a refused body is dropped at once.
(`bench/answer_memory.py` measures the peak RSS; these tests read the budget's own counters.)
"""

from __future__ import annotations

import random
import threading
from typing import Any

import anyio
import pytest

from syncd.api import AnswerTooLarge, TenantClient, make_global_limiter
from syncd.api import answers as answers_module
from syncd.config import RetryConfig, Settings
from tests.hostile.hostile_server import MiB, HostileServer, inflate

KiB = 1024
FAST = RetryConfig(max_attempts=2, initial_wait=0.01, max_wait=0.02)


def _settings(url: str, **extra: Any) -> Settings:
    return Settings.model_validate(
        {
            "tenants": {
                "src": {"base_url": url, "token": "budget-token-src"},
                "dst": {"base_url": url, "token": "budget-token-dst"},
            },
            "retry": {"max_attempts": 2, "initial_wait": 0.01, "max_wait": 0.02},
            **extra,
        }
    )


async def test_case11_answers_in_flight_never_hold_more_than_the_budget() -> None:
    """Two tenants' clients, ten 600 KiB answers at once (chunked and with a Content-Length),
    a 1 MiB budget: every answer is taken whole, and the bytes held at once never pass 1 MiB."""
    async with HostileServer() as hostile:
        hostile.on(r"/v1/chunked/\d+", inflate(600 * KiB, declare_length=False))
        hostile.on(r"/v1/declared/\d+", inflate(600 * KiB, declare_length=True))
        settings = _settings(hostile.url, answer_budget="1MiB", max_answer_bytes="700KiB")
        limiter = make_global_limiter(settings)
        async with (
            TenantClient.from_settings(settings, "src", limiter) as src,
            TenantClient.from_settings(settings, "dst", limiter) as dst,
        ):
            budget = src.answer_budget
            assert budget is dst.answer_budget is answers_module.shared_answer_budget(MiB) and budget.limit == MiB
            waits_before = budget.waits
            sizes: list[int] = []

            async def fetch(api: TenantClient, path: str) -> None:
                data = await api.get_json(path)
                sizes.append(len(data["pad"]))

            async with anyio.create_task_group() as group:
                for n in range(5):
                    group.start_soon(fetch, src, f"/v1/chunked/{n}")
                    group.start_soon(fetch, dst, f"/v1/declared/{n}")
    assert len(sizes) == 10 and all(size > 600 * KiB - 100 for size in sizes), sizes
    assert 0 < budget.peak <= MiB, budget
    assert budget.waits > waits_before, "the answers never had to wait: the test did not load the budget"
    assert budget.held == 0, budget


async def test_case11_a_budget_below_the_cap_is_raised_to_fit_one_answer() -> None:
    """`answer_budget` below what one answer of `max_answer_bytes` takes: raised to that, so an
    answer just under the cap is still taken (not stalled or refused by the budget)."""
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", inflate(MiB - 100, declare_length=False))
        settings = _settings(hostile.url, answer_budget="64KiB", max_answer_bytes="1MiB")
        async with TenantClient.from_settings(settings, "src", make_global_limiter(settings)) as api:
            data = await api.get_json("/v1/orgs")
            assert api.answer_budget.limit == answers_module.allocation_bound(MiB)
    assert len(data["pad"]) > MiB - 200


async def test_case11_a_refused_answer_is_not_kept_alive_by_its_error() -> None:
    """The error of an answer over the cap holds none of its bytes (its traceback's frames held
    the 64 MiB read before the refusal for as long as the error was kept)."""
    async with HostileServer() as hostile:
        hostile.on("/v1/orgs", inflate(8 * MiB, declare_length=False))
        async with TenantClient("src", hostile.url, "budget-token-1", retry=FAST, max_answer_bytes=2 * MiB) as api:
            with pytest.raises(AnswerTooLarge) as caught:
                await api.get_json("/v1/orgs")
    held = _bytes_in_frames(caught.value)
    assert held < 64 * KiB, f"the error's frames still hold {held} bytes of the refused answer"


def _bytes_in_frames(error: BaseException) -> int:
    """Bytes of the bytes/bytearray locals of every frame an error (and its context) holds."""
    total, seen = 0, set()
    stack: list[BaseException | None] = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        stack += [current.__context__, current.__cause__]
        tb = current.__traceback__
        while tb is not None:
            for value in tb.tb_frame.f_locals.values():
                if isinstance(value, bytes | bytearray):
                    total += len(value)
            tb = tb.tb_next
    return total


async def _growing_answers(budget: Any, count: int, seed: int) -> int:
    """`count` answers of random sizes growing at once in `budget`, in random steps; how many ended."""
    claim = 700 * KiB
    rng = random.Random(seed)
    ended = 0

    async def one_answer(size: int) -> None:
        nonlocal ended
        async with budget.answer(claim) as holding:
            got = 0
            while got < size:
                got = min(size, got + rng.choice((4, 64, 200)) * KiB)
                await holding.grow_to(got)
                assert budget.held <= budget.limit
                await anyio.sleep(0)
        ended += 1

    with anyio.fail_after(30):  # a hang guard, not a timing assertion: a stall never ends
        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(one_answer, rng.randint(1, claim))
    return ended


async def test_case11_growing_answers_never_stall_the_budget() -> None:
    """Many answers growing at once in a budget that holds fewer than two at their claim:
    each grant keeps a safe order (the banker's rule), so all end; held never passes the limit."""
    budget = answers_module.AnswerBudget(limit=MiB)
    assert await _growing_answers(budget, 40, seed=7) == 40
    assert budget.held == 0 and 0 < budget.peak <= MiB and budget.waits > 0, budget


def test_case11_event_loops_on_two_threads_share_one_budget() -> None:
    """The budget is the process's: answers of two event loops on two threads wait for each
    other (woken in their own loop) and the count stays exact."""
    budget = answers_module.AnswerBudget(limit=MiB)
    ended: list[int] = []

    def loop_of_its_own(seed: int) -> None:
        ended.append(anyio.run(_growing_answers, budget, 30, seed))

    threads = [threading.Thread(target=loop_of_its_own, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert ended == [30, 30] and budget.held == 0 and 0 < budget.peak <= MiB and budget.waits > 0, (ended, budget)


def test_case11_the_default_budget_is_well_under_250_mb_whatever_the_concurrency() -> None:
    settings = Settings.model_validate({"concurrency": 4096})
    assert int(settings.answer_budget) == answers_module.DEFAULT_ANSWER_BUDGET == 128 * MiB
    assert int(settings.max_answer_bytes) == 64 * MiB
    assert answers_module.allocation_bound(64 * MiB) < 128 * MiB  # one answer at the cap fits
