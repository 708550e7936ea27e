"""Reading and parsing API answers' bodies: bounded reads, one memory budget for every answer
in flight, JSON that cannot blow the stack, and the documented error body
`{"error": {"code", "message"}}`, whole or cut short.

Why apart from the client: these are pure functions of bytes (and one bounded read), tested
on their own against hostile input (tests/hostile/), while the client is about attempts.

Why a budget on top of the per-answer cap (`max_answer_bytes`): the cap bounds one answer, not
the answers read at once. Eight requests in flight, each fed a chunked 200 MB answer, held
8 x 64 MiB before each was refused (580 MB RSS). `AnswerBudget` is one count per process of
the answer bytes held (`answer_budget`): an answer reserves from it as its body arrives and
gives it back once its JSON is decoded; an answer that would take more than is left waits.

Why waiting cannot deadlock: every answer has a claim, the most it may grow to (its
Content-Length when that is the length of the body, else the cap), and a reservation is granted
only if the answers in flight could still all end in some order, each taking its whole claim
from what the others gave back (the banker's algorithm, for one resource). The answer with the
smallest remaining need can then always go on, so the budget never stalls with every answer
waiting. An answer that has not started yet waits behind the answers waiting before it, so a
stream of small answers cannot starve a large one.
"""

from __future__ import annotations

import asyncio
import json as jsonlib
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from syncd import json_codec
from syncd.api.errors import _REDACT_WINDOW

__all__ = [
    "DEFAULT_ANSWER_BUDGET",
    "AnswerBudget",
    "AnswerHolding",
    "allocation_bound",
    "budget_limit",
    "error_body",
    "is_blank",
    "loads",
    "loads_consuming",
    "read_capped",
    "shared_answer_budget",
]

DEFAULT_ANSWER_BUDGET = 128 * 1024 * 1024
"""Answer bytes one process holds at once (`answer_budget`): twice the default per-answer cap,
so one answer of the full cap reads while the others share the other half; with the rest of
the process (about 70 MB) this keeps the peak RSS well under 250 MB whatever the concurrency."""
RESERVE_STEP = 256 * 1024
"""Reservations of a body of unknown length grow by this much (fewer budget checks per answer)."""


def is_blank(raw: bytes | bytearray) -> bool:
    """Empty or white space only (without copying a large body, as `strip()` would)."""
    return not raw or raw.isspace()


def loads(raw: bytes | bytearray | str) -> Any:
    """`json.loads` (`syncd.json_codec`: orjson where it agrees), with nesting too deep for
    the parser as a ValueError (not a RecursionError)."""
    try:
        return json_codec.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def loads_consuming(raw: bytes | bytearray) -> Any:
    """`loads(raw)`, emptying `raw` (a bytearray) as soon as it is decoded: a large answer is
    held as bytes and objects (orjson), or as bytes and text, then as text and objects, never
    as all three (`json.loads` of bytes keeps the bytes until it returns). The encoding is
    found as `json.loads` finds it."""
    value = json_codec.loads_fast(raw)
    if value is not json_codec.REFUSED:
        if isinstance(raw, bytearray):
            raw.clear()
        return value
    text = raw.decode(jsonlib.detect_encoding(raw), "surrogatepass")
    if isinstance(raw, bytearray):
        raw.clear()
    return loads(text)


_MESSAGE_START = re.compile(rb'"message"\s*:\s*"')
_STRING_BODY = re.compile(rb'(?:[^"\\]|\\.)*')


def _message_start(raw: bytes | bytearray) -> str | None:
    """The start of the `message` string of an error body cut short (not parsable whole)."""
    found = _MESSAGE_START.search(raw, 0, _REDACT_WINDOW)
    if found is None:
        return None
    window = bytes(raw[found.end() : found.end() + _REDACT_WINDOW])
    body = _STRING_BODY.match(window)
    text = body.group(0) if body else b""
    for trim in range(7):  # an escape cut in the middle (`\u12`) is dropped
        try:
            value = jsonlib.loads(b'"' + text[: len(text) - trim] + b'"')
        except ValueError:
            continue
        return value if isinstance(value, str) and value.strip() else None
    return None


def error_body(raw: bytes | bytearray, complete: bool = True) -> tuple[int | str | None, str | None]:
    """(code, message) of the documented error body `{"error": {"code", "message"}}`; of a
    body cut short (`complete=False`), the start of its message if it has one."""
    if not complete:
        return None, _message_start(raw)
    try:
        data = loads(raw)
    except ValueError:
        return None, None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None, None
    code = error.get("code")
    message = error.get("message")
    return (
        code if isinstance(code, int | str) and not isinstance(code, bool) else None,
        message if isinstance(message, str) and message.strip() else None,
    )


@dataclass(eq=False)
class AnswerHolding:
    """The bytes one answer has reserved from its budget (`held`) and the most it may
    reserve (`claim`). Made by `AnswerBudget.answer`; `grow_to` before holding more bytes."""

    budget: AnswerBudget
    claim: int
    held: int = 0

    async def grow_to(self, total: int) -> None:
        """Reserve up to `total` bytes in all, waiting while the budget cannot grant them safely."""
        if total > self.held:
            await self.budget._grant(self, total)

    def lower_claim(self, claim: int) -> None:
        """The answer will not need more than `claim` (its body's length is known now)."""
        self.budget._lower_claim(self, claim)


@dataclass(eq=False)
class _Waiter:
    holding: AnswerHolding
    total: int
    event: asyncio.Event
    loop: asyncio.AbstractEventLoop
    granted: bool = False


@dataclass(eq=False)
class AnswerBudget:
    """The answer bytes this process holds at once, across every client and run: at most
    `limit`. `held` is the count now, `peak` the highest it has been, `waits` how many
    reservations had to wait (module docstring: why the waits cannot deadlock).

    Thread-safe: one process may run event loops on several threads (tests do), and they share
    the budget; a waiter is woken in its own loop (aiohttp ties syncd to asyncio anyway)."""

    limit: int
    held: int = 0
    peak: int = 0
    waits: int = 0
    _holdings: set[AnswerHolding] = field(default_factory=set, repr=False)
    _waiters: list[_Waiter] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @asynccontextmanager
    async def answer(self, claim: int) -> AsyncIterator[AnswerHolding]:
        """A holding for one answer of at most `claim` bytes (clamped to the budget), given
        back whole when the block ends, however it ends."""
        holding = AnswerHolding(self, min(claim, self.limit))
        try:
            yield holding
        finally:
            self._release(holding)

    def _safe(self, changed: AnswerHolding, total: int) -> bool:
        """Whether `changed` may hold `total` bytes: within the limit, and every answer that
        holds bytes could still get its whole claim in some order (smallest need first)."""
        held = self.held - changed.held + total
        if held > self.limit:
            return False
        others = [(h.claim - h.held, h.held) for h in self._holdings if h is not changed]
        needs = sorted([*others, (changed.claim - total, total)])
        free = self.limit - held
        for need, holds in needs:
            if need > free:
                return False
            free += holds
        return True

    async def _grant(self, holding: AnswerHolding, total: int) -> None:
        with self._lock:
            # Over the claim only if a Content-Length lied (aiohttp reads no more than it says).
            holding.claim = max(holding.claim, min(total, self.limit))
            total = min(holding.claim, max(total, holding.held + RESERVE_STEP))
            if not (holding.held == 0 and self._waiters) and self._safe(holding, total):
                self._apply(holding, total)
                return
            waiter = _Waiter(holding, total, asyncio.Event(), asyncio.get_running_loop())
            self._waiters.append(waiter)
            self.waits += 1
        try:
            await waiter.event.wait()
        finally:
            woken: list[_Waiter] = []
            with self._lock:
                if not waiter.granted:
                    self._waiters.remove(waiter)
                    woken = self._wake()
            self._notify(woken)

    def _apply(self, holding: AnswerHolding, total: int) -> None:
        self.held += total - holding.held
        holding.held = total
        self._holdings.add(holding)
        self.peak = max(self.peak, self.held)

    def _lower_claim(self, holding: AnswerHolding, claim: int) -> None:
        woken: list[_Waiter] = []
        with self._lock:
            if holding.held <= claim < holding.claim:
                holding.claim = claim
                woken = self._wake()
        self._notify(woken)

    def _release(self, holding: AnswerHolding) -> None:
        woken: list[_Waiter] = []
        with self._lock:
            if holding in self._holdings:
                self._holdings.discard(holding)
                self.held -= holding.held
                holding.held = 0
                woken = self._wake()
        self._notify(woken)

    def _wake(self) -> list[_Waiter]:
        """Grant (lock held) what can be granted safely, in the order asked; an answer not
        started yet is not granted before an earlier waiter. The waiters granted, to notify."""
        blocked = False
        granted: list[_Waiter] = []
        for waiter in list(self._waiters):
            starting = waiter.holding.held == 0
            if (blocked and starting) or not self._safe(waiter.holding, waiter.total):
                blocked = True
                continue
            self._apply(waiter.holding, waiter.total)
            waiter.granted = True
            self._waiters.remove(waiter)
            granted.append(waiter)
        return granted

    def _notify(self, woken: list[_Waiter]) -> None:
        """Wake each granted waiter in its own event loop (lock not held)."""
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        for waiter in woken:
            if waiter.loop is here:
                waiter.event.set()
                continue
            try:
                waiter.loop.call_soon_threadsafe(waiter.event.set)
            except RuntimeError:  # its loop is closed: nobody will use or give back the grant
                self._release(waiter.holding)


_SHARED_BUDGETS: dict[int, AnswerBudget] = {}
_SHARED_LOCK = threading.Lock()


def shared_answer_budget(limit: int = DEFAULT_ANSWER_BUDGET) -> AnswerBudget:
    """The process's budget of `limit` bytes, shared by every client configured with it.

    One per limit rather than one per process: a reload that changes `answer_budget` starts
    a new budget for new clients while the answers of the old one end."""
    with _SHARED_LOCK:
        return _SHARED_BUDGETS.setdefault(limit, AnswerBudget(limit))


def budget_limit(answer_budget: int, max_answer_bytes: int) -> int:
    """The budget in force: `answer_budget`, raised to what one answer of `max_answer_bytes`
    takes if that is more (a budget one answer cannot fit in would refuse every large one)."""
    return max(answer_budget, allocation_bound(max_answer_bytes))


def _declared_body_length(resp: aiohttp.ClientResponse) -> int | None:
    """The Content-Length when it is the length of the body read (no content coding: a
    gzipped body grows as it is decoded)."""
    coding = resp.headers.get("Content-Encoding", "identity").strip().lower()
    return resp.content_length if coding in ("", "identity") else None


async def read_capped(
    resp: aiohttp.ClientResponse,
    cap: int,
    *,
    refuse_declared: bool = True,
    holding: AnswerHolding | None = None,
) -> tuple[bytearray, bool]:
    """(body, True) when the body is at most `cap` bytes; else (its first bytes, at most
    `cap`, False), and the connection is closed: the rest is never read. A Content-Length over
    the cap is refused before reading (unless `refuse_declared` is False: then the start is
    read); without one, bytes are counted as they come. With a `holding`, the memory every
    byte kept takes (`allocation_bound`) is reserved from its budget before it is kept."""
    declared = resp.content_length
    if refuse_declared and declared is not None and declared > cap:
        resp.close()
        return bytearray(), False
    if holding is not None:
        length = _declared_body_length(resp) if refuse_declared else None
        holding.lower_claim(allocation_bound(min(cap, length) if length is not None else cap))
    body = bytearray()
    try:
        async for chunk in resp.content.iter_any():
            cut = len(body) + len(chunk) > cap
            if cut:
                chunk = chunk[: cap - len(body)]
            if holding is not None:
                await holding.grow_to(allocation_bound(len(body) + len(chunk)))
            body += chunk
            if cut:
                resp.close()
                return body, False
    except BaseException:
        body.clear()  # not kept alive by the traceback of a timeout or a dropped connection
        raise
    return body, True


def allocation_bound(size: int) -> int:
    """The most memory a bytearray grown chunk by chunk to `size` bytes takes: CPython
    over-allocates up to an eighth when it grows one (`PyByteArray_Resize`)."""
    return size + (size >> 3) + 8
