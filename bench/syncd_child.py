"""One `syncd` command in a child process of its own, as a user runs it, and what the series
need from it: its exit status, its `--json` document, its clients' counters and its peak RSS.

A process a point, so that the peak RSS is that point's alone. The child is
`python bench/syncd_child.py FIGURES.json -- SYNCD-ARGS...`: it runs `syncd.cli.main` unchanged
and, once it returns, writes the figures syncd's output does not carry (every `TenantClient`'s
`ClientStats`, the wall time of `main`, RUSAGE_SELF's maxrss) to FIGURES.json.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parent.parent


@dataclass
class ChildRun:
    """What one `syncd` command in a child process gave."""

    code: int
    wall: float
    """Seconds of `syncd.cli.main` in the child (the interpreter's start not included)."""
    document: Any
    """Its stdout as JSON (a `--json` run), None when it was not JSON."""
    clients: list[dict[str, Any]] = field(default_factory=list)
    """Each client's `ClientStats.as_dict()`, with `name` and the controller's fields."""
    peak_rss_mb: float = 0.0
    stderr: str = ""

    def total(self, key: str) -> int:
        return sum(int(c.get(key) or 0) for c in self.clients)

    def by_tenant(self, key: str) -> dict[str, Any]:
        """`key` of each tenant's client (the highest when a command made several of one tenant)."""
        out: dict[str, Any] = {}
        for c in self.clients:
            value = c.get(key)
            if value is not None and (out.get(c["name"]) is None or value > out[c["name"]]):
                out[c["name"]] = value
            out.setdefault(c["name"], value)
        return out


def run_process(command: list[str], folder: Path, err: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run `command` in `folder`, its stderr into `err`; (exit status, stdout). The child is
    stopped (by its PID) if this process is interrupted."""
    with err.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=folder)
        try:
            out, _ = process.communicate()
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    return process.returncode, out


def run_syncd(args: list[str], folder: Path, label: str) -> ChildRun:
    """Run `syncd ARGS` in a child process; it is stopped (by its PID) if this one is interrupted."""
    figures = folder / f"{label}.figures.json"
    err = folder / f"{label}.stderr"
    command = [sys.executable, str(Path(__file__).resolve()), str(figures), "--", *args]
    code, out = run_process(command, folder, err, {**os.environ, "PYTHONPATH": str(TOP)})
    try:
        document = json.loads(out)
    except ValueError:
        document = None
    got = json.loads(figures.read_text()) if figures.exists() else {}
    return ChildRun(
        code=code, wall=float(got.get("wall", 0.0)), document=document, clients=list(got.get("clients", [])),
        peak_rss_mb=float(got.get("maxrss_kb", 0)) / 1024, stderr=err.read_text(),
    )


def _child(figures: Path, argv: list[str]) -> int:
    """Run syncd's CLI with every client it makes recorded, then write the figures."""
    from series import client_figures

    from syncd import cli
    from syncd.api import TenantClient

    made: list[TenantClient] = []
    init = TenantClient.__init__

    def recorded(self: TenantClient, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    TenantClient.__init__ = recorded  # type: ignore[method-assign]
    started = time.perf_counter()
    code = 1
    try:
        code = cli.main(argv)
    finally:
        wall = time.perf_counter() - started
        clients = [{"name": c.name, **c.stats.as_dict(), **client_figures(c.stats)} for c in made]
        figures.write_text(json.dumps({
            "wall": wall, "code": code, "clients": clients, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        }))
    return code


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        raise SystemExit("usage: syncd_child.py FIGURES.json -- SYNCD-ARGS...")
    sys.exit(_child(Path(sys.argv[1]), sys.argv[3:]))
