"""Helpers of the benchmarks: the emulator's counters, peak RSS, formatting, the runner.

The benchmarks start the emulator as a process of its own (`syncd.emulator.process`), so
that their peak RSS and CPU are syncd's own and the server's work does not share syncd's
event loop.
"""

from __future__ import annotations

import resource
import sys
from typing import Any

import aiohttp


async def emulator_stats(url: str) -> dict[str, Any]:
    """The emulator's request counters (`/_emulator/stats`)."""
    async with aiohttp.ClientSession() as session, session.get(url + "/_emulator/stats") as resp:
        resp.raise_for_status()
        data: dict[str, Any] = await resp.json()
        return data


async def reset_emulator_stats(url: str) -> None:
    async with aiohttp.ClientSession() as session, session.delete(url + "/_emulator/stats") as resp:
        resp.raise_for_status()


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def target(value: float, limit: float, *, below: bool = False) -> str:
    """`(target <= 1.15)` or `(target <= 1.15: MISSED)`."""
    sign = "<" if below else "<="
    ok = value < limit if below else value <= limit
    return f"(target {sign} {limit:g})" if ok else f"(target {sign} {limit:g}: MISSED)"


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends a benchmark like Ctrl-C: the emulator process is stopped too."""
    raise KeyboardInterrupt


def run_benchmark(bench: Any, args: Any) -> None:
    """Run `bench(args)` under anyio; Ctrl-C and SIGTERM end it with status 130."""
    import signal

    from syncd import event_loop

    signal.signal(signal.SIGTERM, _interrupt)
    print(f"event loop: {'uvloop' if event_loop.uvloop_in_use() else 'asyncio'}")
    try:
        event_loop.run(bench, args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
