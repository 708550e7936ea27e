"""Benchmark of copying an organization through `syncd.copy.copy_org`: prints figures and
ratios, asserts nothing about time.

Targets from the write-side issue, on a generated organization of at least 2,000 objects
served by the emulator with 20 ms latency and a rate limit R (per token):
  (a) apply wall time of all rounds / (writes / R)     <= 1.2
  (b) write calls of a second `copy_org`               == 0
and, besides: verify equal (nothing beyond the skips the plan announced, no residue), the
source organization's canonical dump (`/_emulator/orgs/{org}/dump`) byte-identical before
and after the copy, and peak RSS.

The emulator runs in a process of its own (`--profile default|divergent`). By default the
source is read with the owner token of organization 1 and the target (an empty organization
2) is written with the owner token of organization 2: two tokens, no organization visible to
both, so space content is copied through `content/import`. `--same-token` gives both tenants
one token that sees both organizations (content by duplicate + transfer; the two clients
then share one pacer, as `syncd.copy.sides.connect` does for any tenants of one token).
`--faults lost=0.05,5xx=0.02` sets the emulator's faults (`PUT /_emulator/faults`) for the
first copy only; they are reset before the second.

What is measured: the one call `syncd mirror apply`, `restore`, the daemon and the demo make,
`copy_org(settings, src, dst, db=...)`, on a fresh state file, then a second time on the same
state file. Its clients come from a counting factory (a `TenantClient` subclass recording
every call's start, end and method: calls in flight, round trips); `on_apply` records when
each op finished and `on_round` each round's report; the journal functions are wrapped
(time in the state file; `journal.begin`/`finish` mark each apply run, where the emulator's
`/_emulator/stats` and the clients' counters are taken, so each round's writes by route are
its own); the engine's `read_sides`/`plan_copy`/`compare` are wrapped for the
time of reads, plans and verifies. Nothing in syncd is changed.

Besides ratio (a) it prints what bounds each round's apply: the plan's longest dependency
chain and its largest serial group (creates into one listing run one at a time),
list-scheduling simulations of the plan's graph (the emulator's token bucket, the same
slots, the serial groups, a measured round trip; first ready first served as apply runs,
and critical-path first), the calls in flight, the time in the journal and the pacer's holds.

Default run (~86 s; copy_org ~82 s of it, mostly rate-bound reads: 43 s for the first read,
32 s to re-read the filled target): 12,808 source objects; one round of 475 operations, 660
writes, 29 reads, 6.5 s of apply: (a) 0.99 (1.17 without the bucket's first 100 free writes);
the second copy writes 0; verify equal (72 differences excused by skips: private spaces'
content, two tokens); source untouched; peak RSS 195 MB. `--same-token`: 347 ops, 592 writes,
(a) 1.09 (the tail is the 69 root-level creates, one at a time, each a duplicate + a transfer).
`--profile divergent`: 961 writes (a create's minimal answer is checked and patched; new
objects land first, so the tree's settle step moves about 190 items), (a) 0.95; with
`--faults lost=0.05,5xx=0.02`: 965 writes, (a) 1.31, missed: the moves of one container go
one after another, and each retry's backoff lands on that chain. A later day (the emulator's
divergent profile plays more open points by then): 1,041 writes, 820 reads, (a) 2.32, the tree's
settle step 190 moves in 8.2 s at the tail; with creates taking their turn last-first once the
run saw new objects land first (`syncd.copy.placement`): 870 writes (17 space moves), 816 reads,
(a) 2.24 over two rounds (a site section's create failed twice under the faults). The reads
bound it now: every request counts against R, and each content import reads its space's record
and pages before it imports (two reads a space, from observation, not prediction). Later
still: 879 writes, 811 reads, 17.46 s of apply, (a) 1.99 (2.24 with the first 100 writes free);
over every request the emulator received (1,735): 17.46 / 17.35 = 1.01.

Run: .venv/bin/python bench/mirror.py [--rate 100] [--spec ...] [--same-token]
         [--profile divergent] [--faults lost=0.05,5xx=0.02] [--concurrency N]
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import re
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import (
    emulator_stats,
    emulator_stats_now,
    peak_rss_mb,
    reset_emulator_stats,
    run_benchmark,
    target,
)

from syncd.api import TenantClient
from syncd.api.client import ApiResponse
from syncd.config import Settings, TargetRef, load_settings
from syncd.copy import CopyReport, RoundReport, copy_org, journal
from syncd.copy import engine as copy_engine
from syncd.copy.apply import ApplyProgress, dependencies
from syncd.copy.model import Snapshot
from syncd.copy.ops import ACTIONS, Plan
from syncd.copy.rules import COPIED_KINDS
from syncd.copy.verify import render
from syncd.emulator.faults import parse_faults
from syncd.emulator.process import EmulatorProcess, emulator_process
from syncd.state import StateStore

DEFAULT_SPEC = (
    "orgs=1,empty_orgs=1,collections=20,spaces=200,pages=8,files=1,sites=6,sections=4,members=5,teams=5,"
    "saml=1,openapi=2,translations=1,custom_fields=4,comments=1,change_requests=1,integrations=1"
)
ALL_TOKEN = "bench-token"
"""Sees every organization (--same-token); org N's owner token is `org<N>-token`."""
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


# -- instrumented clients: every call's start, end and method -------------------------------


@dataclass(frozen=True)
class Call:
    start: float
    end: float
    method: str
    client: str


class CountingClient(TenantClient):
    """TenantClient that records its calls (with retries and pacing: what an op waits)."""

    calls: list[Call]

    async def request(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
        started = time.perf_counter()
        try:
            return await super().request(method, path, **kwargs)
        finally:
            self.calls.append(Call(started, time.perf_counter(), method.upper(), self.name))


@dataclass
class Clients:
    """The client factory handed to `copy_org`: it keeps the clients and one record of calls."""

    made: list[CountingClient] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    def __call__(self, settings: Settings, tenant: str, limiter: Any, **options: Any) -> TenantClient:
        client = CountingClient.from_settings(settings, tenant, limiter, **options)
        assert isinstance(client, CountingClient)
        client.calls = self.calls
        self.made.append(client)
        return client

    def counters(self) -> ClientCounters:
        out = ClientCounters()
        for client in self.made:
            s = client.stats
            out.requests[client.name] += s.requests
            out.retries += s.retries
            out.rate_limited += s.rate_limited
            out.transport_errors += s.transport_errors
            out.paced_waits += s.paced_waits
            out.paced_seconds += s.paced_seconds
        return out


@dataclass
class ClientCounters:
    """The clients' counters (`ClientStats`) summed; requests by client name."""

    requests: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    rate_limited: int = 0
    transport_errors: int = 0
    paced_waits: int = 0
    paced_seconds: float = 0.0

    def __sub__(self, other: ClientCounters) -> ClientCounters:
        return ClientCounters(
            self.requests - other.requests, self.retries - other.retries, self.rate_limited - other.rate_limited,
            self.transport_errors - other.transport_errors, self.paced_waits - other.paced_waits, self.paced_seconds - other.paced_seconds,
        )


@dataclass
class Flight:
    """Calls in flight over a window of time (both clients together)."""

    wall: float
    mean: float
    peak: int
    idle: float
    """Seconds of the window with no call in flight."""
    durations: dict[str, list[float]]
    """Method -> durations of the calls started in the window."""


def flight(calls: list[Call], start: float, end: float) -> Flight:
    wall = max(end - start, 1e-9)
    events: list[tuple[float, int]] = []
    area = 0.0
    durations: dict[str, list[float]] = {}
    for call in calls:
        a, b = max(call.start, start), min(call.end, end)
        if b <= a:
            continue
        area += b - a
        events += [(a, 1), (b, -1)]
        if call.start >= start:
            durations.setdefault(call.method, []).append(call.end - call.start)
    events.sort()
    level = peak = 0
    idle, last = 0.0, start
    for t, step in events:
        if level == 0:
            idle += t - last
        level += step
        peak = max(peak, level)
        last = t
    idle += end - last if level == 0 else 0.0
    return Flight(wall, area / wall, peak, idle, durations)


# -- the emulator: counters, faults, dumps --------------------------------------------------------


@dataclass
class ServerCounts:
    """The emulator's request counters (`/_emulator/stats`), by (method, route, status)."""

    rows: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    @classmethod
    def of(cls, stats: dict[str, Any]) -> ServerCounts:
        rows: Counter[tuple[str, str, str]] = Counter()
        for row in stats["routes"]:
            rows[(row["method"], row["route"], str(row["status"]))] += int(row["count"])
        return cls(rows)

    def __sub__(self, other: ServerCounts) -> ServerCounts:
        return ServerCounts(self.rows - other.rows)

    @property
    def total(self) -> int:
        return sum(self.rows.values())

    @property
    def writes(self) -> int:
        """Write calls that reached the emulator, whatever it answered (429s, faults included)."""
        return sum(n for (method, _, _), n in self.rows.items() if method in WRITE_METHODS)

    @property
    def reads(self) -> int:
        return sum(n for (method, _, _), n in self.rows.items() if method not in WRITE_METHODS)

    @property
    def status_429(self) -> int:
        return sum(n for (_, _, status), n in self.rows.items() if status == "429")

    def writes_by_route(self) -> Counter[str]:
        return Counter({f"{m} {r} {s}": n for (m, r, s), n in self.rows.items() if m in WRITE_METHODS})

    def faults(self) -> Counter[str]:
        """Answers the emulator's faults made (statuses that are names, not numbers)."""
        out: Counter[str] = Counter()
        for (_, _, status), n in self.rows.items():
            if not status.isdigit():
                out[status] += n
        return out


def stats_now(url: str) -> ServerCounts:
    """The emulator's counters, synchronously: taken inside the engine's journal calls, at
    points where the event loop has nothing in flight (the emulator is another process)."""
    return ServerCounts.of(emulator_stats_now(url))


async def server_counts(url: str) -> ServerCounts:
    return ServerCounts.of(await emulator_stats(url))


async def put_faults(url: str, values: dict[str, float]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.put(url + "/_emulator/faults", json=values) as resp:
        resp.raise_for_status()
        answer: dict[str, Any] = await resp.json()
        return answer


async def org_dump(url: str, org: str) -> bytes:
    """The organization's canonical dump, as the emulator sends it (compared byte for byte)."""
    async with aiohttp.ClientSession() as session, session.get(f"{url}/_emulator/orgs/{org}/dump") as resp:
        resp.raise_for_status()
        return await resp.read()


def dump_differences(before: bytes, after: bytes, limit: int = 12) -> list[str]:
    """What changed between two dumps: rows added, removed or changed, by kind and path."""
    a, b = json.loads(before), json.loads(after)
    lines: list[str] = []
    for kind in sorted(set(a["kinds"]) | set(b["kinds"])):
        old = {row["id"]: row for row in a["kinds"].get(kind, [])}
        new = {row["id"]: row for row in b["kinds"].get(kind, [])}
        for row_id in new.keys() - old.keys():
            lines.append(f"+ {kind} {new[row_id]['path']} ({row_id})")
        for row_id in old.keys() - new.keys():
            lines.append(f"- {kind} {old[row_id]['path']} ({row_id})")
        for row_id in old.keys() & new.keys():
            if old[row_id] != new[row_id]:
                fields = sorted(k for k in set(old[row_id]["data"]) | set(new[row_id]["data"]) if old[row_id]["data"].get(k) != new[row_id]["data"].get(k))
                moved = " (path)" if old[row_id]["path"] != new[row_id]["path"] else ""
                lines.append(f"~ {kind} {old[row_id]['path']} ({row_id}){moved}: {', '.join(fields)}")
        if [r["id"] for r in a["kinds"].get(kind, [])] != [r["id"] for r in b["kinds"].get(kind, [])] and not lines:
            lines.append(f"~ {kind}: the same rows in another order")
    return lines[:limit] + ([f"... {len(lines) - limit} more"] if len(lines) > limit else [])


# -- the probe: the engine's phases, apply runs, journal time, progress -----------------------

JOURNAL_TIMED = ("intend", "complete", "fail", "resend", "record_mappings", "seen_before")
"""The journal functions the writer calls (through `journal.X`: wrapping the module attribute times them)."""


@dataclass
class Window:
    """One run of the state file's journal (`journal.begin` .. `journal.finish`): an apply
    round, or the settling of leftovers; the counters at both ends."""

    started: float
    server_before: ServerCounts
    clients_before: ClientCounters
    cpu_before: float
    server_cpu_before: float | None
    kind: str = "?"
    status: str = ""
    ended: float = 0.0
    server_after: ServerCounts = field(default_factory=ServerCounts)
    clients_after: ClientCounters = field(default_factory=ClientCounters)
    cpu_after: float = 0.0
    server_cpu_after: float | None = None

    @property
    def wall(self) -> float:
        return self.ended - self.started

    @property
    def server(self) -> ServerCounts:
        return self.server_after - self.server_before

    @property
    def clients(self) -> ClientCounters:
        return self.clients_after - self.clients_before

    @property
    def cpu(self) -> float:
        return self.cpu_after - self.cpu_before

    @property
    def server_cpu(self) -> float | None:
        if self.server_cpu_after is None or self.server_cpu_before is None:
            return None
        return self.server_cpu_after - self.server_cpu_before


@dataclass
class Probe:
    """What one `copy_org` call did, recorded through its callbacks and wrapped functions."""

    url: str
    emulator: EmulatorProcess
    clients: Clients
    windows: list[Window] = field(default_factory=list)
    journal_calls: list[tuple[str, float, float]] = field(default_factory=list)
    """(function, start, seconds) of each journal call of the writer."""
    intents: list[tuple[float, str]] = field(default_factory=list)
    """(time, journal key) of each write call the writer sent (`intend`, and `resend` again)."""
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    """(read-source | read-target | plan | verify, start, end)."""
    progress: list[tuple[float, ApplyProgress]] = field(default_factory=list)
    rounds: list[tuple[float, RoundReport]] = field(default_factory=list)
    echo: bool = True

    def on_apply(self, p: ApplyProgress) -> None:
        self.progress.append((time.perf_counter(), p))

    def on_round(self, r: RoundReport) -> None:
        self.rounds.append((time.perf_counter(), r))
        if self.echo:
            print(f"  .. {r.line()}", flush=True)

    def _open(self) -> None:
        self.windows.append(Window(time.perf_counter(), stats_now(self.url), self.clients.counters(), _cpu(), self.emulator.cpu_seconds()))

    def _close(self, status: str, stats: Any) -> None:
        w = self.windows[-1]
        w.ended, w.status = time.perf_counter(), status
        w.kind = "settle" if isinstance(stats, dict) and stats.get("settled") else "apply"
        w.server_after, w.clients_after = stats_now(self.url), self.clients.counters()
        w.cpu_after, w.server_cpu_after = _cpu(), self.emulator.cpu_seconds()

    @contextlib.contextmanager
    def installed(self) -> Iterator[Probe]:
        saved_journal = {name: getattr(journal, name) for name in (*JOURNAL_TIMED, "begin", "finish")}
        saved_engine = {name: getattr(copy_engine, name) for name in ("read_sides", "plan_copy", "compare")}

        def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    self.journal_calls.append((name, started, time.perf_counter() - started))

            return wrapper

        keys: dict[Any, str] = {}

        def intend(*args: Any, **kwargs: Any) -> Any:
            seq = saved_intend(*args, **kwargs)
            key = str(kwargs.get("key", ""))
            keys[seq] = key
            self.intents.append((time.perf_counter(), key))
            return seq

        def resend(mirror: Any, run: int, seq: Any, *rest: Any, **kwargs: Any) -> Any:
            self.intents.append((time.perf_counter(), keys.get(seq, "")))
            return saved_resend(mirror, run, seq, *rest, **kwargs)

        def begin(*args: Any, **kwargs: Any) -> Any:
            self._open()
            return saved_journal["begin"](*args, **kwargs)

        def finish(mirror: Any, run: int, status: str, stats: Any = None, *rest: Any, **kwargs: Any) -> Any:
            try:
                return saved_journal["finish"](mirror, run, status, stats, *rest, **kwargs)
            finally:
                self._close(status, stats)

        def phase(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    self.phases.append((name, started, time.perf_counter()))

            return wrapper

        def async_phase(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    self.phases.append((name, started, time.perf_counter()))

            return wrapper

        for name in JOURNAL_TIMED:
            setattr(journal, name, timed(name, saved_journal[name]))
        saved_intend, saved_resend = journal.intend, journal.resend
        journal.intend, journal.resend = intend, resend  # type: ignore[assignment]
        journal.begin, journal.finish = begin, finish  # type: ignore[assignment]
        copy_engine.read_sides = async_phase("read", saved_engine["read_sides"])  # type: ignore[assignment]
        copy_engine.plan_copy = phase("plan", saved_engine["plan_copy"])  # type: ignore[assignment]
        copy_engine.compare = phase("verify", saved_engine["compare"])  # type: ignore[assignment]
        try:
            yield self
        finally:
            for name, fn in saved_journal.items():
                setattr(journal, name, fn)
            for name, fn in saved_engine.items():
                setattr(copy_engine, name, fn)

    def applies(self) -> list[Window]:
        return [w for w in self.windows if w.kind == "apply"]

    def journal_in(self, w: Window) -> tuple[Counter[str], Counter[str]]:
        calls: Counter[str] = Counter()
        seconds: Counter[str] = Counter()
        for name, start, secs in self.journal_calls:
            if w.started <= start <= w.ended:
                calls[name] += 1
                seconds[name] += secs
        return calls, seconds

    def calls_per_op(self, w: Window, the_plan: Plan) -> Counter[str]:
        """Op key -> write calls its recipe sent in the window (journal keys are the op's
        key or start with it: `KEY:check`, `KEY:duplicate`, `KEY:<move>`)."""
        return Counter(op_of(key, the_plan) for t, key in self.intents if w.started <= t <= w.ended)

    def tail(self, w: Window, the_plan: Plan, share: float = 0.1) -> tuple[int, float, Counter[str]]:
        """The last `share` of the window's write calls: how many, since when, and what
        (kind:action of their op, and the op's serial group)."""
        times = [(t, key) for t, key in self.intents if w.started <= t <= w.ended]
        last = times[-max(1, int(len(times) * share)):] if times else []
        by_key = {op.key: op for op in the_plan.ops}
        what: Counter[str] = Counter()
        for _, key in last:
            op = by_key.get(op_of(key, the_plan))
            what[f"{op.kind}:{op.action}" + (f" (serial {op.serial!r})" if op.serial else "") if op else key] += 1
        return len(last), (w.ended - last[0][0]) if last else 0.0, what

    def op_spans(self, w: Window, the_plan: Plan) -> list[tuple[str, int, float]]:
        """(op key, write calls, seconds from its first call to its last), longest first."""
        first: dict[str, float] = {}
        last: dict[str, float] = {}
        calls: Counter[str] = Counter()
        for t, key in self.intents:
            if w.started <= t <= w.ended:
                op = op_of(key, the_plan)
                first.setdefault(op, t)
                last[op] = t
                calls[op] += 1
        return sorted(((op, calls[op], last[op] - first[op]) for op in calls), key=lambda x: -x[2])

    def timeline(self, w: Window) -> list[tuple[float, int, int]]:
        """(seconds since the window opened, ops finished, writes sent) after each op."""
        return [(t - w.started, p.done, p.writes) for t, p in self.progress if w.started <= t <= w.ended]

    def chronology(self) -> str:
        """The copy's phases in order: reads, plans, verifies, applies, settles."""
        spans = [(start, name, end - start) for name, start, end in self.phases]
        number = 0
        for w in self.windows:
            if w.kind == "apply":
                number += 1
            spans.append((w.started, f"APPLY round {number}" if w.kind == "apply" else "settle leftovers", w.wall))
        return ", ".join(f"{name} {secs:.2f} s" for _, name, secs in sorted(spans))

    def phase_seconds(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for name, start, end in self.phases:
            out[name] += end - start
        return out


def op_of(key: str, the_plan: Plan) -> str:
    """The plan op a journal key belongs to (the key itself when none does)."""
    keys = {op.key for op in the_plan.ops}
    probe = key
    while probe and probe not in keys and ":" in probe:
        probe = probe.rsplit(":", 1)[0]
    return probe if probe in keys else key


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class CopyRun:
    """One `copy_org` call: its report (None when it raised), the probe, and the totals."""

    report: CopyReport | None
    error: str | None
    probe: Probe
    wall: float
    cpu: float
    server: ServerCounts
    """The emulator's counters over the whole call."""


async def run_copy(settings: Settings, src: TargetRef, dst: TargetRef, db: Path, emulator: EmulatorProcess, max_delete: int, *, echo: bool = True) -> CopyRun:
    """`copy_org` as `syncd mirror apply` calls it, with a counting client factory."""
    clients = Clients()
    probe = Probe(emulator.url, emulator, clients, echo=echo)
    before = await server_counts(emulator.url)
    report: CopyReport | None = None
    error: str | None = None
    cpu = _cpu()
    started = time.perf_counter()
    with probe.installed():
        try:
            report = await copy_org(
                settings, src, dst, db=db, max_delete=max_delete, clients=clients, on_apply=probe.on_apply, on_round=probe.on_round,
            )
        except Exception as exc:  # noqa: BLE001 - a benchmark reports, it does not stop
            error = f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - started
    cpu = _cpu() - cpu
    return CopyRun(report, error, probe, wall, cpu, (await server_counts(emulator.url)) - before)


# -- what bounds an apply: the plan's graph -----------------------------------------------------


@dataclass
class GraphBounds:
    ops: int
    edges: int
    depth: int
    """Ops on the longest dependency chain."""
    chain: Counter[str]
    """kind:action of the ops on one longest chain."""
    widths: list[int]
    """Ops per level (level = length of the longest chain ending at the op)."""
    serial: tuple[str, int, int]
    """The largest serial group (ops that run one at a time): its key, ops and calls."""
    simulated: dict[str, float]
    """List-scheduling time of the graph under named policies (see `_simulate`)."""
    round_trip: float


def graph_bounds(the_plan: Plan, concurrency: int, rate: float, burst: float, round_trip: float, calls: Counter[str] | None = None) -> GraphBounds:
    """The plan's dependency graph as apply sees it, and how long it takes to schedule.
    An op costs the write calls it sent (`calls`, from the journal), at least one (a settle
    step reads a listing) unless it is an adoption; without `calls`, one."""
    deps = dependencies(the_plan)
    order = [op.key for op in the_plan.ops]
    by_key = {op.key: op for op in the_plan.ops}
    costly = {op.key: 0 if op.action == "adopt" else max(1, calls[op.key] if calls is not None else 1) for op in the_plan.ops}
    serial = {op.key: op.serial for op in the_plan.ops}
    followers: dict[str, list[str]] = {key: [] for key in order}
    for key, before in deps.items():
        for dep in before:
            followers[dep].append(key)
    topo = _topological(order, deps, followers)
    level: dict[str, int] = {}
    for key in topo:
        level[key] = max((level[d] for d in deps[key]), default=0) + 1
    below: dict[str, int] = {}
    """Ops on the longest chain from the op to the end of the plan (the op included)."""
    for key in reversed(topo):
        below[key] = max((below[f] for f in followers[key]), default=0) + 1
    chain: Counter[str] = Counter()
    key = max(order, key=lambda k: below[k], default=None)
    while key is not None:
        op = by_key[key]
        chain[f"{op.kind}:{op.action}"] += 1
        key = max(followers[key], key=lambda k: below[k], default=None)
    widths = Counter(level.values())
    groups = Counter(s for s in serial.values() if s)
    plan_rank = {k: i for i, k in enumerate(order)}
    critical_rank = {k: (-below[k], plan_rank[k]) for k in order}

    def simulate(rank: dict[str, Any] | None, slots: int, r: float = rate, b: float = burst) -> float:
        return _simulate(order, deps, followers, costly, serial, rank, slots, r, b, round_trip)

    return GraphBounds(
        ops=len(order),
        edges=sum(len(v) for v in deps.values()),
        depth=max(level.values(), default=0),
        chain=chain,
        widths=[widths[i] for i in range(1, max(widths, default=0) + 1)],
        serial=(groups.most_common(1)[0] + (sum(costly[k] for k in order if serial[k] == groups.most_common(1)[0][0]),)) if groups else ("", 0, 0),
        simulated={
            f"first ready, first served, {concurrency} slots (as apply runs)": simulate(None, concurrency),
            f"longest remaining chain first, {concurrency} slots": simulate(critical_rank, concurrency),
            f"first ready, first served, {2 * concurrency} slots": simulate(None, 2 * concurrency),
            f"first ready, first served, {concurrency} slots, no serial groups": _simulate(
                order, deps, followers, costly, {}, None, concurrency, rate, burst, round_trip),
            "no slot or rate limit (dependencies and serial groups alone)": simulate(plan_rank, 1 << 30, 0.0, 0.0),
        },
        round_trip=round_trip,
    )


def _topological(order: list[str], deps: dict[str, list[str]], followers: dict[str, list[str]]) -> list[str]:
    waiting = {key: len(deps[key]) for key in order}
    ready = [key for key in order if not waiting[key]]
    topo: list[str] = []
    while ready:
        key = ready.pop()
        topo.append(key)
        for f in followers[key]:
            waiting[f] -= 1
            if not waiting[f]:
                ready.append(f)
    return topo


def _simulate(
    order: list[str], deps: dict[str, list[str]], followers: dict[str, list[str]], costly: dict[str, int],
    serial: dict[str, str | None], rank: dict[str, Any] | None, concurrency: int, rate: float, burst: float, round_trip: float,
) -> float:
    """Event simulation: an op starts when its dependencies are done, no op of its serial
    group runs and a slot is free; it then sends its `costly[key]` calls one after another,
    each when (with a rate) the server's token bucket (`burst` tokens, refilled at `rate`)
    holds a token, each taking `round_trip`; among ready ops the lowest `rank` goes first.
    Apply's CapacityLimiter is first
    come, first served, and its tasks are started in plan order and wait for their
    dependencies (and serial lock) first, so it serves ready ops in the order they became
    ready: `rank` None models that (ties in plan order)."""
    plan_rank = {k: i for i, k in enumerate(order)}
    key_of: Callable[[str, float], Any] = (lambda k, t: (t, plan_rank[k])) if rank is None else (lambda k, t: rank[k])
    waiting = {key: len(deps[key]) for key in order}
    ready: list[tuple[Any, str]] = [(key_of(k, 0.0), k) for k in order if not waiting[k]]
    heapq.heapify(ready)
    running: list[tuple[float, str]] = []
    busy: set[str] = set()
    held: dict[str, list[tuple[Any, str]]] = {}
    now, free = 0.0, concurrency
    interval = 1.0 / rate if rate > 0 else 0.0
    tolerance = (max(1.0, burst) - 1.0) * interval
    tat = 0.0  # the bucket as GCRA: theoretical arrival time of the next request
    finished = 0
    while finished < len(order):
        while ready and free:
            item = heapq.heappop(ready)
            key = item[1]
            group = serial.get(key)
            if group and group in busy:
                held.setdefault(group, []).append(item)
                continue
            if group:
                busy.add(group)
            free -= 1
            at = now
            for _ in range(costly[key]):
                start = max(at, tat - tolerance) if interval else at
                tat = max(tat, start) + interval
                at = start + round_trip
            heapq.heappush(running, (at, key))
        end, key = heapq.heappop(running)
        now = max(now, end)
        free += 1
        finished += 1
        group = serial.get(key)
        if group:
            busy.discard(group)
            for item in held.pop(group, []):
                heapq.heappush(ready, item)
        for f in followers[key]:
            waiting[f] -= 1
            if not waiting[f]:
                heapq.heappush(ready, (key_of(f, now), f))
    return now


# -- printing ------------------------------------------------------------------------------------


def print_counts(title: str, counts: Counter[str] | dict[str, int], limit: int = 40) -> None:
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{k} {n:,}" for k, n in items[:limit])
    more = f", ... {len(items) - limit} more" if len(items) > limit else ""
    print(f"{title}{shown}{more}")


_QUOTED = re.compile(r"'[^']*'")


def _shape(path: str) -> str:
    """`/v1/spaces/{ref:space:abc}/content/import` -> `/v1/spaces/{}/content/import`."""
    return re.sub(r"\{ref:[^}]*\}|(?<=/)[A-Za-z0-9_-]{12,}(?=/|$)", "{}", path)


def report_plan(label: str, the_plan: Plan) -> None:
    actions: Counter[str] = Counter(op.action for op in the_plan.ops)
    print(f"{label}: {len(the_plan.ops):,} ops, by action: " + (", ".join(f"{a} {actions[a]:,}" for a in ACTIONS if actions[a]) or "none"))
    if not the_plan.ops:
        return
    by_kind = {f"{kind}:{action}": n for kind, c in the_plan.counts().items() for action, n in c.items()}
    print_counts("  by kind: ", by_kind)
    by_call: Counter[str] = Counter(f"{op.method.upper()} {_shape(op.path)}" for op in the_plan.ops if op.action not in ("adopt", "settle"))
    print_counts("  by call: ", by_call, 25)
    if the_plan.refused:
        print(f"  REFUSED: {the_plan.refused}")


def report_skips(the_plan: Plan) -> None:
    if not the_plan.skips:
        return
    reasons = Counter(s.kind + ": " + _QUOTED.sub("'…'", s.reason) for s in the_plan.skips)
    print(f"  skips: {len(the_plan.skips)}")
    for reason, n in reasons.most_common(12):
        print(f"    {n:>4} x {reason[:200]}")


def round_table(probe: Probe, report: CopyReport) -> None:
    """One line per round, then the emulator's writes by route per round."""
    windows = probe.applies()
    print(f"  {'round':>5} {'ops':>6} {'writes':>6} {'reads':>5} {'apply s':>7} {'failed':>6} {'skipped':>7}  left after it (verify)")
    for r in report.rounds:
        a = r.apply
        left = "?" if r.left is None else (", ".join(f"{v} {k}" for k, v in r.left.items() if v and k != "identical") or "nothing")
        if a is None:
            print(f"  {r.number:>5} {r.ops:>6} {'-':>6} {'-':>5} {'-':>7} {'-':>6} {'-':>7}  {left}")
        else:
            print(f"  {r.number:>5} {r.ops:>6} {a.writes:>6} {a.reads:>5} {a.seconds:>7.2f} {len(a.failed):>6} {len(a.skipped):>7}  {left}")
    if not windows:
        return
    per_round = [w.server.writes_by_route() for w in windows]
    routes = Counter[str]()
    for c in per_round:
        routes.update(c)
    if not routes:
        return
    width = max(len(route) for route in routes)
    print(f"  writes by route (emulator, during each round's apply){' ' * max(0, width - 51)} " + " ".join(f"{'r' + str(i + 1):>5}" for i in range(len(per_round))))
    for route, _ in routes.most_common():
        print(f"    {route:<{width}} " + " ".join(f"{c[route]:>5}" for c in per_round))
    print(f"    {'total':<{width}} " + " ".join(f"{w.server.writes:>5}" for w in windows))


def report_round(probe: Probe, w: Window, r: RoundReport, the_plan: Plan | None, rate: float, burst: float, concurrency: int) -> None:
    a = r.apply
    assert a is not None
    print(f"round {r.number}: {a.summary(limit=15)}")
    stats = a.stats()
    print("  outcomes     " + ", ".join(f"{k} {v}" for k, v in stats.items() if k not in ("ops", "writes", "reads")))
    server, counters = w.server, w.clients
    print(f"  writes       {a.writes:,} (ApplyResult.writes)  {server.writes:,} (emulator: POST/PUT/PATCH/DELETE received)")
    fl = flight(probe.clients.calls, w.started, w.ended)
    print(f"  reads        {a.reads} (ApplyResult.reads: listing pages and objects); client GETs {len(fl.durations.get('GET', []))}, emulator GETs {server.reads}")
    print("  requests     " + ", ".join(f"{name} client {n:,}" for name, n in sorted(counters.requests.items())) + f"; emulator {server.total:,}")
    faults = server.faults()
    print(f"  429s         {counters.rate_limited} (clients)  {server.status_429} (emulator)"
          + (f"; faults answered: {', '.join(f'{k} {n}' for k, n in faults.items())}" if faults else ""))
    print(f"  retries      {counters.retries}  transport errors {counters.transport_errors}")
    print(f"  wall time    {a.seconds:.2f} s apply_plan ({a.writes / a.seconds if a.seconds else 0:.1f} writes/s); journal run open {w.wall:.2f} s")
    server_cpu = "" if w.server_cpu is None else f", emulator {w.server_cpu:.1f} s ({w.server_cpu / w.wall:.0%})"
    print(f"  CPU          syncd {w.cpu:.1f} s ({w.cpu / w.wall:.0%} of a core){server_cpu}")
    print(f"  concurrency  limit {concurrency}; calls in flight (both clients): mean {fl.mean:.2f}, peak {fl.peak}; "
          f"no call in flight for {fl.idle:.2f} s of {fl.wall:.2f} s")
    for method, durations in sorted(fl.durations.items()):
        ds = sorted(durations)
        print(f"  call time    {method:<6} n={len(ds):>5}  median {1000 * ds[len(ds) // 2]:.0f} ms  "
              f"p90 {1000 * ds[int(len(ds) * 0.9)]:.0f} ms  max {1000 * ds[-1]:.0f} ms")
    calls, seconds = probe.journal_in(w)
    print(f"  journal      {sum(calls.values()):,} state-file calls, {sum(seconds.values()):.2f} s inside them (worker threads, one lock): "
          + ", ".join(f"{name} {calls[name]} / {seconds[name]:.2f} s" for name in calls))
    print(f"  paced        held back by the pacer {counters.paced_waits} times, {counters.paced_seconds:.1f} s in total; "
          f"server rate estimate {', '.join(str(c.stats.server_rate) for c in probe.clients.made)}")
    _report_timeline(probe, w)
    if the_plan is not None and len(the_plan.ops) > 1:
        writes = sorted(d for m, ds in fl.durations.items() if m in WRITE_METHODS for d in ds)
        round_trip = writes[len(writes) // 10] if writes else 0.02  # p10: a call the pacer did not hold
        try:
            bounds = graph_bounds(the_plan, concurrency, rate, burst, round_trip, probe.calls_per_op(w, the_plan))
        except ValueError as exc:
            print(f"  plan graph: {exc}")
            return
        print(f"  plan graph   {bounds.ops:,} ops, {bounds.edges:,} dependencies; ops per level: {bounds.widths[:12]}{' ...' if len(bounds.widths) > 12 else ''}")
        print(f"  longest chain {bounds.depth} ops: " + ", ".join(f"{k} {n}" for k, n in bounds.chain.most_common()))
        if bounds.serial[1]:
            key, ops, calls = bounds.serial
            print(f"  serial group largest: {ops} ops one at a time ({key!r}), {calls} calls: "
                  f">= {calls * bounds.round_trip:.2f} s at the p10 round trip, {calls / rate if rate else 0:.2f} s at R alone")
        print(f"  simulated    schedules of this graph, each op sending the write calls it sent (at least 1, 0 for an adoption), "
              f"a bucket of {burst:g} refilled at R = {rate:g}/s, a round trip of {1000 * bounds.round_trip:.0f} ms (p10 of the write calls):")
        for policy, secs in bounds.simulated.items():
            print(f"      {secs:6.2f} s  {policy}")
        spans = probe.op_spans(w, the_plan)
        if spans:
            print("  longest ops  (first to last write call): " + ", ".join(
                f"{key} {calls} calls in {secs:.2f} s" for key, calls, secs in spans[:4]))
        n, since, what = probe.tail(w, the_plan)
        if n:
            print(f"  tail         the last {n} write calls (10%) were sent in the last {since:.2f} s of the apply, for: "
                  + ", ".join(f"{k} {v}" for k, v in what.most_common(6)))


def _report_timeline(probe: Probe, w: Window) -> None:
    """When the write calls were sent (journal intents) and the ops finished (`on_apply`): a
    slow tail means a dependency chain or a long op, a flat start a slow start."""
    sent = [t - w.started for t, _ in probe.intents if w.started <= t <= w.ended]
    ops = probe.timeline(w)
    if not sent:
        return
    marks = ", ".join(f"{share:.0%} at {sent[max(0, int(share * len(sent)) - 1)]:.1f} s" for share in (0.25, 0.5, 0.75, 0.9, 1.0))
    print(f"  writes sent  {marks}; last op finished at {ops[-1][0] if ops else 0:.1f} s")
    per_second = Counter(int(t) for t in sent)
    writes_at = [per_second[i] for i in range(int(w.wall) + 1)]
    if len(writes_at) <= 60:
        print(f"  writes/s     {writes_at}")
    else:
        print(f"  writes/s     first 30 s {writes_at[:30]} ... last 20 s {writes_at[-20:]}")
    if ops:
        done = Counter(int(t) for t, _, _ in ops)
        finished = [done[i] for i in range(int(w.wall) + 1)]
        print(f"  ops done/s   {finished if len(finished) <= 60 else f'first 30 s {finished[:30]} ... last 20 s {finished[-20:]}'}")


def report_ratio(report: CopyReport, probe: Probe, rate: float, burst: float) -> tuple[float | None, float | None]:
    """Ratio (a) over all rounds, and with the bucket's first `burst` writes free."""
    wall, writes = report.apply_seconds, report.writes
    if rate <= 0 or not writes:
        print(f"(a) n/a: {'the emulator has no rate limit' if rate <= 0 else 'no writes'}")
        return None, None
    lower = writes / rate
    ratio = wall / lower
    print(f"(a) apply wall time of all rounds {wall:.2f} s / (writes {writes:,} / R {rate:g}) = {wall:.2f} / {lower:.2f} = {ratio:.3f} {target(ratio, 1.2)}")
    tight_ratio = None
    if writes > burst:
        tight = (writes - burst) / rate
        tight_ratio = wall / tight
        print(f"    with the first {burst:g} writes free from the full bucket: {tight:.2f} s, ratio {tight_ratio:.3f}")
    windows = probe.applies()
    if windows:
        requests = sum(w.server.total for w in windows)
        print(f"    every request the emulator received during the applies (writes, 429s, reads to settle): {requests:,}, / R = {requests / rate:.2f} s")
    return ratio, tight_ratio


def report_verify(report: CopyReport) -> int:
    """Print the verification; the differences beyond the skips the plan announced (residue included)."""
    v = report.verification
    counts = v.counts()
    beyond = counts["missing"] + counts["extra"] + counts["different"] + counts["errors"] + len(report.residue)
    excused = f"; {counts['excused']} differences excused (announced by the plan as skips)" if counts["excused"] else ""
    if report.equal:
        print(f"verify: EQUAL ({counts['identical']:,} objects identical{excused})")
    else:
        print(f"verify: NOT EQUAL {counts}, residue {len(report.residue)}{excused}")
        for line in render(replace(v, identical=[], excused=[]), limit=40):
            print(f"  {line}")
        for entry in report.residue[:10]:
            print(f"  residue: {entry.kind} {entry.title!r} ({entry.source_id}): {entry.note}")
    if not report.read_cleanly:
        print("  warning: a side could not be read completely")
    return beyond


def zero(n: int) -> str:
    return "(target == 0)" if n == 0 else "(target == 0: MISSED)"


def side_counts(db: Path, tenant: str, org: str) -> Counter[str]:
    with StateStore(db) as mirror:
        snapshot = Snapshot.from_mirror(mirror, tenant, org)
    return Counter(kind for kind, _ in snapshot.nodes)


# -- settings ------------------------------------------------------------------------------------


def bench_settings(url: str, state: Path, *, same_token: bool, concurrency: int | None) -> Settings:
    """Two tenants on the emulator: `src` (org 1's owner) and `dst` (org 2's owner), or one
    token that sees both. No config file is read (the working directory's is ignored)."""
    src_token, dst_token = (ALL_TOKEN, ALL_TOKEN) if same_token else ("org1-token", "org2-token")
    env = {
        "SYNCD_STATE_DIR": str(state),
        "SYNCD_TENANTS__SRC__BASE_URL": url,
        "SYNCD_TENANTS__SRC__TOKEN": src_token,
        "SYNCD_TENANTS__DST__BASE_URL": url,
        "SYNCD_TENANTS__DST__TOKEN": dst_token,
        "SYNCD_LOG_LEVEL": "error",
    }
    if concurrency:
        env["SYNCD_TENANTS__SRC__CONCURRENCY"] = env["SYNCD_TENANTS__DST__CONCURRENCY"] = str(concurrency)
        env["SYNCD_CONCURRENCY"] = str(max(16, 2 * concurrency))
    empty = state / "no-config.toml"
    empty.write_text("")
    return load_settings(empty, env)


# -- the run -------------------------------------------------------------------------------------


async def bench(args: argparse.Namespace) -> None:
    burst = args.burst or args.rate
    faults = parse_faults(args.faults) if args.faults else {}
    mode = "one token for both (duplicate + transfer, one pacer)" if args.same_token else "two tokens (org1-token -> org2-token, content by import)"
    print(f"spec: {args.spec}  seed: {args.seed}")
    print(f"emulator: profile {args.profile}, rate limit R = {args.rate:g} req/s per token, burst {burst:g}, latency {args.latency_ms:g} ms "
          f"(separate process); faults during the first copy: {args.faults or 'none'}")
    print(f"tenants: {mode}")
    started = time.perf_counter()
    with emulator_process(
        token=ALL_TOKEN, spec=args.spec, seed=args.seed, rate=args.rate, burst=args.burst, latency_ms=args.latency_ms, profile=args.profile,
    ) as emulator, tempfile.TemporaryDirectory(prefix="syncd-bench-mirror-") as tmp:
        print(f"emulator ready in {time.perf_counter() - started:.1f} s at {emulator.url} ({emulator.objects:,} rows in its tables)")
        orgs = [o["id"] for o in emulator.report["organizations"]]
        if len(orgs) < 2:
            print("the spec must generate an empty organization to copy into (empty_orgs=1)")
            return
        settings = bench_settings(emulator.url, Path(tmp), same_token=args.same_token, concurrency=args.concurrency)
        concurrency = settings.tenant("dst").concurrency
        print(f"syncd: tenant concurrency {concurrency}, process-wide limit {settings.concurrency}")
        src, dst = TargetRef("src", orgs[0]), TargetRef("dst", orgs[1])
        db = Path(tmp) / "state.db"
        dump_before = await org_dump(emulator.url, src.org or "")

        # (1) the copy
        print()
        print(f"(1) copy_org({src.tenant}:{src.org} -> {dst.tenant}:{dst.org}) on a fresh state file")
        if faults:
            print(f"  faults set: {faults}")
            await put_faults(emulator.url, faults)
        try:
            first = await run_copy(settings, src, dst, db, emulator, args.max_delete)
        finally:
            if faults:
                await put_faults(emulator.url, dict.fromkeys(faults, 0.0))
        rss_copy = peak_rss_mb()
        dump_after = await org_dump(emulator.url, src.org or "")
        report = first.report
        source_kinds = side_counts(db, settings.tenant("src").name, src.org or "")
        target_kinds = side_counts(db, settings.tenant("dst").name, dst.org or "")
        objects = sum(source_kinds.values())
        copied = sum(n for kind, n in source_kinds.items() if kind in COPIED_KINDS or kind in ("page", "file"))
        print(f"source objects: {objects:,} ({'>= 2,000' if objects >= 2000 else 'FEWER than 2,000'}) in {len(source_kinds)} kinds, "
              f"{copied:,} of kinds a copy writes or compares (incl. pages and files); target objects after: {sum(target_kinds.values()):,}")
        print_counts("  ", source_kinds)
        phases = first.probe.phase_seconds()
        applies = first.probe.applies()
        print(f"copy_org: {first.wall:.2f} s in all: reads {phases['read']:.2f} s (both sides, side by side when their tenants differ), "
              f"plans {phases['plan']:.2f} s, verifies {phases['verify']:.2f} s, applies {sum(w.wall for w in applies):.2f} s; "
              f"syncd CPU {first.cpu:.1f} s; emulator: {first.server.total:,} requests, {first.server.writes:,} writes, {first.server.status_429} 429s")
        print(f"  in order: {first.probe.chronology()}")
        ratio = tight_ratio = None
        equal, beyond = False, -1
        if report is None:
            print(f"(1) copy FAILED: {first.error}")
        else:
            for line in report.settled:
                print(f"  settled: {line}")
            for warning in report.warnings:
                print(f"  warning: {warning}")
            print()
            if report.plans:
                report_plan("plan of round 1", report.plans[0])
                report_skips(report.plans[0])
            print()
            print("rounds:")
            round_table(first.probe, report)
            settles = [w for w in first.probe.windows if w.kind == "settle"]
            for w in settles:
                print(f"  settling leftovers: {w.wall:.2f} s, {w.server.writes} write calls (emulator)")
            for i, (w, r) in enumerate(zip(applies, [r for r in report.rounds if r.apply is not None], strict=False)):
                print()
                the_plan = report.plans[r.number - 1] if r.number - 1 < len(report.plans) else None
                if i and the_plan is not None:
                    report_plan(f"plan of round {r.number}", the_plan)
                report_round(first.probe, w, r, the_plan, args.rate, burst, concurrency)
            print()
            ratio, tight_ratio = report_ratio(report, first.probe, args.rate, burst)
            print()
            beyond = report_verify(report)
            equal = report.equal
        untouched = dump_before == dump_after
        print(f"source untouched: {'yes' if untouched else 'NO'} (canonical dump of {src.org}, {len(dump_before):,} bytes before, {len(dump_after):,} after)")
        if not untouched:
            for line in dump_differences(dump_before, dump_after):
                print(f"  {line}")

        # (2) the second copy: nothing left to write
        print()
        print("(2) copy_org again on the same state file (no faults)")
        await reset_emulator_stats(emulator.url)
        second = await run_copy(settings, src, dst, db, emulator, args.max_delete)
        second_writes = second.server.writes
        if second.report is None:
            print(f"  copy FAILED: {second.error}")
        else:
            s = second.report
            rounds = "; ".join(r.line() for r in s.rounds) or "nothing to do"
            print(f"  {second.wall:.2f} s: {rounds}; plan {len(s.plans[0].ops) if s.plans else 0} ops; "
                  f"verify {'equal' if s.equal else 'NOT EQUAL ' + str(s.verification.counts())}; "
                  f"emulator: {second.server.total:,} requests")
            for line in s.settled:
                print(f"  settled: {line}")
            if s.plans and s.plans[0].ops:
                print("  ops: " + ", ".join(op.key for op in s.plans[0].ops[:12]) + (" ..." if len(s.plans[0].ops) > 12 else ""))
            for r in s.rounds:
                if r.apply is not None and (r.apply.failed or r.apply.skipped or r.apply.notes):
                    print("  " + r.apply.summary(limit=10).replace("\n", "\n  "))
        for route, n in second.server.writes_by_route().most_common(10):
            print(f"    {n:>5}  {route}")
        print(f"  write calls of the second run: {second_writes} (emulator) {zero(second_writes)}")
        dump_second = await org_dump(emulator.url, src.org or "")
        untouched_second = dump_second == dump_before
        if not untouched_second:
            print("  the source's dump changed during the second run:")
            for line in dump_differences(dump_after, dump_second):
                print(f"    {line}")

    rss = max(rss_copy, peak_rss_mb())
    print()
    print("summary")
    print(f"  source objects                 {objects:,} ({copied:,} of copied kinds, pages and files included)")
    if report is not None:
        print(f"  rounds                         {len(report.rounds)}: " + "; ".join(r.line().split(": ", 1)[1] for r in report.rounds))
        ops = report.rounds[0].ops if report.rounds else 0
        faults_seen = sum((w.server.faults() for w in applies), Counter())
        print(f"  apply ops / writes / reads     round 1 {ops:,} ops; {report.writes:,} writes (emulator {sum(w.server.writes for w in applies):,}), "
              f"{sum(r.apply.reads for r in report.rounds if r.apply):,} reads; "
              f"{sum(w.server.status_429 for w in applies)} 429s; failed {len(report.failed)}"
              + (f"; faults {dict(faults_seen)}" if faults_seen else ""))
        print(f"  apply wall time                {report.apply_seconds:.2f} s (copy_org {first.wall:.2f} s in all)")
    print(f"  (a) apply wall / (writes / R)  {'n/a' if ratio is None else f'{ratio:.3f} {target(ratio, 1.2)}'}"
          + ("" if tight_ratio is None else f"; {tight_ratio:.3f} with the first {burst:g} writes free"))
    print(f"  (b) second run write calls     {second_writes} {zero(second_writes)}")
    if report is not None and report.plans:
        content_skips = [skip for skip in report.plans[0].skips if {"pages", "files"} & set(skip.excuses)]
        served = sum(1 for op in report.plans[0].ops if op.recipe == "import-served")
        print(f"  content                        {served} space(s) imported from syncd's content source; "
              f"{len(content_skips)} content skip(s) {zero(len(content_skips))}")
    print(f"  verify                         {'equal' if equal else f'NOT EQUAL ({beyond} differences beyond the skips the plan announced, residue included)'}")
    print(f"  source untouched               {'yes' if untouched else 'NO'}{'' if untouched_second else ' (and changed again by the second run)'}")
    print(f"  peak RSS                       {rss:.0f} MB (after the first copy {rss_copy:.0f} MB)")
    print(f"  benchmark total                {time.perf_counter() - started:.0f} s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="the emulator's rate limit R (requests/s per token)")
    parser.add_argument("--burst", type=float, default=0.0, help="the bucket size (default: R, one second's worth)")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="latency the emulator adds to every request")
    parser.add_argument("--spec", default=DEFAULT_SPEC, help="what the emulator generates (needs empty_orgs >= 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=("default", "divergent"), default="default", help="the emulator's behaviour where the spec is silent")
    parser.add_argument("--faults", default="", help="emulator faults during the first copy, e.g. lost=0.05,5xx=0.02 (default none)")
    parser.add_argument("--same-token", action="store_true", help="one token for both tenants (duplicate + transfer)")
    parser.add_argument("--concurrency", type=int, default=0, help="the tenants' concurrency (default: the settings' default)")
    parser.add_argument("--max-delete", type=int, default=10)
    args = parser.parse_args(argv)
    if args.faults:
        try:
            parse_faults(args.faults)
        except ValueError as exc:
            parser.error(f"--faults: {exc}")
    return args


def main(argv: list[str] | None = None) -> None:
    run_benchmark(bench, parse_args(argv))


if __name__ == "__main__":
    main()
