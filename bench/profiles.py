"""Rounds and writes per copy under each behaviour profile: `default`, `divergent` and ten
`mixed:SEED` (issue 21's figures). Each runs `tests/profile_scenario.py`: an organization
with a locked space and a site root alternating sections and groups, copied across two tokens
and restored from a backup with faults `lost=0.05,5xx=0.02`, then applied again, on one
emulator whose profile is switched between scenarios (syncd runs in this process). Prints a
row per profile (the rows it plays as `divergent`); nothing about time is asserted.

    python bench/profiles.py [--seeds 0-9]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from syncd.emulator.profile import ROWS, divergent_rows, get_profile  # noqa: E402
from tests.profile_scenario import pool, run_scenario  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-9", help="mixed seeds, FIRST-LAST")
    args = parser.parse_args()
    first, _, last = args.seeds.partition("-")
    profiles = ["default", "divergent", *(f"mixed:{s}" for s in range(int(first), int(last or first) + 1))]
    print(f"{'profile':<12} {'copy rounds':>11} {'copy writes':>11} {'2nd apply':>9} {'restore rounds':>14} {'restore writes':>14} {'s':>5}  divergent rows (of {len(ROWS)})")
    with pool(len(profiles)) as organizations:
        for profile in profiles:
            started = time.monotonic()
            with tempfile.TemporaryDirectory() as workdir:
                out = run_scenario(organizations, profile, Path(workdir))
            rows = divergent_rows(get_profile(profile))
            print(f"{profile:<12} {out.copy_rounds:>11} {out.copy_writes:>11} {out.second_writes:>9} {out.restore_rounds:>14} {out.restore_writes:>14} "
                  f"{time.monotonic() - started:>5.1f}  {len(rows)}: {', '.join(rows)}", flush=True)


if __name__ == "__main__":
    main()
