"""The mutation check: how many small bugs put into the modules that hold the documentation's promises
the tests catch (mutmut, configured in pyproject.toml `[tool.mutmut]`). Not part of CI: it
runs each mutant against the tests that cover its function, which takes a while.

    python bench/mutation.py                 # all configured modules
    python bench/mutation.py 'syncd.daemon.retention*'   # mutants whose name matches
    python bench/mutation.py --report        # figures of the last run, without running

It prints mutants, killed, survivors (each by name; `mutmut show NAME` shows its diff) and the
other outcomes (timeouts, no tests). Survivors are explained in docs/development/mutation.md.
Needs `pip install mutmut` (3.x); it works in `mutants/` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATS = ROOT / "mutants" / "mutmut-cicd-stats.json"


def mutmut() -> list[str]:
    """The mutmut command of this interpreter's environment."""
    found = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or shutil.which("mutmut")
    if found is None:
        sys.exit("bench/mutation.py: mutmut is not installed: pip install 'mutmut>=3.3'")
    return [found]


def run(names: list[str], children: int | None) -> float:
    started = time.monotonic()
    command = [*mutmut(), "run", *(["--max-children", str(children)] if children else []), *names]
    # mutmut draws a spinner per mutant; its own summary is in the files read below.
    subprocess.run(command, cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def outcomes() -> dict[str, str]:
    """Mutant name -> outcome ("killed", "survived", "timeout", ...), from `mutmut results --all`."""
    done = subprocess.run([*mutmut(), "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True, check=True)
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        name, sep, outcome = line.strip().rpartition(": ")
        if sep and name:
            found[name] = outcome.strip()
    return found


def report(seconds: float | None) -> None:
    found = outcomes()
    counts = Counter(found.values())
    subprocess.run([*mutmut(), "export-cicd-stats"], cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
    stats = json.loads(STATS.read_text()) if STATS.exists() else {}
    per_module = Counter(name.rsplit(".", 1)[0].split(".x_")[0].split(".xǁ")[0] for name in found)
    print(f"mutants: {len(found)}   killed: {counts['killed']}   survived: {counts['survived']}", end="")
    others = {k: v for k, v in counts.items() if k not in ("killed", "survived")}
    print("".join(f"   {k}: {v}" for k, v in sorted(others.items())))
    if seconds is not None:
        print(f"time: {seconds:.0f} s")
    if stats:
        print("mutmut's figures: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
    print("per module: " + ", ".join(f"{module} {n}" for module, n in sorted(per_module.items())))
    survivors = sorted(name for name, outcome in found.items() if outcome == "survived")
    if survivors:
        print("survivors (`mutmut show NAME` for each diff):")
        for name in survivors:
            print(f"  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutant name patterns (default: every mutant)")
    parser.add_argument("--report", action="store_true", help="print the last run's figures only")
    parser.add_argument("--max-children", type=int, default=None, help="mutants run at once (default: mutmut's, the cores)")
    args = parser.parse_args()
    seconds = None if args.report else run(args.names, args.max_children)
    report(seconds)


if __name__ == "__main__":
    main()
