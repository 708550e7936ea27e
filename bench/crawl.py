"""Benchmark of the crawler: prints figures and ratios, asserts nothing about time.

Target from the read-side issue, on a generated tenant of at least 20,000 objects served by
the emulator with 20 ms latency and a rate limit R:
  (a) wall time / (requests / R)                      <= 1.15
  (b) speed-up over a plain sequential crawler         (bench/baseline.py; printed)
  (c) requests of a no-change re-sync / full crawl     <= 0.05
  (d) peak RSS                                         < 200 MB

The emulator runs in a process of its own (its memory and CPU are not syncd's). The run is:
a full crawl into a fresh mirror, a no-change re-sync into the same mirror, then the baseline
for at most --baseline-seconds; its throughput (requests/s) extrapolates its wall time over
the full crawl's requests when it does not finish in time.

The default tenant (~22,800 objects, ~5,350 requests) takes ~27 s to crawl at R = 200 and
the whole benchmark ~90 s. Throughput is capped by workers / round trip as well as by R: at
20 ms latency 16 workers carry ~500 req/s, so raise --workers with --rate beyond ~400.

With `--objects N` (for example 1000000) the run is the CPU benchmark of the performance
issue instead: one organization of about N objects, no rate limit, no latency, 8 workers; the
full crawl is followed by the raw loop (`bench/raw_loop.py`: the same listings at the same
concurrency, nothing parsed but the next-page token, nothing stored) and the figures are
syncd's requests/s against the raw loop's, peak RSS and the mirror's bytes per object:
  (e) syncd requests/s / raw loop requests/s           >= 0.7
  (f) peak RSS at >= 1M objects                        <= 120 MB
  (g) mirror bytes per object                          <= 500 (issue 44; 1,500 before it)
  (h) syncd's CPU per request                          <= 0.54 ms (issue 44: a guard)
  (c) as above                                         <= 0.02
The full crawl's wall time shows the merge's part (its tail, after the last request), and the
merge's own seconds are printed (issue 44: not worse than before it). On
1,077,311 objects (250,238 requests), the staging in a TEMP table of the writer's own: (e) 0.54
(1,750 vs 3,242 requests/s), 0.54 ms of CPU a request, the merge 27 s of 143, peak RSS 105 MB,
1,432 bytes an object, (c) 0.0001; the commit before it, the same hour: 0.44, 0.65 ms, 128 MB.

With several latencies (`--latency-ms 20,80,150,300`, or `--series`) the run is the latency
series of issue 45 instead (`bench/crawl_series.py`): at R = --rate (100 by default there), a
first `syncd sync` of about 60 spaces at each latency with the settings a user writes (no
concurrency), each point an emulator and a child process of its own; the table prints
wall / (requests / R), the 429s, the in-flight limit reached, the measured round trip and the
peak RSS against the answer budget (targets: <= 1.1, <= 0.5%, within the budget).

Run: .venv/bin/python bench/crawl.py [--rate 200] [--spec ...] [--workers 16]
     .venv/bin/python bench/crawl.py --objects 1000000
     .venv/bin/python bench/crawl.py --latency-ms 20,80,150,300 [--rate 100] [--spaces 60]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import (
    emulator_stats,
    peak_rss_mb,
    reset_emulator_stats,
    run_benchmark,
    target,
)
from baseline import BaselineStats, run_baseline
from crawl_series import SERIES_SPACES, SERIES_SPEC, run_series
from raw_loop import RecordingClient, run_raw_loop
from series import parse_latencies

from syncd.config import RetryConfig
from syncd.emulator.process import EmulatorProcess, emulator_process
from syncd.read.crawl import Crawler
from syncd.read.crawl_stats import CrawlResult
from syncd.read.sync import SYNC_LISTS_EVERY
from syncd.state import StateStore

SPACE_SPEC = (
    "orgs=1,collections=10,spaces={spaces},pages=20,files=2,sites=4,sections=3,members=20,teams=4,"
    "comments=2,change_requests=1,integrations=2"
)
DEFAULT_SPEC = SPACE_SPEC.format(spaces=150)
OBJECTS_PER_SPACE = 140
"""Objects a space of SPACE_SPEC comes to (1,007,416 objects with 7,200 spaces)."""
TOKEN = "bench-token"
TENANT = "bench"


@dataclass
class CrawlRun:
    """One crawl as the benchmark sees it."""

    result: CrawlResult
    wall: float
    requests: int
    rate_limited: int
    retries: int
    server_429: int
    paced_seconds: float
    cpu: float
    """CPU seconds (user + system) of this process during the crawl."""
    server_cpu: float | None
    """CPU seconds of the emulator process during the crawl (None off Linux)."""
    client: dict[str, Any]
    merge: float = 0.0
    """Wall seconds of the run's merge (`finish_run`): the crawl's tail, after its last request."""


async def crawl_once(
    emulator: EmulatorProcess, db: Path, *, workers: int, full: bool, concurrency: int | None = None, record: Path | None = None
) -> CrawlRun:
    """One crawl of the whole tenant with syncd's crawler, counted on both sides; `record`
    receives the first page of every listing it read (for the raw loop)."""
    url = emulator.url
    await reset_emulator_stats(url)
    server_started = emulator.cpu_seconds()
    retry = RetryConfig()
    async with RecordingClient(TENANT, url, TOKEN, concurrency=concurrency or workers, retry=retry) as client:
        with StateStore(db) as mirror, (open(record, "w") if record else contextlib.nullcontext()) as client.record:
            merge = _timed_finish(mirror)
            cpu_started = _cpu()
            started = time.perf_counter()
            result = await Crawler(client, mirror, TENANT, workers=workers, full=full, lists_every=SYNC_LISTS_EVERY).crawl()
            wall = time.perf_counter() - started
            cpu = _cpu() - cpu_started
    server_now = emulator.cpu_seconds()
    server_cpu = None if server_now is None or server_started is None else server_now - server_started
    server = await emulator_stats(url)
    stats = client.stats
    return CrawlRun(
        result=result,
        wall=wall,
        requests=stats.requests,
        rate_limited=stats.rate_limited,
        retries=stats.retries,
        server_429=int(server["by_status"].get("429", 0)),
        paced_seconds=stats.paced_seconds,
        cpu=cpu,
        server_cpu=server_cpu,
        client=stats.as_dict(),
        merge=merge[0],
    )


def _timed_finish(mirror: StateStore) -> list[float]:
    """Time the mirror's `finish_run` (this StateStore only): the seconds go into the list returned."""
    seconds = [0.0]
    finish = mirror.finish_run

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return finish(*args, **kwargs)
        finally:
            seconds[0] += time.perf_counter() - started

    mirror.finish_run = timed  # type: ignore[method-assign]
    return seconds


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stored_objects(db: Path) -> dict[str, int]:
    with StateStore(db) as mirror:
        return mirror.counts(TENANT)


async def bench(args: argparse.Namespace) -> None:
    burst = args.burst or args.rate
    print(f"spec: {args.spec}  seed: 1")
    print(f"emulator: rate limit R = {args.rate:g} req/s, burst {burst:g}, latency {args.latency_ms:g} ms (separate process)")
    print(f"syncd: {args.workers} workers, tenant concurrency {args.workers}")
    started = time.perf_counter()
    with emulator_process(
        token=TOKEN, spec=args.spec, seed=1, rate=args.rate, burst=args.burst, latency_ms=args.latency_ms
    ) as emulator, tempfile.TemporaryDirectory(prefix="syncd-bench-") as tmp:
        print(f"emulator ready in {time.perf_counter() - started:.1f} s at {emulator.url}")
        db = Path(tmp) / "mirror.db"

        full = await crawl_once(emulator, db, workers=args.workers, full=True)
        rss_full = peak_rss_mb()
        ratio_a = report_full(full, stored_objects(db), args.rate, burst)

        resync = await crawl_once(emulator, db, workers=args.workers, full=False)
        rss_resync = peak_rss_mb()
        ratio_c = resync.requests / full.requests
        print(f"no-change re-sync: status {resync.result.status}, skipped spaces {resync.result.stats.skipped_scopes:,}, "
              f"changes {resync.result.summary.total}")
        print(f"  requests     {resync.requests:,}  429s {resync.rate_limited}  retries {resync.retries}  wall {resync.wall:.2f} s")
        print(f"  (c) re-sync / full requests = {ratio_c:.4f} {target(ratio_c, 0.05)}")

        base = await run_baseline(emulator.url, TOKEN, args.baseline_seconds)
        speed_up = report_baseline(base, full, args.baseline_seconds)

    rss = max(rss_full, rss_resync)
    print(f"peak RSS: {rss:.0f} MB during the crawls (process peak incl. baseline {peak_rss_mb():.0f} MB)")
    print()
    print(f"(a) wall / (requests / R)     {'n/a (no rate limit)' if ratio_a is None else f'{ratio_a:.3f} {target(ratio_a, 1.15)}'}")
    print(f"(b) speed-up over baseline    {speed_up:.1f}x")
    print(f"(c) re-sync / full requests   {ratio_c:.4f} {target(ratio_c, 0.05)}")
    print(f"(d) peak RSS                  {rss:.0f} MB {target(rss, 200, below=True)}")
    print(f"benchmark total {time.perf_counter() - started:.0f} s")


async def bench_objects(args: argparse.Namespace) -> None:
    """The CPU benchmark (`--objects`): syncd against the raw loop, no rate limit, no latency."""
    spaces = max(1, round(args.objects / OBJECTS_PER_SPACE))
    spec = SPACE_SPEC.format(spaces=spaces)
    print(f"spec: {spec}  seed: 1")
    print(f"emulator: no rate limit, no latency (separate process); syncd {args.workers} workers, "
          f"concurrency {args.concurrency}; raw loop concurrency {args.concurrency}")
    started = time.perf_counter()
    with emulator_process(token=TOKEN, spec=spec, seed=1, start_timeout=1800) as emulator, \
            tempfile.TemporaryDirectory(prefix="syncd-bench-") as tmp:
        print(f"emulator ready in {time.perf_counter() - started:.1f} s at {emulator.url}")
        db, firsts = Path(tmp) / "mirror.db", Path(tmp) / "first-pages.txt"
        full = await crawl_once(emulator, db, workers=args.workers, concurrency=args.concurrency, full=True, record=firsts)
        rss = peak_rss_mb()
        counts = stored_objects(db)
        report_full(full, counts, 0, 0)
        objects = sum(counts.values())
        size = mirror_bytes(db)
        resync = await crawl_once(emulator, db, workers=args.workers, concurrency=args.concurrency, full=False)
        rss = max(rss, peak_rss_mb())
        ratio_c = resync.requests / full.requests
        print(f"no-change re-sync: {resync.requests:,} requests, wall {resync.wall:.2f} s, of which the merge {resync.merge:.3f} s, "
              f"changes {resync.result.summary.total}")
        raws = []
        for when in ("after syncd", "again"):
            server_started, cpu_started = emulator.cpu_seconds(), _cpu()
            raw = await run_raw_loop(emulator.url, TOKEN, firsts, args.concurrency)
            raw_cpu, server_cpu = _cpu() - cpu_started, emulator.cpu_seconds()
            raw_server = "" if server_cpu is None or server_started is None else f", emulator CPU {server_cpu - server_started:.1f} s"
            print(f"raw loop ({when}): {raw.listings:,} listings, {raw.requests:,} requests ({raw.failed} failed), "
                  f"wall {raw.wall:.2f} s ({raw.rate:.1f} req/s), CPU {raw_cpu:.1f} s{raw_server}")
            raws.append(raw)
        raw = max(raws, key=lambda r: r.rate)  # the faster of the two: the stricter bar
    syncd_rate = full.requests / full.wall
    ratio_e = syncd_rate / raw.rate if raw.rate else 0.0
    per_object = size / objects if objects else 0.0
    print()
    cpu_ms = full.cpu / full.requests * 1e3
    print(f"objects {objects:,}; syncd {full.requests:,} requests, raw loop {raw.requests:,}; "
          f"the first crawl's merge {full.merge:.1f} s of its {full.wall:.1f} s")
    print(f"(e) syncd / raw loop requests/s {ratio_e:.2f} ({syncd_rate:.0f} vs {raw.rate:.0f}) (target >= 0.7{'' if ratio_e >= 0.7 else ': MISSED'})")
    print(f"(f) peak RSS                    {rss:.0f} MB {target(rss, 120)}")
    print(f"(g) mirror bytes per object     {per_object:,.0f} ({size / 1e6:,.1f} MB) {target(per_object, 500)}")
    print(f"(h) syncd CPU per request       {cpu_ms:.3f} ms {target(round(cpu_ms, 3), 0.54)}")
    print(f"(c) re-sync / full requests     {ratio_c:.4f} {target(ratio_c, 0.02)}")
    print(f"benchmark total {time.perf_counter() - started:.0f} s")


def mirror_bytes(db: Path) -> int:
    """The mirror's size on disk once its write-ahead log is checkpointed into it."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(path.stat().st_size for path in db.parent.glob(db.name + "*"))


def report_full(full: CrawlRun, counts: dict[str, int], rate: float, burst: float) -> float | None:
    """Print the full crawl's figures; returns ratio (a), None without a rate limit."""
    objects = sum(counts.values())
    print()
    print(f"objects stored: {objects:,} ({'>= 20,000' if objects >= 20_000 else 'FEWER than 20,000'}) in {len(counts)} kinds")
    print(f"full crawl: status {full.result.status}, {full.result.stats.listings:,} listings")
    print(f"  requests     {full.requests:,}")
    print(f"  429s         {full.rate_limited} (client)  {full.server_429} (emulator)")
    print(f"  retries      {full.retries}")
    print(f"  wall time    {full.wall:.2f} s  ({full.requests / full.wall:.1f} req/s), of which the merge {full.merge:.2f} s")
    server_cpu = "" if full.server_cpu is None else f", emulator {full.server_cpu:.1f} s ({full.server_cpu / full.wall:.0%})"
    print(f"  CPU          syncd {full.cpu:.1f} s ({full.cpu / full.wall:.0%} of a core){server_cpu}")
    print(f"  paced        requests held back by the pacer for {full.paced_seconds:.1f} s of the wall time")
    if rate <= 0:
        print("  (a) n/a: the emulator has no rate limit")
        return None
    lower = full.requests / rate
    ratio = full.wall / lower
    print(f"  lower bound  requests / R = {lower:.2f} s (the bucket's first {burst:g} tokens ignored)")
    print(f"  (a) wall / lower bound = {ratio:.3f} {target(ratio, 1.15)}")
    if full.requests > burst:
        tight = (full.requests - burst) / rate
        print(f"      (with the first {burst:g} requests free from the full bucket: {tight:.2f} s, ratio {full.wall / tight:.3f})")
    return ratio


def report_baseline(base: BaselineStats, full: CrawlRun, budget: float) -> float:
    """Print the baseline's figures; returns the speed-up in wall time (measured or estimated)."""
    syncd_rate = full.requests / full.wall
    print("baseline (bench/baseline.py: sequential, one request at a time, no pacing, stores nothing):")
    if base.finished:
        print(f"  finished: {base.requests:,} requests, {base.items:,} items, {base.rate_limited} 429s, "
              f"{base.failed} failed listings, wall {base.wall:.2f} s ({base.throughput:.1f} req/s)")
        estimated = base.wall
        how = "measured wall times"
    else:
        estimated = full.requests / base.throughput if base.throughput else float("inf")
        print(f"  stopped after {budget:g} s: {base.requests:,} requests, {base.items:,} items, {base.rate_limited} 429s, "
              f"{base.failed} failed listings ({base.throughput:.1f} req/s)")
        print(f"  estimated wall for the full crawl's {full.requests:,} requests: {estimated:.1f} s")
        how = "syncd wall vs the baseline's estimated wall at its measured throughput"
    print(f"  (b) speed-up, throughput: {syncd_rate / base.throughput if base.throughput else float('inf'):.1f}x "
          f"({syncd_rate:.1f} vs {base.throughput:.1f} req/s)")
    print(f"      speed-up, wall: {estimated / full.wall:.1f}x ({how})")
    return estimated / full.wall


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=None, help="the emulator's rate limit R (requests/s; 200, or 100 for the series)")
    parser.add_argument("--burst", type=float, default=0.0, help="the bucket size (default: R, one second's worth)")
    parser.add_argument("--latency-ms", type=_latencies, default=[20.0],
                        help="latency the emulator adds to every request; several (20,80,150,300): the latency series")
    parser.add_argument("--series", action="store_true", help="the latency series even with one latency")
    parser.add_argument("--spaces", type=int, default=SERIES_SPACES, help="with the series: spaces of the generated tenant")
    parser.add_argument("--spec", default=None, help="what the emulator generates (default: 150 spaces, or --spaces for the series)")
    parser.add_argument("--workers", type=int, default=16, help="crawler workers = the tenant's concurrency")
    parser.add_argument("--baseline-seconds", type=float, default=60.0, help="the most the baseline may run")
    parser.add_argument("--objects", type=int, default=0,
                        help="the CPU benchmark: about this many objects, no rate limit, against the raw loop")
    parser.add_argument("--concurrency", type=int, default=8, help="with --objects: requests in flight (syncd and the raw loop)")
    args = parser.parse_args(argv)
    args.latencies = args.latency_ms
    args.series = args.series or len(args.latencies) > 1
    args.latency_ms = args.latencies[0]
    if args.rate is None:
        args.rate = 100.0 if args.series else 200.0
    if args.spec is None:
        args.spec = SERIES_SPEC.format(spaces=args.spaces) if args.series else DEFAULT_SPEC
    if args.objects and "--workers" not in (argv if argv is not None else sys.argv):
        args.workers = 8
    return args


def _latencies(text: str) -> list[float]:
    try:
        return parse_latencies(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


async def bench_series(args: argparse.Namespace) -> None:
    """The latency series: its points run one after another (each a process of its own)."""
    run_series(args, args.spec)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_benchmark(bench_objects if args.objects else bench_series if args.series else bench, args)


if __name__ == "__main__":
    main()
