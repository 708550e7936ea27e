"""Benchmark of issue 22, case 11 (answers): peak RSS of syncd while several 200 MB answers are
in flight at once. Prints figures, asserts nothing.

`syncd sync src:ORG` runs as a process of its own (its peak RSS is that of its own memory
map, VmHWM when it exits: hostile's `run_syncd`), with the default settings (`concurrency` 16, 8 requests in
flight per tenant), pointed at `tests/hostile/hostile_server.py` (on a thread of this process)
in front of the emulator (a process of its own). Every listing of the organization
(`/v1/orgs/ORG/<list>`: members, teams, collections, spaces, ...) is answered by a valid 200 MB
list envelope, chunked (no Content-Length: the client has to count what it reads), so several
such answers stream at once. Three runs:

  1. baseline: plain forwarding (no oversized answer): what the run needs anyway;
  2. default: `answer_budget` 128 MiB (and `max_answer_bytes` 64 MiB): each 200 MB answer is
     refused once 64 MiB of it were read, and all the answers in flight hold 128 MiB at most;
  3. as before the budget: `answer_budget` raised to the cap times the requests in flight
     (8 x 64 MiB), which is what the per-answer cap alone allowed.
       target: default peak RSS                                 < 250 MB

Measured on the 2-core development machine: baseline 68 MB, default 193 MB, budget raised
551 MB. syncd before the budget (run 2 with `PYTHONPATH` naming a checkout of it) peaked at
741 MB: besides the 8 x 64 MiB read at once, each refused body lived on in its error's traceback.

The whole benchmark takes about a minute (three `syncd sync` runs, ~1.6 GB streamed each).

Run: .venv/bin/python bench/answer_memory.py [--answer-mb 200] [--before-budget 512MiB]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _util import run_benchmark, target
from aiohttp import web
from hostile import SPEC, TOKEN, SyncRun, run_syncd

from syncd.config import Settings
from syncd.emulator.process import emulator_process
from tests.hostile.hostile_server import MiB, HostileServer, inflate, write_config

LISTINGS = r"/v1/orgs/[^/]+/[a-z-]+"
"""Every listing of one organization (and its few single objects): several are read at once."""
MB = 1000 * 1000
RSS_TARGET_MB = 250.0


class InFlight:
    """A behaviour wrapper counting the oversized answers being streamed at once."""

    def __init__(self, behaviour: Any) -> None:
        self.behaviour = behaviour
        self.now = 0
        self.most = 0

    async def __call__(self, request: web.Request, server: HostileServer) -> web.StreamResponse:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            return await self.behaviour(request, server)
        finally:
            self.now -= 1


def sync_once(label: str, upstream: str, org: str, size: int | None, *, timeout: float, **settings: Any) -> tuple[SyncRun, int]:
    """`syncd sync src:ORG` through a fresh hostile server (every org listing `size` bytes,
    or plain forwarding when None): the run, and the most oversized answers streamed at once."""
    server = HostileServer(upstream=upstream)
    counter = InFlight(inflate(size, declare_length=False)) if size is not None else None
    if counter is not None:
        server.on(LISTINGS, counter)
    with server.in_thread() as hostile, tempfile.TemporaryDirectory(prefix="syncd-bench-answers-") as tmp:
        folder = Path(tmp)
        config = write_config(folder / "syncd.toml", hostile.url, TOKEN, **settings)
        code, seconds, rss, out, err = run_syncd("sync", f"src:{org}", "--config", str(config), cwd=folder, timeout=timeout)
        listed = sum(1 for path in hostile.paths("GET") if re.fullmatch(LISTINGS, path))
        run = SyncRun(label, code, seconds, rss, out, err, listed, hostile.sent_bytes)
    return run, counter.most if counter is not None else 0


def _size(n: int) -> str:
    return f"{n / MB:.0f} MB" if n >= 100_000 else f"{n:,} B"


def print_runs(runs: list[tuple[SyncRun, int]]) -> None:
    print(f"  {'run':<44} {'exit':>4} {'wall s':>7} {'peak RSS MB':>11} {'org GETs':>8} {'at once':>7} {'streamed':>9}")
    for run, most in runs:
        print(f"  {run.label:<44} {run.code:>4} {run.seconds:>7.2f} {run.rss_mb:>11.0f} {run.spaces_requests:>8} {most:>7} "
              f"{_size(run.sent_bytes):>9}")  # fmt: skip
    for run, _ in runs:
        for index, line in enumerate(run.outcome()):
            print(f"  {run.label + ':' if index == 0 else '':<45} {line[:160]}")


async def bench(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    size = args.answer_mb * MiB
    retry = {"max_attempts": 2, "initial_wait": "0.1s", "max_wait": "0.2s"}
    budget = Settings.model_fields["answer_budget"].default
    cap = Settings.model_fields["max_answer_bytes"].default
    print(f"spec: {SPEC}  seed: 7")
    print("syncd: `syncd sync src:ORG --config CFG`, a process of its own, default concurrency; peak RSS of that process (its VmHWM)")
    print(f"every org listing ({LISTINGS}) answers a chunked {size / MB:.0f} MB list envelope; columns: org GETs = requests of")
    print("those listings (attempts), at once = most oversized answers streamed at the same time, streamed = their bytes sent")
    with emulator_process(token=TOKEN, spec=SPEC, seed=7) as emulator:
        org = str(emulator.report["organizations"][0]["id"])
        print(f"emulator: {emulator.url} (separate process); org {org}")
        print()
        baseline = sync_once("baseline (plain forwarding)", emulator.url, org, None, timeout=args.timeout, retry=retry)
        default = sync_once(f"default (answer_budget {budget / MiB:g} MiB, cap {cap / MiB:g} MiB)", emulator.url, org, size,
                            timeout=args.timeout, retry=retry)  # fmt: skip
        before = sync_once(f"as before (answer_budget {args.before_budget})", emulator.url, org, size,
                           timeout=args.timeout, retry=retry, answer_budget=args.before_budget)  # fmt: skip
    print_runs([baseline, default, before])
    base, now, old = baseline[0].rss_mb, default[0].rss_mb, before[0].rss_mb
    print()
    print(f"default peak RSS {now:.0f} MB {target(now, RSS_TARGET_MB, below=True)}; baseline {base:.0f} MB (+{now - base:.0f} MB); "
          f"as before the budget {old:.0f} MB ({old / now:.1f}x the default)")  # fmt: skip
    print(f"benchmark total {time.perf_counter() - started:.0f} s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer-mb", type=int, default=200, help="size of each oversized answer, MiB")
    parser.add_argument("--before-budget", default="512MiB", help="answer_budget of the 'as before' run (cap x requests in flight)")
    parser.add_argument("--timeout", type=float, default=300.0, help="a syncd process still running after this is killed")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run_benchmark(bench, parse_args(argv))


if __name__ == "__main__":
    main()
