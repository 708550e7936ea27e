"""The mirror's latency series (issue 45): at one rate limit R, a first copy of a generated
organization of about 30 spaces into an empty one with `syncd mirror apply`, end to end (its
reads and writes), at each latency; then `syncd mirror verify` and a second `mirror apply`.

Default settings: the configuration names two tenants as a user writes them (a URL and a
token each: `src` the owner token of organization 1, `dst` that of the empty organization 2;
`--same-token` gives both one token that sees both), no `concurrency`. Each point has an
emulator of its own and each command is a child process (`syncd_child.py`), so the peak RSS is
that command's. Prints, for each latency:
  first copy   all its requests (the emulator's count), wall, wall / (requests / R);
               the same against the busiest token's requests (two tokens: two buckets)
  apply round  round 1's requests (writes + reads, as the run reports them), its seconds, ratio
  429s, the in-flight limit peak of each tenant (`src/dst`), peak RSS
  verify       equal or not;   second apply   its writes (the emulator's write calls)
Targets: first copy <= 1.25 and apply round <= 1.5 at 150 ms; verify equal; second apply 0 writes.

Run: .venv/bin/python bench/mirror_latency.py [--latency-ms 20,80,150,300] [--rate 100] [--spaces 30] [--same-token]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import answer_budget_mb, emulator_stats_now, run_benchmark, user_config
from mirror import ALL_TOKEN, ServerCounts
from series import Column, checked, parse_latencies, ratio, share, shown, table
from syncd_child import ChildRun, run_syncd

from syncd.emulator.process import emulator_process

SPEC = (
    "orgs=1,empty_orgs=1,collections=20,spaces={spaces},pages=8,files=1,sites=6,sections=4,members=5,teams=5,"
    "saml=1,openapi=2,translations=1,custom_fields=4,comments=1,change_requests=1,integrations=1"
)
"""bench/mirror.py's organization, with fewer spaces: ~1,400 requests for 30 spaces."""
MAX_COPY = 1.25
MAX_ROUND = 1.5
CHECKED_AT = 150.0
"""The latency the issue's copy targets are set at (the other points print their figures)."""

COLUMNS = (
    Column("latency ms", "latency", "{:g}"),
    Column("requests", "requests", "{:,}"),
    Column("wall s", "wall", "{:.1f}"),
    Column("ratio", "ratio", "{:.2f}"),
    Column("busiest token", "token_ratio", "{:.2f}"),
    Column("round reqs", "round_requests", "{:,}"),
    Column("round s", "round_wall", "{:.1f}"),
    Column("round ratio", "round_ratio", "{:.2f}"),
    Column("429s", "rate_limited", "{:,}"),
    Column("429 %", "rate_limited_share", "{:.2%}"),
    Column("limit peak", "limits"),
    Column("peak RSS MB", "peak_rss_mb", "{:.0f}"),
    Column("verify", "verify"),
    Column("2nd writes", "second_writes", "{:,}"),
    Column("targets", "targets"),
)


def first_round(document: Any) -> dict[str, Any] | None:
    """Round 1's apply figures of a `mirror apply --json` document (writes, reads, seconds)."""
    rounds = (document or {}).get("rounds") or []
    apply = rounds[0].get("apply") if rounds else None
    return apply if isinstance(apply, dict) else None


def limits(run: ChildRun, tenants: tuple[str, ...]) -> str | None:
    """`src/dst` in-flight limit peaks, None when the client reports none."""
    peaks = run.by_tenant("inflight_limit_peak")
    if all(peaks.get(t) is None for t in tenants):
        return None
    return "/".join(shown(peaks.get(t), "{:g}") for t in tenants)


def verdict(row: dict[str, Any]) -> str:
    """The targets of the point: checked at 150 ms, `-` elsewhere for the ratios."""
    parts = []
    if row["latency"] == CHECKED_AT:
        parts += [f"copy {checked(row['ratio'], MAX_COPY)}", f"round {checked(row['round_ratio'], MAX_ROUND)}"]
    parts += ["equal" if row["verify"] == "equal" else "NOT EQUAL", "0 writes" if row["second_writes"] == 0 else "WRITES"]
    return ", ".join(parts)


def copy_point(args: argparse.Namespace, latency: float) -> dict[str, Any]:
    """One point: an emulator at `latency`; apply, verify and apply again in child processes."""
    spec = SPEC.format(spaces=args.spaces)
    with emulator_process(token=ALL_TOKEN, spec=spec, seed=1, rate=args.rate, latency_ms=latency) as emulator, \
            tempfile.TemporaryDirectory(prefix="syncd-bench-mirror-series-") as tmp:
        folder = Path(tmp)
        src_org, dst_org = (o["id"] for o in emulator.report["organizations"][:2])
        tokens = (ALL_TOKEN, ALL_TOKEN) if args.same_token else ("org1-token", "org2-token")
        config = str(user_config(folder, {"src": (emulator.url, tokens[0]), "dst": (emulator.url, tokens[1])}))
        refs = [f"src:{src_org}", f"dst:{dst_org}"]

        def counted(label: str, command: list[str]) -> tuple[ChildRun, ServerCounts]:
            before = ServerCounts.of(emulator_stats_now(emulator.url))
            run = run_syncd([*command, "--json", "--config", config], folder, label)
            if run.code != 0:
                print(f"  {' '.join(command[:2])} at {latency:g} ms exited {run.code}: {run.stderr.strip()[-600:]}")
            return run, ServerCounts.of(emulator_stats_now(emulator.url)) - before

        first, first_server = counted("apply", ["mirror", "apply", *refs])
        verify, _ = counted("verify", ["mirror", "verify", *refs])
        _, second_server = counted("apply-again", ["mirror", "apply", *refs])
    round_1 = first_round(first.document) or {}
    round_requests = int(round_1.get("writes", 0)) + int(round_1.get("reads", 0))
    round_wall = float(round_1.get("seconds", 0.0))
    per_token = first.by_tenant("requests") if not args.same_token else {"both": first.total("requests")}
    row = {
        "latency": latency, "requests": first_server.total, "wall": first.wall, "ratio": ratio(first.wall, first_server.total, args.rate),
        "token_ratio": ratio(first.wall, max(per_token.values(), default=0), args.rate),
        "round_requests": round_requests, "round_wall": round_wall, "round_ratio": ratio(round_wall, round_requests, args.rate),
        "rate_limited": first_server.status_429, "rate_limited_share": share(first_server.status_429, first_server.total),
        "limits": limits(first, ("src", "dst")), "peak_rss_mb": first.peak_rss_mb,
        "verify": "equal" if verify.code == 0 else f"exit {verify.code}", "second_writes": second_server.writes,
        "writes": first_server.writes,
    }
    row["targets"] = verdict(row)
    return row


async def bench(args: argparse.Namespace) -> None:
    print(f"mirror series: spec {SPEC.format(spaces=args.spaces)}; R = {args.rate:g} req/s per token; "
          f"latencies {', '.join(f'{v:g}' for v in args.latencies)} ms; "
          + ("one token for both tenants" if args.same_token else "two tokens (org1-token -> org2-token)"))
    print("syncd: `syncd mirror apply src:ORG1 dst:ORG2 --json`, `mirror verify`, `mirror apply` again, each a child process; "
          "default settings (no concurrency in the config)")
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for latency in args.latencies:
        row = copy_point(args, latency)
        rows.append(row)
        print(f"  {latency:g} ms: {row['requests']:,} requests ({row['writes']:,} writes), wall {row['wall']:.1f} s, "
              f"ratio {shown(row['ratio'], '{:.2f}')}; round 1 {row['round_requests']:,} requests in {row['round_wall']:.1f} s; "
              f"{row['targets']}", flush=True)
    print()
    print(table(COLUMNS, rows))
    print(f"ratio: wall / (all requests / R), the bucket's first R requests free included; busiest token: against the requests of the "
          f"busier of the two tokens (each has its own bucket). Targets at {CHECKED_AT:g} ms: copy <= {MAX_COPY:g}, apply round "
          f"<= {MAX_ROUND:g}; every point: verify equal, second apply 0 writes. Peak RSS: the first apply's process "
          f"(answer budget {answer_budget_mb():.0f} MB). `-`: the client does not report that figure")
    print(f"series total {time.perf_counter() - started:.0f} s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", default="20,80,150,300", help="latencies of the series, comma-separated (ms)")
    parser.add_argument("--rate", type=float, default=100.0, help="the emulator's rate limit R (requests/s per token)")
    parser.add_argument("--spaces", type=int, default=30, help="spaces of the organization copied")
    parser.add_argument("--same-token", action="store_true", help="one token for both tenants (duplicate + transfer)")
    args = parser.parse_args(argv)
    try:
        args.latencies = parse_latencies(args.latency_ms)
    except ValueError as exc:
        parser.error(f"--latency-ms: {exc}")
    return args


def main(argv: list[str] | None = None) -> None:
    run_benchmark(bench, parse_args(argv))


if __name__ == "__main__":
    main()
