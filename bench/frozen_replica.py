"""A replica frozen mid-apply (issue 22, case 4): `kill -STOP` the replica applying a mirror job
for `--stop` seconds, then `SIGCONT`; prints figures, asserts nothing.

What it shows: the other replica takes the run over once the lease ends and finishes it within
lease + one run (the frozen one's sessions, which hold the target tenant's advisory lock, are
ended by the takeover: before, the new holder waited `lock_wait`, 600 s, and failed), and the
resumed replica sends no write after its lease ended (before, it journaled and sent new writes
13 s after losing the run).

Set-up: its own database on `--server` (dropped at the end, also after an error or Ctrl-C), an
emulator process with `--latency-ms` on every request, and two `syncd serve` replicas (lease
`--lease`) sharing a schema of it. Each replica reaches the emulator through a logging proxy of
its own (in this process), so every write the service receives is known by replica and by
arrival time (`time.monotonic()`, the clock the freeze is timed on): the service's write log.

1. One run: job `baseline` copies the source organization into an empty one, unimpeded; its
   duration (server clock) is "one run", measured again as `baseline-after` (the same into a
   third empty organization, once the frozen run is over): on a loaded machine the two differ,
   and the bound is printed for both.
2. Job `copy` copies the same source into another empty organization. Once the replica that
   claimed it has sent `--after-writes` writes, it gets SIGSTOP; `--stop` seconds later SIGCONT.
3. Figures: when the other replica took the run over and finished it (from the SIGSTOP, against
   lease + one run), the frozen replica's writes before the freeze, during it, after its lease
   ended (SIGSTOP + lease: its last heartbeat came before the freeze) and after SIGCONT (the
   acceptance: 0), what its log says about the run (and whether it holds a traceback), and
   whether the run ended equal.

Run: .venv/bin/python bench/frozen_replica.py [--lease 6] [--stop 20] [--latency-ms 60]
         [--concurrency 2] [--after-writes 20] [--spec ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from aiohttp import web
from psycopg.rows import dict_row

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP))

from bench.fleet import Replica, _interrupt, fresh_schema, own_database, start_replica, stop_replicas  # noqa: E402
from syncd.emulator.process import emulator_process  # noqa: E402

TOKEN = "bench-frozen-token"
CONTROL = "bench-frozen-control-token"
DEFAULT_SPEC = "orgs=1,empty_orgs=3,collections=3,spaces=24,pages=4,files=0,sites=1,sections=2,members=3,teams=3"
READY_TIMEOUT = 60.0
_READS = {"GET", "HEAD", "OPTIONS"}
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


# -- the service's write log: one logging proxy per replica ---------------------------------------


@dataclass
class Write:
    at: float
    replica: str
    method: str
    path: str


@dataclass
class WriteLog:
    """Proxies to the emulator, one port per replica, in a thread of their own; `writes` is
    every non-read request by arrival time."""

    upstream: str
    names: list[str]
    urls: dict[str, str] = field(default_factory=dict)
    writes: list[Write] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _stop: asyncio.Event | None = None
    _thread: threading.Thread | None = None

    def start(self) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(ready),), name="write-log", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the logging proxies did not start")

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)

    def of(self, replica: str, after: float = float("-inf"), before: float = float("inf")) -> list[Write]:
        return [w for w in list(self.writes) if w.replica == replica and after < w.at <= before]

    async def _main(self, ready: threading.Event) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        async with aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=120)) as session:
            runners = []
            for name in self.names:
                app = web.Application(client_max_size=256 * 1024 * 1024)
                app.router.add_route("*", "/{tail:.*}", self._forwarder(session, name))
                runner = web.AppRunner(app, access_log=None)
                await runner.setup()
                site = web.TCPSite(runner, "127.0.0.1", 0)
                await site.start()
                port = runner.addresses[0][1]
                self.urls[name] = f"http://127.0.0.1:{port}"
                runners.append(runner)
            ready.set()
            await self._stop.wait()
            for runner in runners:
                await runner.cleanup()

    def _forwarder(self, session: aiohttp.ClientSession, name: str) -> Any:
        async def forward(request: web.Request) -> web.StreamResponse:
            if request.method not in _READS:
                self.writes.append(Write(time.monotonic(), name, request.method, request.raw_path.split("?", 1)[0]))
            body = await request.read()
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
            async with session.request(
                request.method, self.upstream + request.raw_path, data=body or None, headers=headers, allow_redirects=False
            ) as answer:
                data = await answer.read()
                kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
                if "Content-Encoding" in answer.headers:
                    kept["Content-Encoding"] = answer.headers["Content-Encoding"]
                return web.Response(status=answer.status, body=data, headers=kept)

        return forward


# -- replicas ---------------------------------------------------------------------------------------


def write_config(folder: Path, name: str, service_url: str, state_url: str, args: argparse.Namespace, jobs: list[dict[str, str]]) -> Path:
    folder.mkdir(parents=True)
    q = json.dumps
    lines = [f"state_url = {q(state_url)}", f"state_dir = {q(str(folder / 'state'))}", 'log_level = "info"']
    for tenant in ("src", "dst"):
        lines += [f"[tenants.{tenant}]", f"base_url = {q(service_url)}", f"token = {q(TOKEN)}", f"concurrency = {args.concurrency}"]
    lines += ["[retry]", "max_attempts = 6", 'initial_wait = "0.2s"', 'max_wait = "2s"']
    lines += ["[daemon]", "port = 0", f"token = {q(CONTROL)}", 'shutdown_deadline = "5s"', 'failure_backoff = "1s"']
    lines += ["[fleet]", f"replica = {q(name)}", f'lease = "{args.lease:g}s"', 'poll = "0.5s"']
    for job in jobs:
        lines += ["[[jobs]]", *(f"{key} = {q(value)}" for key, value in job.items())]
    path = folder / "syncd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def control(replica: Replica, method: str, path: str) -> Any:
    url = json.loads((replica.state_dir / "daemon.json").read_text())["url"]
    request = urllib.request.Request(
        url + path, method=method, data=b"{}" if method == "POST" else None,
        headers={"Authorization": f"Bearer {CONTROL}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def run_row(state_url: str, run_id: int) -> dict[str, Any]:
    with psycopg.connect(state_url, autocommit=True, row_factory=dict_row) as conn:
        row = conn.execute("SELECT * FROM fleet_runs WHERE id = %s", (run_id,)).fetchone()
    assert row is not None
    return row


def wait_until(what: str, check: Any, timeout: float, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def trigger(replica: Replica, job: str) -> int:
    return int(control(replica, "POST", f"/jobs/{job}/run")["run"]["id"])


def one_run(state_url: str, replica: Replica, job: str) -> float:
    """Seconds (server clock) of one unimpeded run of `job`, copying into an empty organization."""
    run_id = trigger(replica, job)
    row = wait_until(f"the run of {job}", lambda: (r := run_row(state_url, run_id))["ended_at"] and r, 600, 0.2)
    seconds = (row["ended_at"] - row["started_at"]).total_seconds()
    print(f"one run (job {job}, {row['replica']}): {seconds:.1f} s, {row['outcome']}, "
          f"{row['summary'].get('writes')} writes, equal={row['summary'].get('equal')}", flush=True)
    return seconds


# -- the measurement --------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> None:
    with own_database(args.server) as database, emulator_process(token=TOKEN, spec=args.spec, rate=0, latency_ms=args.latency_ms) as emulator:
        state_url = fresh_schema(database, "frozen")
        source, first, second, third = (org["id"] for org in emulator.report["organizations"][:4])
        jobs = [
            {"name": "baseline", "kind": "mirror", "source": f"src:{source}", "target": f"dst:{first}"},
            {"name": "copy", "kind": "mirror", "source": f"src:{source}", "target": f"dst:{second}"},
            {"name": "baseline-after", "kind": "mirror", "source": f"src:{source}", "target": f"dst:{third}"},
        ]
        log = WriteLog(emulator.url, ["r1", "r2"])
        log.start()
        replicas: list[Replica] = []
        print(f"emulator {emulator.url}: {emulator.objects} objects, {args.latency_ms:g} ms per request; "
              f"2 replicas, lease {args.lease:g} s, tenant concurrency {args.concurrency}", flush=True)
        with tempfile.TemporaryDirectory(prefix="syncd-bench-frozen-") as tmp:
            try:
                for name in ("r1", "r2"):
                    replicas.append(start_replica(write_config(Path(tmp) / name, name, log.urls[name], state_url, args, jobs), name))
                wait_until("the replicas to start", lambda: all(r.ready() for r in replicas), READY_TIMEOUT, 0.2)
                by_name = {r.name: r for r in replicas}
                scenario(args, state_url, log, by_name)
            finally:
                for replica in replicas:  # a frozen replica cannot stop
                    if replica.process.poll() is None:
                        replica.process.send_signal(signal.SIGCONT)
                stop_replicas(replicas)
                log.close()
                if args.logs:
                    keep = Path(args.logs)
                    keep.mkdir(parents=True, exist_ok=True)
                    for replica in replicas:
                        shutil.copy(replica.state_dir.parent / "serve.log", keep / f"{replica.name}.log")


def scenario(args: argparse.Namespace, state_url: str, log: WriteLog, replicas: dict[str, Replica]) -> None:
    # 1. one run, unimpeded
    before = one_run(state_url, replicas["r1"], "baseline")

    # 2. the run that gets frozen
    started = time.monotonic()
    run_id = trigger(replicas["r1"], "copy")
    holder = wait_until("a replica to claim the copy", lambda: run_row(state_url, run_id)["replica"], 60)
    other = "r2" if holder == "r1" else "r1"
    wait_until(f"{holder} to send {args.after_writes} writes", lambda: len(log.of(holder, after=started)) >= args.after_writes, 600, 0.02)
    replicas[holder].process.send_signal(signal.SIGSTOP)
    stopped = time.monotonic()
    lease_end = stopped + args.lease  # at the latest: its last heartbeat came before the freeze
    print(f"{holder} claimed run {run_id}; SIGSTOP after {len(log.of(holder, after=started))} writes", flush=True)

    takeover = ended = None
    while time.monotonic() < stopped + args.stop:
        row = run_row(state_url, run_id)
        if takeover is None and row["attempt"] >= 2:
            takeover = time.monotonic() - stopped
        if ended is None and row["ended_at"] is not None:
            ended = time.monotonic() - stopped
        time.sleep(0.1)
    replicas[holder].process.send_signal(signal.SIGCONT)
    resumed = time.monotonic()
    print(f"SIGCONT {args.stop:g} s after the SIGSTOP", flush=True)

    row = wait_until("the copy to end", lambda: (r := run_row(state_url, run_id))["ended_at"] and r, args.lease + 3 * before + 120, 0.1)
    if takeover is None and row["attempt"] >= 2:
        takeover = time.monotonic() - stopped
    if ended is None:
        ended = time.monotonic() - stopped
    serve_log = replicas[holder].state_dir.parent / "serve.log"
    wait_until(f"{holder} to end its attempt", lambda: bool(_run_end_lines(serve_log, run_id)), 60, 0.2)
    time.sleep(args.linger)  # anything it still sends shows in the log meanwhile

    after = one_run(state_url, replicas[other], "baseline-after")
    short, long = sorted((before, after))
    late = log.of(holder, after=lease_end)
    print()
    print(f"takeover by {other}: {takeover:.1f} s after the SIGSTOP (lease {args.lease:g} s)" if takeover is not None else f"no takeover (attempt {row['attempt']})")
    print(f"run {run_id} ended {ended:.1f} s after the SIGSTOP: {row['outcome']} by {row['replica']} (attempt {row['attempt']}), "
          f"equal={row['summary'].get('equal')}; its attempt took {(row['ended_at'] - row['started_at']).total_seconds():.1f} s")
    verdict = "within both" if ended <= args.lease + short else "within the longer" if ended <= args.lease + long else "MISSED"
    print(f"bound lease + one run (one run: {before:.1f} s before, {after:.1f} s after): "
          f"{args.lease + short:.1f}-{args.lease + long:.1f} s: {verdict}")
    print(f"writes received from {holder}: {len(log.of(holder, after=started, before=stopped))} before the SIGSTOP, "
          f"{len(log.of(holder, after=stopped, before=lease_end))} between it and the lease's end, "
          f"{len(late)} after the lease ended ({len(log.of(holder, after=resumed))} after SIGCONT): "
          f"{'none, as required' if not late else 'MISSED'}")
    for write in late[:10]:
        print(f"  late write {write.at - stopped:.2f} s after the SIGSTOP: {write.method} {write.path}")
    print(f"writes received from {other} for the run after the SIGSTOP: {len(log.of(other, after=stopped, before=stopped + ended))}")
    text = serve_log.read_text(errors="replace")
    print(f"{holder}'s log on run {run_id}:")
    for line in _run_end_lines(serve_log, run_id):
        print("  " + line[:300])
    print(f"tracebacks in {holder}'s log: {text.count('Traceback')}")


def _run_end_lines(path: Path, run_id: int) -> list[str]:
    keys = ("fleet.lease_lost", "fleet.run_lost", "fleet.finish_fenced", "job.run_failed", "job.run_cancelled", "job.run_finished")
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line.strip() for line in lines if any(key in line for key in keys) and f"run={run_id}" in line]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lease", type=float, default=6.0, help="the replicas' lease (fleet.lease)")
    parser.add_argument("--stop", type=float, default=20.0, help="seconds between SIGSTOP and SIGCONT")
    parser.add_argument("--latency-ms", type=float, default=60.0, help="latency the emulator adds to every request")
    parser.add_argument("--concurrency", type=int, default=2, help="requests in flight per tenant (a slower apply)")
    parser.add_argument("--after-writes", type=int, default=20, help="writes of the copy before the SIGSTOP")
    parser.add_argument("--linger", type=float, default=5.0, help="seconds to watch for late writes once the frozen replica ended its attempt")
    parser.add_argument("--logs", default="", help="a folder to keep the replicas' logs in")
    parser.add_argument("--spec", default=DEFAULT_SPEC, help="what the emulator generates (1 source and 2 empty organizations)")
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/postgres", help="PostgreSQL to create the database on")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        measure(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
