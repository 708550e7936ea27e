"""The peer in our benchmarks (issue 44): syncd against dlt's `rest_api` source, on the same
generated organization served by the same emulator, interleaved (syncd, dlt, syncd, dlt, ...).

The emulator runs in a process of its own (no rate limit, no latency by default: the CPU
benchmark's setting, bench/crawl.py --objects), generated from bench/crawl.py's spec with seed 1.
Each run is a child process of its own in a fresh folder, so its peak RSS is its own:

- syncd: `syncd sync bench --full --json` with a configuration as a user writes it (a base URL
  and a token, default settings), through bench/syncd_child.py; stored into its SQLite mirror.
- dlt: bench/dlt_child.py, dlt's rest_api source configured as its documentation shows (bearer
  token, the `next.page` cursor, dependent resources resolved from their parents, the lists of
  syncd's catalog), loaded into DuckDB (`dlt[duckdb]`, the `bench` extra).

Figures of each run, and their medians: wall seconds of the child process (start to exit,
the interpreter's start and imports included; the tool's own part, syncd's `main` or dlt's
`pipeline.run`, beside it), CPU seconds of that process and its children (RUSAGE_CHILDREN,
the emulator not included: it is still running), its peak RSS, objects loaded (syncd: the
mirror's objects; dlt: the rows of each resource's table, not of the nested tables under
them), requests (the emulator's count), bytes on disk (syncd: the mirror file once its
write-ahead log is checkpointed; dlt: its DuckDB file) and bytes per object. Then the
objects and requests of each list side by side, what dlt could not express, the machine and
the date, and a markdown table for the README.

Run: .venv/bin/uv pip install -e '.[bench]'
     .venv/bin/python bench/peer.py                       # ~108,000 objects, 3 runs each
     .venv/bin/python bench/peer.py --objects 10000 --runs 1   # a quick check
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import emulator_stats_now, reset_emulator_stats_now, run_benchmark, user_config
from crawl import SPACE_SPEC, TENANT, TOKEN, mirror_bytes
from dlt_child import DATABASE, NOT_EXPRESSED, child_environment, count_rows, database_bytes, kind_of_table
from syncd_child import TOP, run_process, run_syncd

from syncd.catalog import KINDS, route_shape
from syncd.emulator.process import EmulatorProcess, emulator_process

DEFAULT_OBJECTS = 108_000
"""The size of the measurement the issue quotes (~108,000 objects)."""
OBJECTS_PER_SPACE = 154
"""Objects syncd stores a space of crawl.py's SPACE_SPEC at this size (3,364 with 21 spaces,
119,125 with 771: every member's spaces listing grows with the spaces too); crawl.py's 140
holds at 7,200 spaces."""
TOOLS = ("syncd", "dlt")


@dataclass
class Run:
    """One run of one tool, as measured from here."""

    tool: str
    wall: float
    """Seconds of the child process, start to exit."""
    own_wall: float
    """Seconds of the tool's own part in the child (syncd's `main`, dlt's `pipeline.run`)."""
    cpu: float
    """CPU seconds (user + system) of the child and its children."""
    peak_rss_mb: float
    objects: int
    disk_bytes: int
    requests: int
    server_cpu: float | None
    by_kind: dict[str, int] = field(default_factory=dict)
    requests_by_kind: dict[str, int] = field(default_factory=dict)

    @property
    def bytes_per_object(self) -> float:
        return self.disk_bytes / self.objects if self.objects else 0.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


ROUTE_KIND = {route_shape(kind.path): kind.name for kind in KINDS}
ROUTE_KIND[route_shape("/v1/orgs")] = "organization"


def requests_by_kind(stats: dict[str, Any]) -> dict[str, int]:
    """The emulator's requests by catalog kind (its routes, placeholders made anonymous)."""
    out: dict[str, int] = {}
    for row in stats.get("routes", []):
        kind = ROUTE_KIND.get(route_shape(row["route"]), row["route"])
        out[kind] = out.get(kind, 0) + int(row["count"])
    return out


def _measured(tool: str, emulator: EmulatorProcess, work: Any) -> tuple[Any, float, float, dict[str, Any], float | None]:
    """Run `work()` (a child process) with the emulator's counters zeroed: (its result, wall,
    the child's CPU, the emulator's counters, the emulator's CPU)."""
    reset_emulator_stats_now(emulator.url)
    server_started, cpu_started = emulator.cpu_seconds(), _children_cpu()
    started = time.perf_counter()
    result = work()
    wall = time.perf_counter() - started
    cpu = _children_cpu() - cpu_started
    server_now = emulator.cpu_seconds()
    server_cpu = None if server_now is None or server_started is None else server_now - server_started
    return result, wall, cpu, emulator_stats_now(emulator.url), server_cpu


def run_syncd_once(emulator: EmulatorProcess, folder: Path) -> Run:
    """`syncd sync bench --full --json` in a child process, into a fresh mirror."""
    folder.mkdir()
    config = user_config(folder, {TENANT: (emulator.url, TOKEN)})
    child, wall, cpu, stats, server_cpu = _measured("syncd", emulator, lambda: run_syncd(
        ["sync", TENANT, "--full", "--json", "--config", str(config)], folder, "sync"))
    document = child.document or {}
    if child.code != 0 or document.get("status") != "complete":
        raise SystemExit(f"syncd sync exited {child.code} ({document.get('status')}): {child.stderr.strip()[-1500:]}")
    return Run(
        tool="syncd", wall=wall, own_wall=child.wall, cpu=cpu, peak_rss_mb=child.peak_rss_mb,
        objects=int(document["objects"]), disk_bytes=mirror_bytes(folder / "state" / "syncd.db"),
        requests=int(stats["total"]), server_cpu=server_cpu, by_kind=dict(document.get("objects_by_kind", {})),
        requests_by_kind=requests_by_kind(stats),
    )


def run_dlt_once(emulator: EmulatorProcess, folder: Path) -> Run:
    """bench/dlt_child.py in a child process, into a fresh DuckDB file."""
    import json

    folder.mkdir()
    figures = folder / "dlt.figures.json"
    command = [sys.executable, str(Path(__file__).resolve().parent / "dlt_child.py"), str(figures),
               "--url", emulator.url, "--token", TOKEN, "--folder", str(folder)]
    env = {**child_environment(), "PYTHONPATH": str(TOP)}
    (code, _), wall, cpu, stats, server_cpu = _measured(
        "dlt", emulator, lambda: run_process(command, folder, folder / "dlt.stderr", env))
    got = json.loads(figures.read_text()) if figures.exists() else {}
    if code != 0:
        raise SystemExit(f"dlt exited {code}: {(folder / 'dlt.stderr').read_text().strip()[-3000:]}")
    rows = count_rows(folder / DATABASE)
    by_kind: dict[str, int] = {}
    for table, kind in kind_of_table().items():
        by_kind[kind] = by_kind.get(kind, 0) + rows[table]
    return Run(
        tool="dlt", wall=wall, own_wall=float(got.get("wall", 0.0)), cpu=cpu, peak_rss_mb=float(got.get("maxrss_kb", 0)) / 1024,
        objects=sum(rows.values()), disk_bytes=database_bytes(folder / DATABASE), requests=int(stats["total"]),
        server_cpu=server_cpu, by_kind=by_kind, requests_by_kind=requests_by_kind(stats),
    )


RUNNERS = {"syncd": run_syncd_once, "dlt": run_dlt_once}


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine(when: str = "at the start") -> list[str]:
    """Cores, CPU model, Python, the versions compared, the commit, the date and the load."""
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "-C", str(TOP), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "?"
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    now = datetime.datetime.now().astimezone()
    return [
        f"date: {now:%Y-%m-%d %H:%M %Z}",
        f"machine: {os.cpu_count()} cores, {model}, Python {platform.python_version()} ({platform.system()} {platform.release()})",
        f"versions: syncd {commit}, dlt {_version('dlt')}, duckdb {_version('duckdb')}; load average {when} {load}",
    ]


def median(runs: list[Run], name: str) -> float:
    values = [getattr(r, name) for r in runs]
    return statistics.median(v for v in values if v is not None) if any(v is not None for v in values) else float("nan")


ROWS = (
    ("wall", "wall", "{:,.1f} s"),
    ("CPU (process + children)", "cpu", "{:,.1f} s"),
    ("peak RSS", "peak_rss_mb", "{:,.0f} MB"),
    ("objects loaded", "objects", "{:,.0f}"),
    ("requests", "requests", "{:,.0f}"),
    ("bytes on disk", "disk_bytes", None),
    ("bytes per object", "bytes_per_object", "{:,.0f}"),
)


def _shown(value: float, fmt: str | None) -> str:
    if fmt is None:
        return f"{value / 1e6:,.1f} MB"
    return fmt.format(value)


def markdown_table(runs: dict[str, list[Run]], objects: int) -> str:
    """The medians of each tool, a row a figure, ready for the README."""
    n = len(runs["syncd"])
    lines = [
        f"| medians of {n} interleaved runs each, ~{objects:,} objects | syncd | dlt `rest_api` → DuckDB |",
        "|---|---|---|",
    ]
    for label, name, fmt in ROWS:
        lines.append(f"| {label} | {_shown(median(runs['syncd'], name), fmt)} | {_shown(median(runs['dlt'], name), fmt)} |")
    return "\n".join(lines)


def lists_table(syncd: Run, dlt: Run) -> str:
    """Objects and requests of each catalog kind, syncd's beside dlt's (one run of each)."""
    kinds = [kind.name for kind in KINDS]
    extra = sorted((set(syncd.requests_by_kind) | set(dlt.requests_by_kind)) - set(kinds))
    width = max(len(k) for k in kinds + extra)
    lines = [f"  {'list (catalog kind)':<{width}}  {'syncd objects':>13}  {'dlt rows':>9}  {'syncd requests':>14}  {'dlt requests':>12}"]
    for kind in kinds + extra:
        cells = (syncd.by_kind.get(kind), dlt.by_kind.get(kind), syncd.requests_by_kind.get(kind), dlt.requests_by_kind.get(kind))
        mark = "" if cells[0] == cells[1] else "  <- differs"
        lines.append(f"  {kind:<{width}}  " + "  ".join(
            f"{'-' if v is None else f'{v:,}':>{w}}" for v, w in zip(cells, (13, 9, 14, 12), strict=True)) + mark)
    return "\n".join(lines)


def _line(run: Run, index: int) -> str:
    server = "" if run.server_cpu is None else f", emulator CPU {run.server_cpu:.1f} s"
    return (f"  {run.tool:<5} run {index}: wall {run.wall:6.1f} s (its own part {run.own_wall:.1f} s), CPU {run.cpu:6.1f} s, "
            f"peak RSS {run.peak_rss_mb:6,.0f} MB, {run.objects:,} objects, {run.requests:,} requests, "
            f"{run.disk_bytes / 1e6:,.1f} MB on disk ({run.bytes_per_object:,.0f} B/object){server}")


async def bench(args: argparse.Namespace) -> None:
    spaces = args.spaces or max(1, round(args.objects / OBJECTS_PER_SPACE))
    spec = SPACE_SPEC.format(spaces=spaces)
    for line in machine():
        print(line)
    print(f"spec: {spec}  seed: 1")
    limit = f"rate limit {args.rate:g} req/s" if args.rate else "no rate limit"
    print(f"emulator: {limit}, latency {args.latency_ms:g} ms "
          f"(a process of its own); {args.runs} runs each, interleaved: {', '.join(TOOLS * min(args.runs, 2))}, ...")
    print("syncd: `syncd sync bench --full --json`, default settings; dlt: bench/dlt_child.py (rest_api, DuckDB)")
    started = time.perf_counter()
    runs: dict[str, list[Run]] = {tool: [] for tool in TOOLS}
    with emulator_process(token=TOKEN, spec=spec, seed=1, rate=args.rate, latency_ms=args.latency_ms, start_timeout=1800) as emulator, \
            tempfile.TemporaryDirectory(prefix="syncd-bench-peer-") as tmp:
        print(f"emulator ready in {time.perf_counter() - started:.1f} s at {emulator.url}", flush=True)
        for index in range(1, args.runs + 1):
            for tool in TOOLS:
                run = RUNNERS[tool](emulator, Path(tmp) / f"{tool}-{index}")
                runs[tool].append(run)
                print(_line(run, index), flush=True)
    syncd, dlt = runs["syncd"][-1], runs["dlt"][-1]
    print()
    print("objects and requests of each list (the last run of each):")
    print(lists_table(syncd, dlt))
    for tool in TOOLS:
        counts = {r.objects for r in runs[tool]}
        if len(counts) > 1:
            print(f"  ({tool}'s runs loaded different counts: {sorted(counts)})")
    print()
    print("what dlt's rest_api config could not express as syncd's catalog does (read anyway, with more requests):")
    for kind, why in NOT_EXPRESSED.items():
        print(f"  {kind}: {why}")
    print()
    for line in machine("at the end"):
        print(line)
    print(markdown_table(runs, round(median(runs["syncd"], "objects"))))
    extra = {kind: dlt.by_kind.get(kind, 0) - syncd.by_kind.get(kind, 0) for kind in dlt.by_kind}
    extra = {kind: n for kind, n in extra.items() if n > 0}
    if extra:
        print(f"dlt's rows beyond syncd's objects: {sum(extra.values()):,} "
              f"({', '.join(f'{kind} {n:,}' for kind, n in extra.items())}); "
              f"its bytes over syncd's objects: {median(runs['dlt'], 'disk_bytes') / syncd.objects:,.0f} an object")
    ratio = median(runs["dlt"], "wall") / median(runs["syncd"], "wall")
    print(f"dlt / syncd: wall {ratio:.1f}x, CPU {median(runs['dlt'], 'cpu') / median(runs['syncd'], 'cpu'):.1f}x, "
          f"peak RSS {median(runs['dlt'], 'peak_rss_mb') / median(runs['syncd'], 'peak_rss_mb'):.1f}x")
    print(f"benchmark total {time.perf_counter() - started:.0f} s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=DEFAULT_OBJECTS, help="about this many objects (default ~108,000)")
    parser.add_argument("--spaces", type=int, default=0, help="spaces of the generated organization (instead of --objects)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each tool, interleaved (default 3)")
    parser.add_argument("--rate", type=float, default=0.0, help="the emulator's rate limit (default: none)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="latency the emulator adds to each request (default 0)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    run_benchmark(bench, parse_args(argv))


if __name__ == "__main__":
    main()
