"""The write side's size series (issue 46): how the memory and the time of a first copy grow
with the organization copied.

For each size (spaces x pages per space), an emulator of its own (no rate limit, no latency by
default) generates bench/mirror_latency.py's organization with that many spaces and pages and
two empty organizations; each command is a child process (`syncd_child.py`), so its peak RSS is
its own. Two tokens, as a user of two organizations has them: `src` org 1's owner, `dst` org 2's.
  first copy    `syncd mirror apply src:ORG1 dst:ORG2 --json`: peak RSS, wall, all its requests
                (the emulator's count) and its writes
  verify        `syncd mirror verify src:ORG1 dst:ORG2` (equal or not)
  second apply  `syncd mirror apply` again: its writes (the emulator's write calls), peak RSS
  sync          `syncd sync src:ORG1 --db OTHER` (the source alone, a mirror of its own): peak RSS
  --restore     `syncd backup src:ORG1 --out FILE --with-files`, then `syncd restore FILE
                dst:ORG3` into the other empty organization: peak RSS, wall; `mirror verify FILE dst:ORG3`
Checks (the issue's acceptance): the first copy's peak <= 250 MB at every size (the issue sets
it at 3,200 x 10), the peak at 800 spaces within 1.3 x the peak at 100 (same pages), wall per
space within +-20% of the median over the sizes with the same pages, verify equal, second
apply 0 writes; the restore's peak <= 250 MB.

The emulator generates 3,200 x 10 in about 5 s. On integ/45 (before issue 46), on a loaded
2-core machine: the 3,200 x 10 point alone 665 s (its first copy 469 s, 2,085 MB); 100x10,
800x1, 800x10 with --restore 968 s (walls about 4 x a quiet machine's).

Run: .venv/bin/python bench/mirror_sizes.py [--sizes 100x10,800x10,3200x10] [--rate 0]
         [--latency-ms 0] [--restore] [--no-sync]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mirror_latency
from _util import emulator_stats_now, run_benchmark, user_config
from mirror import ALL_TOKEN, ServerCounts
from series import Column, checked, shown, table
from syncd_child import ChildRun, run_syncd

from syncd.emulator.process import emulator_process

SPEC = mirror_latency.SPEC.replace("empty_orgs=1,", "empty_orgs=2,").replace("pages=8,", "pages={pages},")
"""bench/mirror_latency.py's organization at a size, and two empty ones (a copy's, a restore's target)."""
MAX_PEAK_MB = 250.0
MAX_GROWTH = 1.3
GROWTH_FROM, GROWTH_TO = 100, 800
"""The peak at GROWTH_TO spaces against the peak at GROWTH_FROM (the same pages a space)."""
MAX_WALL_SPREAD = 0.2


@dataclass(frozen=True)
class Size:
    spaces: int
    pages: int

    def __str__(self) -> str:
        return f"{self.spaces}x{self.pages}"


def parse_sizes(text: str) -> list[Size]:
    """`"100x10,800x1"` -> [Size(100, 10), Size(800, 1)]; ValueError on anything else."""
    parts = [part.strip().lower() for part in text.split(",")]
    if not parts or any(not p for p in parts):
        raise ValueError(f"a comma-separated list of SPACESxPAGES is needed, not {text!r}")
    out = []
    for part in parts:
        spaces, sep, pages = part.partition("x")
        if not sep or not spaces.strip().isdigit() or not pages.strip().isdigit():
            raise ValueError(f"{part!r} is not SPACESxPAGES (e.g. 800x10)")
        size = Size(int(spaces), int(pages))
        if size.spaces < 1:
            raise ValueError(f"{part!r}: at least one space")
        out.append(size)
    return out


def wall_spread(rows: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Each point's wall per space against the median of the points with the same pages a
    space (0.1: 10% slower a space); None for a point alone with its pages."""
    by_pages: dict[int, list[float]] = {}
    for row in rows:
        by_pages.setdefault(row["pages"], []).append(row["wall"] / row["spaces"])
    out: dict[str, float | None] = {}
    for row in rows:
        group = by_pages[row["pages"]]
        out[row["size"]] = (row["wall"] / row["spaces"]) / statistics.median(group) - 1 if len(group) > 1 else None
    return out


def growth(rows: Sequence[dict[str, Any]], pages: int) -> float | None:
    """The first copy's peak at GROWTH_TO spaces / at GROWTH_FROM, both with `pages` a space."""
    peaks = {row["spaces"]: row["peak_rss_mb"] for row in rows if row["pages"] == pages}
    if peaks.get(GROWTH_FROM) and peaks.get(GROWTH_TO) is not None:
        return float(peaks[GROWTH_TO]) / float(peaks[GROWTH_FROM])
    return None


def checks(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The acceptance lines of the series, each `ok`, `MISSED` or `-` (nothing to check)."""
    lines = []
    for row in rows:
        parts = [f"peak {row['peak_rss_mb']:.0f} MB {checked(row['peak_rss_mb'], MAX_PEAK_MB)}",
                 "verify equal" if row["verify"] == "equal" else f"verify {row['verify']}: MISSED",
                 "second apply 0 writes" if row["second_writes"] == 0 else f"second apply {row['second_writes']} writes: MISSED"]
        if row.get("restore_peak_mb") is not None:
            parts.append(f"restore peak {row['restore_peak_mb']:.0f} MB {checked(row['restore_peak_mb'], MAX_PEAK_MB)}")
            parts.append("restore verify equal" if row.get("restore_verify") == "equal" else f"restore verify {row.get('restore_verify')}: MISSED")
        lines.append(f"{row['size']}: " + ", ".join(parts))
    for pages in sorted({row["pages"] for row in rows}):
        ratio = growth(rows, pages)
        if ratio is not None:
            lines.append(f"peak at {GROWTH_TO}x{pages} / at {GROWTH_FROM}x{pages}: {ratio:.2f} (<= {MAX_GROWTH:g}) {checked(ratio, MAX_GROWTH)}")
    for size, spread in wall_spread(rows).items():
        if spread is not None:
            lines.append(f"{size}: wall per space {spread:+.0%} of the median (within +-{MAX_WALL_SPREAD:.0%}) {checked(abs(spread), MAX_WALL_SPREAD)}")
    return lines


COLUMNS = (
    Column("size", "size"),
    Column("objects", "objects", "{:,}"),
    Column("requests", "requests", "{:,}"),
    Column("writes", "writes", "{:,}"),
    Column("wall s", "wall", "{:.1f}"),
    Column("ms/space", "ms_per_space", "{:.0f}"),
    Column("peak MB", "peak_rss_mb", "{:.0f}"),
    Column("verify", "verify"),
    Column("2nd writes", "second_writes", "{:,}"),
    Column("2nd peak MB", "second_peak_mb", "{:.0f}"),
    Column("sync peak MB", "sync_peak_mb", "{:.0f}"),
    Column("restore s", "restore_wall", "{:.1f}"),
    Column("restore MB", "restore_peak_mb", "{:.0f}"),
    Column("restore verify", "restore_verify"),
)


def last_words(stderr: str, lines: int = 6) -> str:
    """The end of a command's stderr without its progress lines (what says why it failed)."""
    said = [line for line in stderr.splitlines() if line.strip() and "syncd.progress" not in line and "content.imported" not in line]
    return " | ".join(said[-lines:])[-1200:]


def failures(document: Any, most: int = 3) -> str:
    """`; failed: ...` the first failed operations of an apply's `--json` document, if any."""
    rounds = (document or {}).get("rounds") or []
    failed = [f for r in rounds for f in ((r.get("apply") or {}).get("failed") or [])]
    return f"; {len(failed)} failed: {failed[:most]}"[:1500] if failed else ""


def verified(run: ChildRun) -> str:
    return "equal" if run.code == 0 else f"exit {run.code}"


def size_point(args: argparse.Namespace, size: Size) -> dict[str, Any]:
    """One size: an emulator of its own; every command a child process."""
    spec = SPEC.format(spaces=size.spaces, pages=size.pages)
    generating = time.perf_counter()
    with emulator_process(token=ALL_TOKEN, spec=spec, seed=1, rate=args.rate, latency_ms=args.latency_ms, start_timeout=1800) as emulator, \
            tempfile.TemporaryDirectory(prefix="syncd-bench-mirror-sizes-") as tmp:
        generated = time.perf_counter() - generating
        folder = Path(tmp)
        src_org, dst_org, restore_org = (o["id"] for o in emulator.report["organizations"][:3])
        config = str(user_config(folder, {"src": (emulator.url, "org1-token"), "dst": (emulator.url, "org2-token"),
                                          "rst": (emulator.url, "org3-token")}))
        refs = [f"src:{src_org}", f"dst:{dst_org}"]

        def counted(label: str, command: list[str]) -> tuple[ChildRun, ServerCounts]:
            before = ServerCounts.of(emulator_stats_now(emulator.url))
            run = run_syncd([*command, "--config", config], folder, label)
            if run.code != 0:
                print(f"  {size}: {' '.join(command[:2])} exited {run.code}: {last_words(run.stderr)}{failures(run.document)}", flush=True)
            return run, ServerCounts.of(emulator_stats_now(emulator.url)) - before

        first, first_server = counted("apply", ["mirror", "apply", *refs, "--json"])
        verify, _ = counted("verify", ["mirror", "verify", *refs])
        second, second_server = counted("apply-again", ["mirror", "apply", *refs, "--json"])
        row: dict[str, Any] = {
            "size": str(size), "spaces": size.spaces, "pages": size.pages, "generated": generated,
            "requests": first_server.total, "writes": first_server.writes,
            "wall": first.wall, "ms_per_space": 1000 * first.wall / size.spaces, "peak_rss_mb": first.peak_rss_mb,
            "verify": verified(verify), "second_writes": second_server.writes, "second_peak_mb": second.peak_rss_mb,
        }
        if args.sync:
            sync, _ = counted("sync", ["sync", f"src:{src_org}", "--db", str(folder / "sync-alone.db"), "--json"])
            row.update(sync_peak_mb=sync.peak_rss_mb, objects=(sync.document or {}).get("objects"))
        if args.restore:
            backup = str(folder / "backup.db")
            counted("backup", ["backup", f"src:{src_org}", "--out", backup, "--with-files"])
            restore, _ = counted("restore", ["restore", backup, f"rst:{restore_org}", "--json"])
            restored, _ = counted("restore-verify", ["mirror", "verify", backup, f"rst:{restore_org}"])
            row.update(restore_wall=restore.wall, restore_peak_mb=restore.peak_rss_mb, restore_verify=verified(restored))
    return row


async def bench(args: argparse.Namespace) -> None:
    print(f"mirror size series: sizes {', '.join(map(str, args.sizes))} (spaces x pages a space); "
          f"rate {'none' if not args.rate else f'{args.rate:g} req/s per token'}, latency {args.latency_ms:g} ms; "
          f"two tokens (org1-token -> org2-token); spec {SPEC}")
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for size in args.sizes:
        row = size_point(args, size)
        rows.append(row)
        print(f"  {size}: emulator generated in {row['generated']:.1f} s; first copy {row['requests']:,} requests "
              f"({row['writes']:,} writes) in {row['wall']:.1f} s, peak {row['peak_rss_mb']:.0f} MB; verify {row['verify']}; "
              f"second apply {row['second_writes']:,} writes, peak {row['second_peak_mb']:.0f} MB; "
              f"sync peak {shown(row.get('sync_peak_mb'), '{:.0f}')} MB; restore {shown(row.get('restore_wall'), '{:.1f}')} s, "
              f"{shown(row.get('restore_peak_mb'), '{:.0f}')} MB, {shown(row.get('restore_verify'))}", flush=True)
    print()
    print(table(COLUMNS, rows))
    print("objects: the source's, as `syncd sync` read them; requests, writes: the emulator's count (all of the first copy: "
          "both sides' reads, its writes, the re-read); peak MB: the command's peak RSS (its own process)")
    print("checks:")
    for line in checks(rows):
        print(f"  {line}")
    print(f"series total {time.perf_counter() - started:.0f} s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100x10,800x10,3200x10", help="SPACESxPAGES a space, comma-separated")
    parser.add_argument("--rate", type=float, default=0.0, help="the emulator's rate limit (requests/s per token; 0: none)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="the emulator's added latency")
    parser.add_argument("--restore", action="store_true", help="also a backup of the source and its restore into an empty organization")
    parser.add_argument("--no-sync", dest="sync", action="store_false", help="skip `syncd sync` of the source alone")
    args = parser.parse_args(argv)
    try:
        args.sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        parser.error(f"--sizes: {exc}")
    return args


def main(argv: list[str] | None = None) -> None:
    run_benchmark(bench, parse_args(argv))


if __name__ == "__main__":
    main()
