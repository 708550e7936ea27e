"""Benchmark of issue 11's two measurable limits: prints figures and ratios, asserts nothing.

Each limit is measured against a baseline run in the same benchmark, `syncd sync src:ORG`
being a process of its own (its peak RSS is that of its own memory map, VmHWM when it exits),
pointed at `tests/hostile/hostile_server.py` in front of the emulator (a process of its own
too; the hostile server runs on a thread of the benchmark):

  1. A 200 MB answer: the organization's spaces listing is a valid 200 MB list envelope,
     chunked (no Content-Length: the client has to count). Run with the default cap
     (`max_answer_bytes`, 64 MiB), then with the cap raised above the answer (the behaviour
     before the cap existed: the answer is read and parsed whole).
       target: capped peak RSS                                  < 250 MB
  2. A trickled body: every spaces listing is sent one byte every 0.5 s (never idle long
     enough for a read timeout), with `request_timeout = "1s"` and short retry waits; the
     baseline is the same run with no hostile rule (plain forwarding).
       target: wall <= max_attempts x request_timeout + (max_attempts - 1) x max_wait + 5 s
     Before the deadline covered the whole body the trickled run did not end in time (at 2
     bytes a second a listing of a few KB takes tens of minutes); it is not run here.

The whole benchmark takes ~10 s (a 200 MiB answer, four short `syncd sync` runs).

Run: .venv/bin/python bench/hostile.py [--answer-mb 200] [--raised-cap 512MiB]
         [--request-timeout 1] [--interval 0.5] [--attempts 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _util import run_benchmark, target

from syncd.config import Settings
from syncd.emulator.process import emulator_process
from tests.hostile.hostile_server import MiB, HostileServer, inflate, run_cli, trickle, write_config

SPEC = "orgs=2,collections=4,spaces=8,pages=5,files=2,sites=2,sections=3,members=4,teams=2,comments=2,change_requests=1"
"""The hostile suite's tenant (tests/conftest.py `SMALL`): small, the run is all about one listing."""
TOKEN = "bench-token"
SPACES = r"/v1/orgs/[^/]+/spaces"
MB = 1000 * 1000
RSS_TARGET_MB = 250.0


@dataclass
class SyncRun:
    """One finished `syncd sync` process as the benchmark sees it."""

    label: str
    code: int
    seconds: float
    peak_rss: int
    """Bytes (the kernel's ru_maxrss of that process alone)."""
    stdout: str
    stderr: str
    spaces_requests: int
    sent_bytes: int
    """Body bytes the hostile server's behaviours streamed (forwarded answers not counted)."""

    @property
    def requests(self) -> int | None:
        """Requests syncd says it made (its `run N ...` summary line), None without one."""
        found = re.search(r"with ([\d,]+) requests", self.stdout)
        return int(found.group(1).replace(",", "")) if found else None

    @property
    def rss_mb(self) -> float:
        return self.peak_rss / MB

    def outcome(self) -> list[str]:
        """How the run ended: syncd's `run N ...` summary line, then why a listing could not
        be read (the error after the path), when one could not."""
        lines = [line.strip() for line in self.stdout.splitlines()]
        summary = [line for line in lines if re.match(r"run \d+ ", line)]
        failed = [line.split(": ", 1)[-1] for line in lines if line.startswith("could not read ")]
        errors = [line.strip() for line in self.stderr.splitlines() if line.startswith("syncd: error:")]
        return (summary[-1:] or errors[-1:] or ["(no summary line)"]) + failed[:1]


def clean_environment() -> dict[str, str]:
    """This process's environment without SYNCD_* (a developer's own settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNCD_")}
    env.update({"COLUMNS": "400", "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"})
    return env


def run_syncd(*args: str, cwd: Path, timeout: float) -> tuple[int, float, int, str, str]:
    """`python -m syncd.cli ARGS` to its end, measured by tests/hostile's `run_cli` (wall
    seconds, the peak RSS of its own memory map) in `clean_environment()`; killed after
    `timeout` s, and killed if this process is interrupted while waiting."""
    run = run_cli(*args, cwd=cwd, timeout=timeout, base_env=clean_environment(), env={"COLUMNS": "400"})
    return run.returncode, run.seconds, run.peak_rss, run.stdout, run.stderr


@contextlib.contextmanager
def hostile_in_front(upstream: str, rule: Any | None) -> Iterator[HostileServer]:
    """A fresh hostile server on a thread of its own, forwarding to `upstream`; `rule`
    answers every spaces listing (None: plain forwarding)."""
    server = HostileServer(upstream=upstream)
    if rule is not None:
        server.on(SPACES, rule)
    with server.in_thread():
        yield server


def sync_once(label: str, upstream: str, org: str, rule: Any | None, *, timeout: float, **settings: Any) -> SyncRun:
    """`syncd sync src:ORG` through a fresh hostile server, on a fresh state folder."""
    with hostile_in_front(upstream, rule) as hostile, tempfile.TemporaryDirectory(prefix="syncd-bench-hostile-") as tmp:
        folder = Path(tmp)
        config = write_config(folder / "syncd.toml", hostile.url, TOKEN, **settings)
        code, seconds, rss, out, err = run_syncd("sync", f"src:{org}", "--config", str(config), cwd=folder, timeout=timeout)
        spaces = sum(1 for path in hostile.paths("GET") if re.fullmatch(SPACES, path))
        return SyncRun(label, code, seconds, rss, out, err, spaces, hostile.sent_bytes)


def _short(text: str, width: int = 170) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _size(n: int) -> str:
    return f"{n / MB:.1f} MB" if n >= 100_000 else f"{n:,} B"


def print_runs(runs: list[SyncRun]) -> None:
    print(f"  {'run':<34} {'exit':>4} {'wall s':>7} {'peak RSS MB':>11} {'requests':>8} {'spaces GETs':>11} {'streamed':>10}")
    for run in runs:
        requests = "?" if run.requests is None else f"{run.requests:,}"
        print(f"  {run.label:<34} {run.code:>4} {run.seconds:>7.2f} {run.rss_mb:>11.0f} {requests:>8} {run.spaces_requests:>11} "
              f"{_size(run.sent_bytes):>10}")  # fmt: skip
    for run in runs:
        for index, line in enumerate(run.outcome()):
            print(f"  {run.label + ':' if index == 0 else '':<35} {_short(line)}")


def bench_answer(args: argparse.Namespace, upstream: str, org: str) -> tuple[SyncRun, SyncRun]:
    size = args.answer_mb * MiB
    retry = {"max_attempts": 3, "initial_wait": "0.1s", "max_wait": "0.5s"}
    print()
    print(f"1. a {args.answer_mb} MiB answer: every spaces listing is a chunked list envelope of {size / MB:.1f} MB")
    cap = Settings.model_fields["max_answer_bytes"].default
    capped = sync_once(f"capped (default {cap / MiB:g} MiB)", upstream, org, inflate(size, declare_length=False),
                       timeout=args.timeout, retry=retry)  # fmt: skip
    uncapped = sync_once(f"baseline (max_answer_bytes {args.raised_cap})", upstream, org, inflate(size, declare_length=False),
                         timeout=args.timeout, retry=retry, max_answer_bytes=args.raised_cap)  # fmt: skip
    print_runs([capped, uncapped])
    ratio = capped.rss_mb / uncapped.rss_mb if uncapped.rss_mb else float("nan")
    print(f"  capped / baseline peak RSS = {ratio:.2f} ({capped.rss_mb:.0f} vs {uncapped.rss_mb:.0f} MB); "
          f"wall {capped.seconds / uncapped.seconds:.2f}x")  # fmt: skip
    print(f"  capped peak RSS {capped.rss_mb:.0f} MB {target(capped.rss_mb, RSS_TARGET_MB, below=True)}")
    return capped, uncapped


def bench_trickle(args: argparse.Namespace, upstream: str, org: str) -> tuple[SyncRun, SyncRun, float]:
    timeout_s, attempts, max_wait = args.request_timeout, args.attempts, 0.5
    settings: dict[str, Any] = {
        "request_timeout": f"{timeout_s:g}s",
        "retry": {"max_attempts": attempts, "initial_wait": "0.1s", "max_wait": f"{max_wait:g}s"},
    }
    budget = attempts * timeout_s + (attempts - 1) * max_wait + 5.0
    print()
    print(f"2. a trickled body: every spaces listing sent 1 byte every {args.interval:g} s; request_timeout {timeout_s:g} s, "
          f"{attempts} attempts, retry waits <= {max_wait:g} s")  # fmt: skip
    trickled = sync_once("trickled", upstream, org, trickle(args.interval), timeout=args.timeout, **settings)
    plain = sync_once("baseline (plain forwarding)", upstream, org, None, timeout=args.timeout, **settings)
    print_runs([trickled, plain])
    extra = trickled.seconds - plain.seconds
    print(f"  trickled / baseline wall = {trickled.seconds / plain.seconds:.2f}x; extra time a trickling server costs "
          f"{extra:.2f} s (deadlines alone: {attempts} x {timeout_s:g} s + waits <= {attempts * timeout_s + (attempts - 1) * max_wait:g} s)")  # fmt: skip
    print(f"  budget {attempts} x {timeout_s:g} s + {attempts - 1} x {max_wait:g} s + 5 s = {budget:g} s; "
          f"trickled wall {trickled.seconds:.2f} s {target(trickled.seconds, budget)}")  # fmt: skip
    return trickled, plain, budget


async def bench(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    print(f"spec: {SPEC}  seed: 7")
    print("syncd: `syncd sync src:ORG --config CFG`, a process of its own; peak RSS of that process (its VmHWM)")
    print("columns: requests = syncd's own count (its summary line); spaces GETs = GETs of the organization's")
    print("spaces listing the hostile server saw (attempts); streamed = body bytes the hostile rule sent")
    with emulator_process(token=TOKEN, spec=SPEC, seed=7) as emulator:
        org = str(emulator.report["organizations"][0]["id"])
        print(f"emulator: {emulator.url} (separate process, no rate limit, no latency); org {org}")
        capped, uncapped = bench_answer(args, emulator.url, org)
        trickled, plain, budget = bench_trickle(args, emulator.url, org)
    print()
    print(f"(1) capped peak RSS              {capped.rss_mb:.0f} MB {target(capped.rss_mb, RSS_TARGET_MB, below=True)}"
          f"  (baseline {uncapped.rss_mb:.0f} MB, ratio {capped.rss_mb / uncapped.rss_mb:.2f})")  # fmt: skip
    print(f"(2) trickled wall                {trickled.seconds:.2f} s {target(trickled.seconds, budget)}"
          f"  (baseline {plain.seconds:.2f} s, +{trickled.seconds - plain.seconds:.2f} s)")  # fmt: skip
    print(f"benchmark total {time.perf_counter() - started:.0f} s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer-mb", type=int, default=200, help="size of the oversized answer, MiB")
    parser.add_argument("--raised-cap", default="512MiB", help="max_answer_bytes of the baseline run (above the answer)")
    parser.add_argument("--request-timeout", type=float, default=1.0, help="request_timeout of the trickle runs, seconds")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between the trickled bytes")
    parser.add_argument("--attempts", type=int, default=2, help="retry.max_attempts of the trickle runs")
    parser.add_argument("--timeout", type=float, default=180.0, help="a syncd process still running after this is killed")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run_benchmark(bench, parse_args(argv))


if __name__ == "__main__":
    main()
