"""Peak memory of `syncd export` for one very large row (issue 22, item 11).

Builds a backup file holding one organization, one space and one page, the page's markdown
of SIZE MB (default 150: lines of text with links, so the link rewriting has work to do),
and a baseline backup where the same page holds 1 KB. Each is exported by `syncd export` in a
process of its own, twice (a fresh export, then a re-export over it, which compares what is
there), and the peak RSS of that process (`getrusage(RUSAGE_CHILDREN)` read by a small parent
that runs only it) is printed with the bound of the issue (under 400 MB for 150 MB). Figures
only, no asserts.

Run: python bench/export_memory.py [SIZE_MB]
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from syncd.state import StateStore, Row, stored_hash

TENANT = "bench"
ORG, SPACE, PAGE = "org1", "space1", "page1"
LINES = "A line of the big page, with some words in it and nothing to rewrite.\n" * 7 + (
    "A line with [a link](other-page#part) and ![an image](.gitbook/assets/diagram.png) in it.\n"
)
BOUND_MB = 400


def markdown_of(size: int) -> str:
    """About `size` bytes of markdown: many lines, one in eight with a link and an image."""
    return LINES * max(1, size // len(LINES))


def row(kind: str, row_id: str, parent: tuple[str, str] | None, scope: str | None, data: dict[str, object], position: int | None = None) -> Row:
    return Row(TENANT, kind, row_id, ORG, parent[0] if parent else None, parent[1] if parent else None, position,
               f"bench:{kind}", scope, data, stored_hash(data))  # fmt: skip


def write_backup(path: Path, markdown_bytes: int) -> None:
    """One complete run of one organization, one space and its two pages (one big)."""
    rows = [
        row("organization", ORG, None, None, {"id": ORG, "title": "Bench organization"}),
        row("space", SPACE, ("organization", ORG), None, {"id": SPACE, "title": "Big space"}, 0),
        row("page", f"{SPACE}/{PAGE}", ("space", SPACE), f"space:{SPACE}",
            {"id": PAGE, "title": "Big page", "path": "big-page", "markdown": markdown_of(markdown_bytes)}, 0),
        row("page", f"{SPACE}/other", ("space", SPACE), f"space:{SPACE}",
            {"id": "other", "title": "Other page", "path": "other-page", "markdown": "small\n"}, 1),
    ]  # fmt: skip
    with StateStore(path) as mirror:
        run = mirror.start_run("backup", TENANT, TENANT)
        mirror.stage(run, rows)
        for listing in sorted({r.listing for r in rows if r.listing}):
            mirror.record_listing(run, TENANT, listing, ok=True)
        mirror.finish_run(run)


_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)\n"
)
"""Runs one command and prints its peak RSS (KiB) and exit code: RUSAGE_CHILDREN keeps the
largest child's maximum, so each export gets a fresh parent of its own."""


def export_peak(db: Path, out: Path) -> tuple[float, float, int]:
    """(peak RSS MB of the export process, seconds, exit code): `syncd export` run alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNCD_")}
    started = time.perf_counter()
    argv = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "syncd.cli", "export", str(db), str(out)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    kib, code = done.stdout.split()
    return int(kib) / 1024, seconds, int(code)


def page_digest(out: Path) -> str:
    """sha256 of the exported big page (the space's README.md), to show both runs agree."""
    found = next(out.rglob("README.md"))
    digest = hashlib.sha256()
    with found.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def main() -> None:
    size_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 150.0
    with tempfile.TemporaryDirectory(prefix="syncd-export-bench-") as top:
        folder = Path(top)
        small, big = folder / "small.db", folder / "big.db"
        write_backup(small, 1024)
        write_backup(big, int(size_mb * 1024 * 1024))
        print(f"backup with a {size_mb:g} MB page: {big.stat().st_size / 2**20:.0f} MB on disk")
        for label, db in (("baseline (1 KB page)", small), (f"{size_mb:g} MB page", big)):
            out = folder / f"out-{db.stem}"
            for attempt in ("export", "re-export"):
                peak, seconds, code = export_peak(db, out)
                bound = f"  (bound < {BOUND_MB} MB: {'met' if peak < BOUND_MB else 'MISSED'})" if db is big else ""
                print(f"{label:>22} {attempt:>9}: exit {code}, peak RSS {peak:7.1f} MB, {seconds:5.1f} s, page {page_digest(out)}{bound}")


if __name__ == "__main__":
    main()
