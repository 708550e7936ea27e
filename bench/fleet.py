"""Benchmark of a fleet of `syncd serve` replicas on one PostgreSQL (issue 13): jobs completed
per minute with 1, 2 and 3 replicas, in two series; prints a table, asserts nothing.

- `latency`: the tenants' rate limits are NOT the bound (a high rate per token); the emulator
  adds latency to every request, so a run takes a while and a replica has many runs in flight.
- `rate`: the per-token rate limits ARE the bound (a low rate per token): the fleet's
  throughput should stop growing with replicas, and the 429s stay near 0 because the replicas
  share each token's request budget through PostgreSQL (`syncd.pg.budget`).

Each series runs the same jobs: `--jobs` backup jobs over two tenants (two tokens of one
emulator, each with its own rate-limit bucket), each scheduled `every = "1s"`, so every job
always has a due slot waiting and the replicas never run out of work (`jitter = "5s"` spreads
the first starts, so the runs do not end in waves). Backups, because a backup
writes a file of its own: sync and mirror jobs take their tenant's writer lock on the shared
state, one run per tenant at a time across the fleet, which would make the number of tenants
the bound instead of the replicas.

A measurement: a fresh schema in the benchmark's own database, N replicas started as processes
(`syncd serve --config FILE`, a configuration and state directory each), `--warmup` seconds, then
a window of `--window` seconds of wall time: the runs counted are those that ended in it
(`fleet_runs.ended_at`, the server's clock) and succeeded; the requests and 429s are the
emulator's (`/_emulator/stats`, reset at the window's start); CPU is the processes' own
(/proc). Then the replicas get SIGTERM. Ratios are against the 1-replica measurement of the
same series in the same run.

The benchmark creates its own database on `--server` (dropped at the end, also after an
error or Ctrl-C) and its own emulator, and stops every process it started by its PID.

- `share` (issue 45, `bench/fleet_share.py`): two replicas whose tenants share ONE token, at
  `--share-latency-ms` (150) and `--share-rate` (100): the 429s (target <= 1% of requests), the
  window against requests / R and each replica's in-flight limit sampled from its `/metrics`.

Run: .venv/bin/python bench/fleet.py [--window 40] [--warmup 15] [--jobs 36]
         [--latency-ms 100] [--high-rate 2000] [--low-rate 50] [--series latency,rate]
     .venv/bin/python bench/fleet.py --series share [--window 30] [--warmup 10]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP))

from fleet_replicas import TOKENS, Replica, admin, fresh_schema, jobs_for, own_database, start_fleet, stop_replicas  # noqa: E402

from syncd.emulator.process import EmulatorProcess, emulator_process  # noqa: E402

DEFAULT_SPEC = "orgs=4,collections=2,spaces=3,pages=3,files=0,sites=1,sections=1,members=2,teams=1"


@dataclass
class Measurement:
    series: str
    replicas: int
    seconds: float
    runs: int
    by_replica: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    limited: int = 0
    cpu: dict[str, float] = field(default_factory=dict)
    """Share of one core each kind of process used in the window (replicas summed, emulator), and
    the share of all cores the machine was busy (`machine`: PostgreSQL and anything else too)."""

    @property
    def per_minute(self) -> float:
        return self.runs * 60.0 / self.seconds if self.seconds else 0.0


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot (/proc/stat): the machine's load, others' too."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return float(sum(values) - idle), float(sum(values))


def server_now(url: str) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]


def ended_between(url: str, start: Any, end: Any) -> Counter[str]:
    """Succeeded runs that ended in [start, end), by replica."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT replica, count(*) FROM fleet_runs WHERE outcome = 'succeeded' AND ended_at >= %s AND ended_at < %s GROUP BY replica",
            (start, end),
        ).fetchall()
    return Counter({str(replica): int(count) for replica, count in rows})


# -- one measurement ----------------------------------------------------------------------------


def measure(args: argparse.Namespace, emulator: EmulatorProcess, database: str, series: str, count: int) -> Measurement:
    state_url = fresh_schema(database, f"{series}_{count}")
    orgs = [org["id"] for org in emulator.report["organizations"]]
    jobs = jobs_for(orgs, args.jobs)
    replicas: list[Replica] = []
    with tempfile.TemporaryDirectory(prefix="syncd-bench-fleet-") as tmp:
        try:
            start_fleet(replicas, Path(tmp), count, emulator.url, state_url, jobs)
            time.sleep(args.warmup)
            admin(emulator.url, "DELETE", "/_emulator/stats")
            cpu_before = {r.name: _cpu_seconds(r.process.pid) for r in replicas}, _cpu_seconds(emulator.process.pid)
            machine_before = _machine_busy()
            start, began = server_now(state_url), time.monotonic()
            time.sleep(args.window)
            end, seconds = server_now(state_url), time.monotonic() - began
            stats = admin(emulator.url, "GET", "/_emulator/stats")
            cpu = {
                "replicas": sum(_cpu_seconds(r.process.pid) - cpu_before[0][r.name] for r in replicas) / seconds,
                "emulator": (_cpu_seconds(emulator.process.pid) - cpu_before[1]) / seconds,
            }
            machine_after = _machine_busy()
            spent = machine_after[1] - machine_before[1]
            cpu["machine"] = (machine_after[0] - machine_before[0]) / spent if spent else 0.0
        finally:
            stop_replicas(replicas)
        by_replica = ended_between(state_url, start, end)
    return Measurement(
        series, count, (end - start).total_seconds(), sum(by_replica.values()), dict(sorted(by_replica.items())),
        int(stats["total"]), int(stats["by_status"].get("429", 0)), cpu,
    )


# -- the table ----------------------------------------------------------------------------------


def table(results: list[Measurement]) -> str:
    head = f"{'series':<8} {'replicas':>8} {'runs/min':>9} {'x 1 replica':>11} {'requests/s':>10} {'429s':>9} {'CPU replicas':>12} {'CPU emulator':>12} {'machine busy':>12}  runs by replica"
    lines = [head, "-" * len(head)]
    for result in results:
        base = next(r for r in results if r.series == result.series and r.replicas == 1)
        ratio = result.per_minute / base.per_minute if base.per_minute else float("nan")
        share = f"{result.limited}/{result.requests}"
        split = " ".join(f"{name}={n}" for name, n in result.by_replica.items())
        lines.append(
            f"{result.series:<8} {result.replicas:>8} {result.per_minute:>9.1f} {ratio:>11.2f} {result.requests / result.seconds:>10.1f} "
            f"{share:>9} {result.cpu['replicas']:>11.0%} {result.cpu['emulator']:>12.0%} {result.cpu['machine']:>12.0%}  {split}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> list[Measurement]:
    results: list[Measurement] = []
    with own_database(args.server) as database, emulator_process(
        token=TOKENS[0], spec=args.spec, seed=args.seed, rate=args.high_rate, latency_ms=args.latency_ms, extra=["--token", TOKENS[1]]
    ) as emulator:
        print(f"emulator {emulator.url}: {len(emulator.report['organizations'])} organizations, {emulator.objects} objects; "
              f"{args.jobs} backup jobs every 1 s; {os.cpu_count()} cores; window {args.window:g} s after {args.warmup:g} s", flush=True)
        for series, rate in (("latency", args.high_rate), ("rate", args.low_rate)):
            if series not in args.series.split(","):
                continue
            admin(emulator.url, "PUT", "/_emulator/rate-limit", {"rate": rate})
            print(f"series {series}: {rate:g} requests/s per token, {args.latency_ms:g} ms latency", flush=True)
            for count in (1, 2, 3):
                results.append(measure(args, emulator, database, series, count))
                print("  " + table([r for r in results if r.series == series]).splitlines()[-1], flush=True)
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=40.0, help="seconds of each measurement's window")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds between the replicas' start and the window")
    parser.add_argument("--jobs", type=int, default=36, help="backup jobs, each due every second")
    parser.add_argument("--latency-ms", type=float, default=100.0, help="latency the emulator adds to every request")
    parser.add_argument("--high-rate", type=float, default=2000.0, help="requests/s per token in the series where the rate is not the bound")
    parser.add_argument("--low-rate", type=float, default=50.0, help="requests/s per token in the series where the rate is the bound")
    parser.add_argument("--series", default="latency,rate", help="which series to run (a comma-separated list of latency, rate, share)")
    parser.add_argument("--share-rate", type=float, default=100.0, help="share: requests/s of the one token")
    parser.add_argument("--share-latency-ms", type=float, default=150.0, help="share: latency the emulator adds to every request")
    parser.add_argument("--spec", default=DEFAULT_SPEC, help="what the emulator generates")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/postgres", help="PostgreSQL to create the database on")
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the benchmark like Ctrl-C: every process and the database are cleaned up."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    series = args.series.split(",")
    shared: list[str] = []
    try:
        results = run(args) if {"latency", "rate"} & set(series) else []
        if "share" in series:
            from fleet_share import run_share

            shared = run_share(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print()
    if results:
        print(table(results))
    print("\n".join(shared))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
