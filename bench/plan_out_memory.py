"""What saving a plan costs in memory (issue 46): the peak RSS of `syncd mirror plan` with and
without `--out PLAN.json`, for bench/mirror_sizes.py's organization at one size.

One emulator (no rate limit, no latency) generates the organization and an empty one; each
command is a child process (`syncd_child.py`, its peak RSS its own) with a state file of its
own, so both read the same two organizations from nothing:
  plan        `syncd mirror plan src:ORG1 dst:ORG2`: what making the plan takes
  plan --out  `syncd mirror plan src:ORG1 dst:ORG2 --out plan.json`: that and the file
The difference is what writing the file adds on top of the plan. Prints figures, asserts
nothing. To compare two versions of syncd, run it in a checkout of each (the children run the
syncd of the checkout this file is in).

Measured at 800 x 10 (a 3.0 MB plan file): before the file was written as it is made, plan
99 MB, plan --out 118 MB (+18 MB: the whole document and its text); after, 100 MB and 100 MB.

Run: .venv/bin/python bench/plan_out_memory.py [--size 800x10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import run_benchmark, user_config
from mirror import ALL_TOKEN
from mirror_sizes import SPEC, last_words, parse_sizes
from syncd_child import ChildRun, run_syncd

from syncd.emulator.process import emulator_process


async def bench(args: argparse.Namespace) -> None:
    size = args.size
    spec = SPEC.format(spaces=size.spaces, pages=size.pages)
    print(f"plan --out memory: size {size} (spaces x pages a space); spec {spec}")
    generating = time.perf_counter()
    with emulator_process(token=ALL_TOKEN, spec=spec, seed=1, start_timeout=1800) as emulator, \
            tempfile.TemporaryDirectory(prefix="syncd-bench-plan-out-") as tmp:
        print(f"  emulator generated in {time.perf_counter() - generating:.1f} s", flush=True)
        folder = Path(tmp)
        src_org, dst_org = (o["id"] for o in emulator.report["organizations"][:2])
        config = str(user_config(folder, {"src": (emulator.url, "org1-token"), "dst": (emulator.url, "org2-token")}))
        plan_file = folder / "plan.json"
        runs: dict[str, ChildRun] = {}
        for label, extra in (("plan", []), ("plan --out", ["--out", str(plan_file)])):
            db = str(folder / f"{label.replace(' ', '').replace('-', '')}.db")
            run = run_syncd(["mirror", "plan", f"src:{src_org}", f"dst:{dst_org}", *extra, "--db", db, "--config", config], folder, label.replace(" ", ""))
            if run.code not in (0, 2):
                print(f"  {label}: exited {run.code}: {last_words(run.stderr)}", flush=True)
            runs[label] = run
            print(f"  {label}: exit {run.code}, {run.wall:.1f} s, peak RSS {run.peak_rss_mb:.0f} MB", flush=True)
        size_mb = plan_file.stat().st_size / 2**20 if plan_file.exists() else 0.0
        added = runs["plan --out"].peak_rss_mb - runs["plan"].peak_rss_mb
        print(f"plan file {size_mb:.1f} MB; writing it added {added:+.0f} MB to the peak "
              f"({runs['plan'].peak_rss_mb:.0f} MB -> {runs['plan --out'].peak_rss_mb:.0f} MB)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="800x10", help="SPACESxPAGES a space")
    args = parser.parse_args(argv)
    try:
        (args.size,) = parse_sizes(args.size)
    except ValueError as exc:
        parser.error(f"--size: {exc}")
    return args


def main(argv: list[str] | None = None) -> None:
    run_benchmark(bench, parse_args(argv))


if __name__ == "__main__":
    main()
