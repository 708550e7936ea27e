"""Slowloris against a live restore's content source (issue 22, item 3): prints figures.

A backup (files included) of an emulator organization is restored into an empty one by
`syncd restore`, a process of its own started under `ulimit -n 1024` (its RLIMIT_NOFILE soft
limit), whose content source listens on a fixed port. As soon as that port answers, this
process opens `--connections` (1,100) connections to it, each sending half a request header
and then nothing; a connection the server closes is opened again after `--reconnect` s, until
the restore ends. A baseline restore of the same backup into another empty organization,
with no attack, runs first.

Printed: the restore's outcome (exit code, equal or not, rounds, wall time), and from its
`content.stopped` log line the most connections the server held open at once (target: at most
`max_connections`), the connections it closed at once because of the cap, and those it closed
because no header came in time; from this side, the connections opened and seen closed; and
how many "Too many open files" or Traceback lines the restore wrote (target: none).

Before the fix: 3,250 "Too many open files" lines, then the restore died with a traceback
(EMFILE on its own lock file).

Run: .venv/bin/python bench/slowloris.py [--connections 1100] [--nofile 1024]
         [--max-connections 128] [--header-timeout 5] [--reconnect 0.2] [--spec SPEC]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _util import run_benchmark  # noqa: E402

from syncd.emulator.process import emulator_process  # noqa: E402

TOKEN = "bench-token"
SPEC = "orgs=1,empty_orgs=2,collections=3,spaces=24,pages=6,files=2"
LOGS = ("--log-format", "json", "--log-level", "info")
HALF_HEADER = b"GET / HTTP/1.1\r\nHost: content.example\r\nUser-Agent: slow"


@dataclass
class Restore:
    """One finished `syncd restore` process."""

    label: str
    code: int
    seconds: float
    report: dict[str, Any]
    logs: list[dict[str, Any]]
    stderr: str

    @property
    def equal(self) -> bool:
        return bool(self.report.get("equal"))

    def event(self, name: str) -> dict[str, Any]:
        return next((line for line in reversed(self.logs) if line.get("event") == name), {})

    def line(self) -> str:
        rounds = len(self.report.get("rounds") or [])
        return (f"{self.label}: exit {self.code}, {'equal' if self.equal else 'NOT equal'}, {rounds} round(s), "
                f"{self.report.get('writes', '?')} writes, {self.seconds:.1f} s")  # fmt: skip


@dataclass
class Attack:
    """What the slow clients saw."""

    opened: int = 0
    closed_by_server: int = 0
    refused: int = 0
    open_now: int = 0
    max_open: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment(url: str, workdir: Path, args: argparse.Namespace, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNCD_")}
    env.update({
        "NO_COLOR": "1", "PYTHONUNBUFFERED": "1", "SYNCD_STATE_DIR": str(workdir / "state"),
        "SYNCD_TENANTS__SRC__BASE_URL": url, "SYNCD_TENANTS__SRC__TOKEN": TOKEN,
        "SYNCD_CONTENT_SOURCE__PORT": str(port),
        "SYNCD_CONTENT_SOURCE__MAX_CONNECTIONS": str(args.max_connections),
        "SYNCD_CONTENT_SOURCE__HEADER_TIMEOUT": f"{args.header_timeout:g}",
    })  # fmt: skip
    return env


def limit_open_files(soft: int) -> None:
    """In the restore's process, before exec: what `ulimit -n SOFT` does."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def start_syncd(args: list[str], env: dict[str, str], cwd: Path, nofile: int | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "syncd.cli", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=(lambda: limit_open_files(nofile)) if nofile else None,  # noqa: PLW1509 - the point of the benchmark
    )  # fmt: skip


async def finished(label: str, process: subprocess.Popen[bytes], started: float) -> Restore:
    out, err = await asyncio.to_thread(process.communicate)
    seconds = time.monotonic() - started
    stderr = err.decode("utf-8", "replace")
    logs = []
    for line in stderr.splitlines():
        with contextlib.suppress(ValueError):
            logs.append(json.loads(line))
    try:
        report = json.loads(out.decode("utf-8", "replace"))
    except ValueError:
        report = {}
    return Restore(label, process.returncode, seconds, report, logs, stderr)


async def restore(label: str, backup: Path, target: str, env: dict[str, str], cwd: Path, nofile: int | None = None) -> Restore:
    started = time.monotonic()
    process = start_syncd([*LOGS, "restore", str(backup), target, "--json"], env, cwd, nofile)
    return await finished(label, process, started)


async def listening(port: int, process: subprocess.Popen[bytes]) -> bool:
    """Wait until the content source answers on `port` (False: the restore ended first)."""
    while process.poll() is None:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        return True
    return False


async def slow_client(port: int, attack: Attack, reconnect: float) -> None:
    """One slow client: connect, half a header, then nothing; again when closed."""
    while not attack.stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            attack.refused += 1
            await asyncio.sleep(reconnect)
            continue
        attack.opened += 1
        attack.open_now += 1
        attack.max_open = max(attack.max_open, attack.open_now)
        try:
            writer.write(HALF_HEADER)
            read = asyncio.ensure_future(reader.read(1))
            stop = asyncio.ensure_future(attack.stop.wait())
            done, _ = await asyncio.wait({read, stop}, return_when=asyncio.FIRST_COMPLETED)
            if read in done:
                attack.closed_by_server += 1
            for task in (read, stop):
                task.cancel()
        except OSError:
            attack.closed_by_server += 1
        finally:
            attack.open_now -= 1
            writer.close()
        await asyncio.sleep(reconnect)


async def attacked_restore(args: argparse.Namespace, backup: Path, target: str, env: dict[str, str], cwd: Path, port: int) -> tuple[Restore, Attack]:
    attack = Attack()
    started = time.monotonic()
    process = start_syncd([*LOGS, "restore", str(backup), target, "--json"], env, cwd, args.nofile)
    ending = asyncio.ensure_future(finished("attacked restore", process, started))
    clients: list[asyncio.Task[None]] = []
    if await listening(port, process):
        clients = [asyncio.ensure_future(slow_client(port, attack, args.reconnect)) for _ in range(args.connections)]
        print(f"  the content source answers on port {port} after {time.monotonic() - started:.1f} s: {args.connections} slow clients started", flush=True)
    result = await ending
    attack.stop.set()
    await asyncio.gather(*clients, return_exceptions=True)
    return result, attack


def raise_own_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))
    if min(needed, hard) < needed:
        print(f"warning: this process may open {hard} files, fewer than the {needed} the attack needs", file=sys.stderr)


async def bench(args: argparse.Namespace) -> None:
    raise_own_limit(args.connections + 200)
    with tempfile.TemporaryDirectory() as tmp, emulator_process(token=TOKEN, spec=args.spec, seed=7) as emulator:
        workdir = Path(tmp)
        orgs = [str(org["id"]) for org in emulator.report["organizations"]]
        port = free_port()
        env = environment(emulator.url, workdir, args, port)
        print(f"spec: {args.spec}; emulator {emulator.url} (a process of its own); content source port {port}")
        print(f"restore: `syncd restore backup.db src:ORG`, a process of its own with RLIMIT_NOFILE {args.nofile}; "
              f"max_connections {args.max_connections}, header_timeout {args.header_timeout:g} s")  # fmt: skip
        backup = workdir / "backup.db"
        made = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "syncd.cli", "backup", f"src:{orgs[0]}", "--out", str(backup), "--with-files"],
                                       cwd=workdir, env=env, capture_output=True)  # fmt: skip
        if made.returncode != 0:
            raise SystemExit(f"backup failed: {made.stderr.decode()[-2000:]}")
        baseline = await restore("baseline restore (no attack)", backup, f"src:{orgs[-1]}", env, workdir, args.nofile)
        print(f"  {baseline.line()}", flush=True)
        attacked, attack = await attacked_restore(args, backup, f"src:{orgs[-2]}", env, workdir, port)
    stopped = attacked.event("content.stopped")
    emfile = sum(1 for line in attacked.stderr.splitlines() if "Too many open files" in line)
    tracebacks = attacked.stderr.count("Traceback")
    max_open = int(stopped.get("max_open", -1))
    print()
    print(f"restore outcome            {attacked.line()} (target: exit 0, equal)")
    print(f"  baseline                 {baseline.line()}")
    print(f"server: max open           {max_open} (target <= {args.max_connections}: {'ok' if 0 <= max_open <= args.max_connections else 'MISSED'})")
    print(f"server: closed at the cap  {stopped.get('rejected', '?')}")
    print(f"server: header timed out   {stopped.get('timed_out', '?')}")
    print(f"server: requests served    {stopped.get('requests', '?')}")
    print(f"slow clients: opened       {attack.opened} (at most {attack.max_open} open at once from this side), "
          f"seen closed by the server {attack.closed_by_server}, refused {attack.refused}")  # fmt: skip
    print(f"restore stderr             {emfile} 'Too many open files' lines, {tracebacks} tracebacks (target: 0, 0)")
    failed = [item.get("reason", "") for round_ in attacked.report.get("rounds") or [] for item in (round_.get("apply") or {}).get("failed") or []]
    for reason in failed[:5]:
        print(f"  an operation failed (the next round does it again): {reason[:300]}")
    if attacked.code != 0 or not attacked.equal:
        print("--- restore stderr (end)")
        print(attacked.stderr[-3000:])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1100, help="slow clients")
    parser.add_argument("--nofile", type=int, default=1024, help="RLIMIT_NOFILE soft limit of the restore")
    parser.add_argument("--max-connections", type=int, default=128, help="content_source.max_connections")
    parser.add_argument("--header-timeout", type=float, default=5.0, help="content_source.header_timeout, seconds")
    parser.add_argument("--reconnect", type=float, default=0.2, help="seconds a slow client waits before connecting again")
    parser.add_argument("--spec", default=SPEC, help="what the emulator generates")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run_benchmark(bench, parse_args(argv))


if __name__ == "__main__":
    main()
