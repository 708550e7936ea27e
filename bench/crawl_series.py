"""The crawl's latency series (`bench/crawl.py --latency-ms 20,80,150,300`): at one rate limit
R, a first `syncd sync` of a generated tenant of about 60 spaces at each latency, with the
settings a user writes (a base URL and a token: no `concurrency`, no tuning by hand).

Each point is an emulator of its own (a process) and `syncd sync` in a child process
(`syncd_child.py`), so that its peak RSS is that point's. Targets (issue 45): wall / (requests / R)
<= 1.1, 429s <= 0.5% of requests, peak RSS within the answer budget.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from _util import answer_budget_mb, emulator_stats_now, user_config
from series import Column, bound_seconds, checked, peak_of, ratio, share, table
from syncd_child import run_syncd

from syncd.emulator.process import emulator_process

TENANT = "bench"
TOKEN = "bench-token"
SERIES_SPACES = 60
SERIES_SPEC = (
    "orgs=1,collections=10,spaces={spaces},pages=10,files=2,sites=2,sections=3,members=20,teams=4,"
    "comments=2,change_requests=1,integrations=2"
)
"""About 1,580 requests for 60 spaces: 16 s a point at R = 100, the 4-point series ~1.5 min."""
MAX_RATIO = 1.1
MAX_429_SHARE = 0.005

COLUMNS = (
    Column("latency ms", "latency", "{:g}"),
    Column("requests", "requests", "{:,}"),
    Column("wall s", "wall", "{:.1f}"),
    Column("bound s", "bound", "{:.1f}"),
    Column("ratio", "ratio", "{:.2f}"),
    Column("<=1.1", "ratio_ok"),
    Column("429s", "rate_limited", "{:,}"),
    Column("429 %", "rate_limited_share", "{:.2%}"),
    Column("<=0.5%", "rate_limited_ok"),
    Column("limit peak", "inflight_limit_peak", "{:g}"),
    Column("RTT ms", "rtt_ms", "{:.0f}"),
    Column("peak RSS MB", "peak_rss_mb", "{:.0f}"),
    Column("budget MB", "budget_mb", "{:.0f}"),
    Column("in budget", "rss_ok"),
)


def crawl_point(spec: str, rate: float, latency: float, budget_mb: float) -> dict[str, Any]:
    """One point: an emulator at `latency`, one `syncd sync --full` of its tenant; the row."""
    with emulator_process(token=TOKEN, spec=spec, seed=1, rate=rate, latency_ms=latency) as emulator, \
            tempfile.TemporaryDirectory(prefix="syncd-bench-series-") as tmp:
        folder = Path(tmp)
        config = user_config(folder, {TENANT: (emulator.url, TOKEN)})
        run = run_syncd(["sync", TENANT, "--full", "--json", "--config", str(config)], folder, "sync")
        server = emulator_stats_now(emulator.url)
    if run.code != 0:
        print(f"  syncd sync at {latency:g} ms exited {run.code}: {run.stderr.strip()[-800:]}")
    requests = int(server["total"])
    limited = int(server["by_status"].get("429", 0))
    rtt = peak_of([c.get("rtt_seconds") for c in run.clients])
    point_ratio = ratio(run.wall, requests, rate)
    return {
        "latency": latency, "requests": requests, "wall": run.wall, "bound": bound_seconds(requests, rate),
        "ratio": point_ratio, "ratio_ok": checked(point_ratio, MAX_RATIO),
        "rate_limited": limited, "rate_limited_share": share(limited, requests),
        "rate_limited_ok": checked(share(limited, requests), MAX_429_SHARE),
        "inflight_limit_peak": peak_of([c.get("inflight_limit_peak") for c in run.clients]),
        "rtt_ms": None if rtt is None else rtt * 1000,
        "peak_rss_mb": run.peak_rss_mb, "budget_mb": budget_mb, "rss_ok": checked(run.peak_rss_mb, budget_mb),
        "client_requests": run.total("requests"), "objects": (run.document or {}).get("objects"),
    }


def run_series(args: argparse.Namespace, spec: str) -> list[dict[str, Any]]:
    """Every point of the series in turn; prints each row as it comes, then the table."""
    budget = answer_budget_mb()
    print(f"crawl series: spec {spec}; R = {args.rate:g} req/s; latencies {', '.join(f'{v:g}' for v in args.latencies)} ms")
    print("syncd: `syncd sync TENANT --full --json` in a child process a point, default settings (no concurrency in the config)")
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for latency in args.latencies:
        row = crawl_point(spec, args.rate, latency, budget)
        rows.append(row)
        print(f"  {latency:g} ms: {row['requests']:,} requests ({row['client_requests']:,} by the client), {row['objects']} objects, "
              f"wall {row['wall']:.1f} s, ratio {row['ratio']:.2f}", flush=True)
    print()
    print(table(COLUMNS, rows))
    print(f"targets: ratio <= {MAX_RATIO:g}, 429s <= {MAX_429_SHARE:.1%} of requests, peak RSS within the answer budget "
          f"({budget:.0f} MB); `-`: the client does not report that figure")
    print(f"series total {time.perf_counter() - started:.0f} s")
    return rows
