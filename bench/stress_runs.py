"""Runs the test suite K times in a row under CPU load; prints each run's counts and time.

Why: issue 14's acceptance is "the suite passes 5 runs in a row under stress-style CPU load on
both cores". Each run is `pytest -q -n auto --stress-cpu=N`, the suite as CI runs it (one
xdist worker a core) with N burner processes beside it (tests/cpu_stress.py: they spin at normal
priority for the whole session, started and stopped by the session itself).
A run that does not pass does not stop the others: all K are run, and the exit status is 0
only if every one passed.

Run: .venv/bin/python bench/stress_runs.py [--runs 5] [--burners 2] [-- PYTEST ARGS...]
e.g. .venv/bin/python bench/stress_runs.py --runs 2 -- tests/test_orgs.py tests/test_scope.py
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
LOGS = TOP / "state" / "stress-runs"
# pytest's last line, e.g. "2 failed, 425 passed, 3 skipped in 402.11s (0:06:42)"
COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")
# tests/cpu_stress.py's last line: "stress: 2 CPU burner(s) stopped after 402 s ...; CPU each used: 390 s, 391 s"
BURNED = re.compile(r"^stress: .* CPU each used: (.*)$", re.MULTILINE)


@dataclass
class Run:
    number: int
    status: int
    seconds: float
    counts: dict[str, int]
    burned: str
    log: Path

    def line(self) -> str:
        shown = ", ".join(f"{n} {k}" for k, n in self.counts.items()) or "no summary line"
        verdict = "PASS" if self.status == 0 else f"FAIL (exit {self.status})"
        return (f"run {self.number}: {verdict:<14} {self.seconds:6.0f} s  {shown}; burners' CPU: {self.burned}"
                f"  log: {self.log.relative_to(TOP)}")


def summary_counts(output: str) -> dict[str, int]:
    """The counts of pytest's last summary line ("N passed, M failed, ... in S")."""
    for line in reversed(output.splitlines()):
        if " in " in line and COUNT.search(line):
            counts = {kind: int(n) for n, kind in COUNT.findall(line)}
            if "error" in counts:
                counts["errors"] = counts.pop("error")
            return counts
    return {}


def run_once(number: int, burners: int, pytest_args: list[str]) -> Run:
    log = LOGS / f"run-{number}.log"
    argv = [sys.executable, "-m", "pytest", "-q", "-n", "auto", f"--stress-cpu={burners}", *pytest_args]
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(argv, cwd=TOP, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            status = process.wait()
        except KeyboardInterrupt:
            process.wait(timeout=60)  # pytest had the Ctrl-C too: it stops its burners, then ends
            raise
    seconds = time.monotonic() - started
    output = log.read_text(errors="replace")
    burned = BURNED.search(output)
    return Run(number, status, seconds, summary_counts(output), burned.group(1) if burned else "not reported", log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="how many runs in a row (default 5)")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2,
                        help="CPU burner processes during each run (default: one a core)")
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest runs (default: the whole suite)")
    args = parser.parse_args()
    LOGS.mkdir(parents=True, exist_ok=True)
    print(f"{args.runs} run(s) of pytest -q -n auto --stress-cpu={args.burners} {' '.join(args.pytest_args)}".rstrip(), flush=True)
    runs: list[Run] = []
    try:
        for number in range(1, args.runs + 1):
            runs.append(run_once(number, args.burners, args.pytest_args))
            print(runs[-1].line(), flush=True)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    passed = sum(r.status == 0 for r in runs)
    print(f"{passed} of {len(runs)} run(s) passed under {args.burners} burner(s)")
    return 0 if passed == len(runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
