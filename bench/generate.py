"""Benchmark of the emulator's generator: prints time and object counts (asserts nothing).

Target from the foundation issue: 2 organizations of 1,000 spaces x 20 pages in under 10 s.
Run: .venv/bin/python bench/generate.py [SPEC]
"""

from __future__ import annotations

import resource
import sys
import time

from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.revisions import walk
from syncd.emulator.store import Store

DEFAULT_SPEC = "orgs=2,collections=40,spaces=1000,pages=20,files=2,sites=10,sections=4"


def main(spec: str = DEFAULT_SPEC) -> None:
    params = parse_spec(spec)
    store = Store(seed=1)
    started = time.perf_counter()
    generate(store, params, seed=1)
    elapsed = time.perf_counter() - started
    spaces = list(store.tables["space"].values())
    pages = sum(len(walk(store.tables["revision"][s["revision"]]["pages"])) for s in spaces)
    objects = sum(len(rows) for kind, rows in store.tables.items() if kind != "revision") + pages
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"spec: {spec}")
    print(f"organizations: {len(store.orgs)}  spaces: {len(spaces)}  pages: {pages}  objects: {objects}")
    for kind, rows in sorted(store.tables.items()):
        print(f"  {kind}: {len(rows)}")
    print(f"generation time: {elapsed:.2f} s (target < 10 s: ratio {elapsed / 10:.2f})")
    print(f"peak RSS: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main(*sys.argv[1:2])
