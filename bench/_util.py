"""Helpers of the benchmarks: the emulator's counters, peak RSS, formatting, the runner.

The benchmarks start the emulator as a process of its own (`syncd.emulator.process`), so
that their peak RSS and CPU are syncd's own and the server's work does not share syncd's
event loop.
"""

from __future__ import annotations

import json
import resource
import sys
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp


async def emulator_stats(url: str) -> dict[str, Any]:
    """The emulator's request counters (`/_emulator/stats`)."""
    async with aiohttp.ClientSession() as session, session.get(url + "/_emulator/stats") as resp:
        resp.raise_for_status()
        data: dict[str, Any] = await resp.json()
        return data


def emulator_stats_now(url: str) -> dict[str, Any]:
    """The emulator's request counters, synchronously (the emulator is another process)."""
    with urllib.request.urlopen(url + "/_emulator/stats", timeout=30) as resp:
        data: dict[str, Any] = json.loads(resp.read())
        return data


def reset_emulator_stats_now(url: str) -> None:
    """Zero the emulator's request counters, synchronously (the emulator is another process)."""
    request = urllib.request.Request(url + "/_emulator/stats", method="DELETE")
    with urllib.request.urlopen(request, timeout=30):
        pass


async def reset_emulator_stats(url: str) -> None:
    async with aiohttp.ClientSession() as session, session.delete(url + "/_emulator/stats") as resp:
        resp.raise_for_status()


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def answer_budget_mb() -> float:
    """The answer budget syncd runs with by default (`answer_budget`, raised to fit one answer)."""
    from syncd.api.answers import budget_limit
    from syncd.config.settings import Settings

    defaults = Settings()
    return budget_limit(int(defaults.answer_budget), int(defaults.max_answer_bytes)) / 2**20


def user_config(folder: Path, tenants: dict[str, tuple[str, str]]) -> Path:
    """A configuration as a user writes it: a state directory and each tenant's URL and token."""
    q = json.dumps
    lines = [f"state_dir = {q(str(folder / 'state'))}", 'log_level = "warning"']
    for name, (url, token) in tenants.items():
        lines += [f"[tenants.{name}]", f"base_url = {q(url)}", f"token = {q(token)}"]
    path = folder / "syncd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


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
