"""The fleet's `share` series (`bench/fleet.py --series share`, issue 45): two replicas of
`syncd serve` on one PostgreSQL, every tenant of both on ONE token, crawling together (backup
jobs due every second) against an emulator at `--share-latency-ms` (150) and `--share-rate`
(100 requests/s for that token).

Over a window it prints the emulator's requests and 429s (target: 429s <= 1% of requests), the
window against the bound (requests / R: 1.0 is the token's rate used to the full) and, per
replica, its requests in the window and its in-flight limit (`syncd_inflight_limit` of its
`/metrics`, sampled every second: first, lowest, median, highest, last), which should settle
at about each replica's share. `-` where a replica does not report the gauge.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet_replicas import CONTROL, Replica, admin, fresh_schema, jobs_for, own_database, start_fleet, stop_replicas
from series import MISSING, bound_seconds, metric_series, share

from syncd.emulator.process import emulator_process

TOKEN = "bench-fleet-shared"
LIMIT = "syncd_inflight_limit"
REQUESTS = "syncd_api_requests_total"
MAX_429_SHARE = 0.01


@dataclass
class Samples:
    """One replica's `/metrics` over the window: each tenant's in-flight limit, its requests."""

    limits: dict[str, list[float]] = field(default_factory=dict)
    requests: list[float] = field(default_factory=list)

    def take(self, text: str) -> None:
        for labels, value in metric_series(text, LIMIT).items():
            self.limits.setdefault(labels, []).append(value)
        self.requests.append(sum(metric_series(text, REQUESTS).values()))

    def window_requests(self) -> int:
        return int(self.requests[-1] - self.requests[0]) if len(self.requests) > 1 else 0


def metrics_text(replica: Replica) -> str:
    """The replica's `/metrics` (its URL from `state/daemon.json`, the control token)."""
    url = json.loads((replica.state_dir / "daemon.json").read_text())["url"]
    request = urllib.request.Request(url.rstrip("/") + "/metrics", headers={"Authorization": f"Bearer {CONTROL}"})
    with urllib.request.urlopen(request, timeout=5) as answer:
        return str(answer.read().decode())


def sample(replicas: list[Replica], samples: dict[str, Samples], stop: threading.Event, every: float = 1.0) -> None:
    """Every `every` seconds until `stop`: each replica's metrics (a failed read is skipped)."""
    while True:
        for replica in replicas:
            try:
                samples[replica.name].take(metrics_text(replica))
            except (OSError, ValueError, KeyError):
                pass
        if stop.wait(every):
            return


def limit_summary(values: list[float]) -> str:
    """`first -> last (lowest..highest, median m)` of a replica's sampled limit."""
    if not values:
        return MISSING
    return f"{values[0]:g} -> {values[-1]:g} (lowest {min(values):g}, median {statistics.median(values):g}, highest {max(values):g})"


def report(args: argparse.Namespace, stats: dict[str, Any], seconds: float, samples: dict[str, Samples]) -> list[str]:
    """The share series' lines (pure: the figures in, the text out)."""
    requests = int(stats["total"])
    limited = int(stats["by_status"].get("429", 0))
    bound = bound_seconds(requests, args.share_rate)
    used = bound / seconds if seconds else 0.0
    lines = [
        f"share: 2 replicas, one token, R = {args.share_rate:g} req/s, {args.share_latency_ms:g} ms latency, window {seconds:.1f} s",
        f"  requests {requests:,} ({requests / seconds:.1f}/s); 429s {limited:,} = {share(limited, requests):.2%} of requests "
        f"(target <= {MAX_429_SHARE:.0%}{'' if share(limited, requests) <= MAX_429_SHARE else ': MISSED'})",
        f"  window / bound (requests / R = {bound:.1f} s): {seconds / bound if bound else float('nan'):.2f}; the token's rate used {used:.0%}",
    ]
    for name, got in samples.items():
        limits = "; ".join(f"{labels or 'limit'} {limit_summary(values)}" for labels, values in got.limits.items()) or MISSING
        lines.append(f"  replica {name}: {got.window_requests():,} requests in the window ({len(got.requests)} samples); in-flight limit {limits}")
    return lines


def run_share(args: argparse.Namespace) -> list[str]:
    """Start the emulator and two replicas, let them work, measure a window, stop everything."""
    with own_database(args.server) as database, emulator_process(
        token=TOKEN, spec=args.spec, seed=args.seed, rate=args.share_rate, latency_ms=args.share_latency_ms
    ) as emulator, tempfile.TemporaryDirectory(prefix="syncd-bench-fleet-share-") as tmp:
        orgs = [org["id"] for org in emulator.report["organizations"]]
        print(f"emulator {emulator.url}: {len(orgs)} organizations, one token, R = {args.share_rate:g}, "
              f"{args.share_latency_ms:g} ms; {args.jobs} backup jobs every 1 s over two tenants of that token", flush=True)
        state_url = fresh_schema(database, "share_2")
        replicas: list[Replica] = []
        stop = threading.Event()
        samples: dict[str, Samples] = {}
        sampler: threading.Thread | None = None
        try:
            start_fleet(replicas, Path(tmp), 2, emulator.url, state_url, jobs_for(orgs, args.jobs), (TOKEN, TOKEN))
            time.sleep(args.warmup)
            samples = {replica.name: Samples() for replica in replicas}
            admin(emulator.url, "DELETE", "/_emulator/stats")
            sampler = threading.Thread(target=sample, args=(replicas, samples, stop), daemon=True)
            began = time.monotonic()
            sampler.start()
            time.sleep(args.window)
            stats = admin(emulator.url, "GET", "/_emulator/stats")
            seconds = time.monotonic() - began
        finally:
            stop.set()
            if sampler is not None:
                sampler.join()
            stop_replicas(replicas)
    return report(args, stats, seconds, samples)
