"""Benchmark of copying an organization: prints figures and ratios, asserts nothing about time.

Target from the write-side issue, on a generated organization of at least 2,000 objects
served by the emulator with 20 ms latency and a rate limit R (per token):
  (a) apply wall time / (writes / R)                  <= 1.2
  (b) write calls of a second prepare + plan + apply  == 0

The emulator runs in a process of its own. By default the source is read with the owner
token of organization 1 and the target (an empty organization 2) is written with the owner
token of organization 2: two tokens, no organization visible to both, so space content is
copied through `content/import`. `--same-token` gives both tenants one token that sees both
organizations (content by duplicate + transfer, and source and target share one bucket).

Phases, each with its own figures: (1) prepare = read both sides into a fresh state file,
(2) plan, (3) apply (the library calls the CLI uses; the clients are built here, as in
`syncd.mirroring.apply_between`, so their counters can be printed), (4) re-read and verify,
(5) a second prepare + plan + apply, whose write calls are counted by the emulator.

Besides ratio (a) it prints what bounds the apply's wall time: the longest dependency chain
of the plan, list-scheduling simulations of the plan's graph (the emulator's token bucket,
the same slots, a measured round trip; FIFO as apply does, and critical-path-first), the
calls in flight, the time in the state file's journal and the pacer's holds.
`--shared-pacer` (with `--same-token`) is an experiment: one pacer for both clients.

Default run (~85 s): 12,808 source objects, 655 writes, (a) ~0.87 (1.02 without the
bucket's first 100 free writes). At 100 ms latency (a) is missed (~1.8): 8 slots carry
~78 writes/s, and 60 root-level spaces are created one after another (a 70-op chain).

Run: /tmp/venv/bin/python bench/mirror.py [--rate 100] [--spec ...] [--same-token]
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
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

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _util import (
    emulator_stats,
    peak_rss_mb,
    reset_emulator_stats,
    run_benchmark,
    target,
)

from syncd.api import TenantClient, make_global_limiter
from syncd.api.client import ApiResponse
from syncd.config import Settings, TargetRef, load_settings
from syncd.emulator.process import EmulatorProcess, emulator_process
from syncd.mirror import Mirror
from syncd.mirroring import Prepared, plan_between, prepare, verify_prepared
from syncd.replay.apply import ApplyResult, apply_plan, dependencies
from syncd.replay.ops import ACTIONS, Plan
from syncd.replay.rules import COPIED_KINDS
from syncd.replay.verify import render

DEFAULT_SPEC = (
    "orgs=1,empty_orgs=1,collections=20,spaces=200,pages=8,files=1,sites=6,sections=4,members=5,teams=5,"
    "saml=1,openapi=2,translations=1,custom_fields=4,comments=1,change_requests=1,integrations=1"
)
ALL_TOKEN = "bench-token"
"""Sees every organization (--same-token); org N's owner token is `org<N>-token`."""
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


# -- an instrumented client: in-flight calls over time, round trips ------------------------


@dataclass
class Flight:
    """Calls of one client over time: how many were in flight, how long each took."""

    started: float = field(default_factory=time.perf_counter)
    in_flight: int = 0
    peak: int = 0
    area: float = 0.0
    """Integral of in-flight calls over time (call-seconds)."""
    busy: float = 0.0
    """Seconds with at least one call in flight."""
    last: float = field(default_factory=time.perf_counter)
    durations: dict[str, list[float]] = field(default_factory=dict)

    def _tick(self) -> float:
        now = time.perf_counter()
        self.area += self.in_flight * (now - self.last)
        if self.in_flight:
            self.busy += now - self.last
        self.last = now
        return now

    def enter(self) -> float:
        now = self._tick()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        return now

    def leave(self, method: str, since: float) -> None:
        now = self._tick()
        self.in_flight -= 1
        self.durations.setdefault(method, []).append(now - since)

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def mean_in_flight(self, wall: float) -> float:
        self._tick()
        return self.area / wall if wall else 0.0


class CountingClient(TenantClient):
    """TenantClient that measures its calls (with retries and pacing: what an op waits)."""

    flight: Flight

    async def request(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
        since = self.flight.enter()
        try:
            return await super().request(method, path, **kwargs)
        finally:
            self.flight.leave(method.upper(), since)


def counting_client(settings: Settings, tenant: str, limiter: anyio.CapacityLimiter, **options: Any) -> CountingClient:
    config = settings.tenant(tenant)
    client = CountingClient(
        config.name, config.base_url, config.resolved_token(), concurrency=config.concurrency, global_limiter=limiter,
        timeout=settings.request_timeout, retry=settings.retry, **options,
    )
    client.flight = Flight()
    return client


@dataclass
class JournalTimes:
    """Time apply spends in the state file's journal calls (in worker threads, one lock)."""

    calls: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)


@contextlib.contextmanager
def timed_journal() -> Iterator[JournalTimes]:
    """Wrap the journal functions apply calls (it looks them up on the module at each call)."""
    from syncd.mirror import replication

    times = JournalTimes()
    names = ("intend", "complete", "fail", "resend", "record_mappings", "seen_before")
    originals = {name: getattr(replication, name) for name in names}

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                times.calls[name] += 1
                times.seconds[name] += time.perf_counter() - started

        return timed

    for name, fn in originals.items():
        setattr(replication, name, wrap(name, fn))
    try:
        yield times
    finally:
        for name, fn in originals.items():
            setattr(replication, name, fn)


# -- settings --------------------------------------------------------------------------------


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


# -- the emulator's counters -------------------------------------------------------------------


@dataclass
class ServerCounts:
    total: int
    writes: int
    status_429: int
    by_route: Counter[str]

    @classmethod
    def of(cls, stats: dict[str, Any]) -> ServerCounts:
        routes: Counter[str] = Counter()
        for row in stats["routes"]:
            routes[f"{row['method']} {row['route']} {row['status']}"] += int(row["count"])
        writes = sum(int(r["count"]) for r in stats["routes"] if r["method"] in WRITE_METHODS)
        return cls(int(stats["total"]), writes, int(stats["by_status"].get("429", 0)), routes)

    def writes_by_route(self) -> list[tuple[str, int]]:
        return [(route, n) for route, n in self.by_route.most_common() if route.split(" ", 1)[0] in WRITE_METHODS]


# -- the phases ------------------------------------------------------------------------------


@dataclass
class PrepareRun:
    prepared: Prepared
    wall: float
    server: ServerCounts


async def run_prepare(settings: Settings, src: TargetRef, dst: TargetRef, db: Path, url: str) -> PrepareRun:
    await reset_emulator_stats(url)
    started = time.perf_counter()
    prepared = await prepare(settings, src, dst, db)
    wall = time.perf_counter() - started
    return PrepareRun(prepared, wall, ServerCounts.of(await emulator_stats(url)))


@dataclass
class ApplyRun:
    result: ApplyResult
    wall: float
    cpu: float
    server_cpu: float | None
    server: ServerCounts
    target: CountingClient
    source: CountingClient
    timeline: list[tuple[float, int, int]]
    """(seconds since start, ops finished, writes sent) after each op."""
    journal: JournalTimes


async def run_apply(
    settings: Settings, prepared: Prepared, the_plan: Plan, db: Path, emulator: EmulatorProcess, *, shared_pacer: bool = False
) -> ApplyRun:
    """`syncd.mirroring.apply_between`, with clients whose counters stay readable.
    `shared_pacer`: the source client paces with the target's pacer (one token, one bucket)."""
    url = emulator.url
    await reset_emulator_stats(url)
    limiter = make_global_limiter(settings)
    target_client = counting_client(settings, "dst", limiter)
    source_client = counting_client(settings, "src", limiter, **({"pacer": target_client.pacer} if shared_pacer else {}))
    source_client.flight = target_client.flight  # one record of calls in flight: idle means neither client calls
    timeline: list[tuple[float, int, int]] = []
    server_started = emulator.cpu_seconds()
    cpu_started = _cpu()
    started = time.perf_counter()

    def progress(p: Any) -> None:
        timeline.append((time.perf_counter() - started, p.done, p.writes))

    with Mirror(db) as mirror, timed_journal() as journal_times:
        async with target_client, source_client:
            target_client.flight.reset()
            result = await apply_plan(
                the_plan,
                target=target_client,
                source=source_client,
                mirror=mirror,
                source_tenant=prepared.source.tenant,
                source_org=prepared.source.org,
                target_tenant=prepared.target.tenant,
                target_org=prepared.target.org,
                concurrency=settings.tenant("dst").concurrency,
                on_progress=progress,
            )
    wall = time.perf_counter() - started
    cpu = _cpu() - cpu_started
    server_now = emulator.cpu_seconds()
    server_cpu = None if server_now is None or server_started is None else server_now - server_started
    server = ServerCounts.of(await emulator_stats(url))
    return ApplyRun(result, wall, cpu, server_cpu, server, target_client, source_client, timeline, journal_times)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- what bounds the apply: the plan's graph ---------------------------------------------------


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
    simulated: dict[str, float]
    """List-scheduling time of the graph under named policies (see `_simulate`)."""
    round_trip: float


def graph_bounds(the_plan: Plan, concurrency: int, rate: float, burst: float, round_trip: float) -> GraphBounds:
    """The plan's dependency graph as apply sees it, and how long it takes to schedule."""
    deps, _ = dependencies(the_plan)
    order = [op.key for op in the_plan.ops]
    by_key = {op.key: op for op in the_plan.ops}
    costly = {op.key: op.action != "adopt" for op in the_plan.ops}
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
    plan_rank = {k: i for i, k in enumerate(order)}
    critical_rank = {k: (-below[k], plan_rank[k]) for k in order}
    simulate = lambda rank, slots: _simulate(order, deps, followers, costly, rank, slots, rate, burst, round_trip)
    return GraphBounds(
        ops=len(order),
        edges=sum(len(v) for v in deps.values()),
        depth=max(level.values(), default=0),
        chain=chain,
        widths=[widths[i] for i in range(1, max(widths, default=0) + 1)],
        simulated={
            f"first ready, first served, {concurrency} slots (as apply runs)": simulate(None, concurrency),
            f"plan order first, {concurrency} slots": simulate(plan_rank, concurrency),
            f"longest remaining chain first, {concurrency} slots": simulate(critical_rank, concurrency),
            f"first ready, first served, {2 * concurrency} slots": simulate(None, 2 * concurrency),
            f"longest remaining chain first, {2 * concurrency} slots": simulate(critical_rank, 2 * concurrency),
            "no slot or rate limit (the longest chain alone)": _simulate(order, deps, followers, costly, plan_rank, 1 << 30, 0.0, 0.0, round_trip),
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
    order: list[str], deps: dict[str, list[str]], followers: dict[str, list[str]], costly: dict[str, bool],
    rank: dict[str, Any] | None, concurrency: int, rate: float, burst: float, round_trip: float,
) -> float:
    """Event simulation: an op starts when its dependencies are done, a slot is free and (with
    a rate) the server's token bucket (`burst` tokens, refilled at `rate`) holds a token;
    among ready ops the lowest `rank` goes first. Apply's CapacityLimiter is first come, first served, and its tasks are
    started in plan order and wait for their dependencies first, so it serves ready ops in the
    order they became ready: `rank` None models that (ties in plan order)."""
    plan_rank = {k: i for i, k in enumerate(order)}
    key_of: Callable[[str, float], Any] = (lambda k, t: (t, plan_rank[k])) if rank is None else (lambda k, t: rank[k])
    waiting = {key: len(deps[key]) for key in order}
    ready: list[tuple[Any, str]] = [(key_of(k, 0.0), k) for k in order if not waiting[k]]
    heapq.heapify(ready)
    running: list[tuple[float, str]] = []
    now, free = 0.0, concurrency
    interval = 1.0 / rate if rate > 0 else 0.0
    tolerance = (max(1.0, burst) - 1.0) * interval
    tat = 0.0  # the bucket as GCRA: theoretical arrival time of the next request
    finished = 0
    while finished < len(order):
        while ready and free:
            _, key = heapq.heappop(ready)
            free -= 1
            if costly[key]:
                start = max(now, tat - tolerance)
                tat = max(tat, start) + interval
                heapq.heappush(running, (start + round_trip, key))
            else:
                heapq.heappush(running, (now, key))
        end, key = heapq.heappop(running)
        now = max(now, end)
        free += 1
        finished += 1
        for f in followers[key]:
            waiting[f] -= 1
            if not waiting[f]:
                heapq.heappush(ready, (key_of(f, now), f))
    return now


# -- printing --------------------------------------------------------------------------------


def print_counts(title: str, counts: Counter[str] | dict[str, int], limit: int = 40) -> None:
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{k} {n:,}" for k, n in items[:limit])
    more = f", ... {len(items) - limit} more" if len(items) > limit else ""
    print(f"{title}{shown}{more}")


def report_prepare(label: str, run: PrepareRun) -> None:
    p = run.prepared
    statuses = ", ".join(f"{side.label} {side.crawl.status if side.crawl else 'file'}" for side in (p.source, p.target))
    print(f"{label}: wall {run.wall:.2f} s; requests: source {p.source.requests:,}, target {p.target.requests:,} "
          f"(emulator {run.server.total:,}, 429s {run.server.status_429}); reads {statuses}")
    for warning in p.warnings:
        print(f"  warning: {warning}")


def report_plan(the_plan: Plan, wall: float) -> None:
    actions: Counter[str] = Counter(op.action for op in the_plan.ops)
    print(f"plan: {len(the_plan.ops):,} ops in {wall:.2f} s, by action: "
          + ", ".join(f"{a} {actions[a]:,}" for a in ACTIONS if actions[a]))
    by_kind = {f"{kind}:{action}": n for kind, c in the_plan.counts().items() for action, n in c.items()}
    print_counts("  by kind: ", by_kind)
    by_call: Counter[str] = Counter(f"{op.method.upper()} {_shape(op.path)}" for op in the_plan.ops if op.action != "adopt")
    print_counts("  by call: ", by_call, 25)
    if the_plan.skips:
        reasons = Counter(s.kind + ": " + _QUOTED.sub("'…'", s.reason) for s in the_plan.skips)
        print(f"  skips: {len(the_plan.skips)}")
        for reason, n in reasons.most_common(12):
            print(f"    {n:>4} x {reason[:200]}")
    if the_plan.refused:
        print(f"  REFUSED: {the_plan.refused}")


_QUOTED = re.compile(r"'[^']*'")


def content_skipped(the_plan: Plan) -> set[str]:
    """Source ids of spaces whose content the plan says it cannot copy."""
    return {s.source_id for s in the_plan.skips if s.kind == "space" and s.source_id and "content cannot be copied" in s.reason}


def _shape(path: str) -> str:
    """`/v1/spaces/{ref:space:abc}/content/import` -> `/v1/spaces/{}/content/import`."""
    return re.sub(r"\{ref:[^}]*\}|(?<=/)[A-Za-z0-9_-]{12,}(?=/|$)", "{}", path)


def report_apply(run: ApplyRun, rate: float, burst: float, concurrency: int, bounds: GraphBounds | None) -> float | None:
    r = run.result
    stats = r.stats()
    t, s = run.target.stats, run.source.stats
    print(f"apply: {r.summary(limit=15)}")
    print("  outcomes     " + ", ".join(f"{k} {v}" for k, v in stats.items() if k not in ("ops", "writes", "reads", "reconciled")))
    print(f"  writes       {r.writes:,} (ApplyResult.writes)  {run.server.writes:,} (emulator: POST/PUT/PATCH/DELETE answered)")
    print(f"  reads        {r.reads} reconciliation pages (ApplyResult.reads); "
          f"client GETs {len(run.target.flight.durations.get('GET', []))}")
    print(f"  requests     target client {t.requests:,}, source client {s.requests:,}, emulator {run.server.total:,}")
    print(f"  429s         {t.rate_limited + s.rate_limited} (clients)  {run.server.status_429} (emulator)")
    print(f"  retries      {t.retries + s.retries}  transport errors {t.transport_errors + s.transport_errors}")
    print(f"  wall time    {run.wall:.2f} s  ({r.writes / run.wall:.1f} writes/s)")
    server_cpu = "" if run.server_cpu is None else f", emulator {run.server_cpu:.1f} s ({run.server_cpu / run.wall:.0%})"
    print(f"  CPU          syncd {run.cpu:.1f} s ({run.cpu / run.wall:.0%} of a core){server_cpu}")
    flight = run.target.flight  # shared by both clients
    print(f"  concurrency  limit {concurrency}; calls in flight (both clients): mean {flight.mean_in_flight(run.wall):.2f}, peak {flight.peak}; "
          f"no call in flight for {max(0.0, run.wall - flight.busy):.2f} s of the wall")
    for method, durations in sorted(flight.durations.items()):
        ds = sorted(durations)
        print(f"  call time    {method:<6} n={len(ds):>5}  median {1000 * ds[len(ds) // 2]:.0f} ms  "
              f"p90 {1000 * ds[int(len(ds) * 0.9)]:.0f} ms  max {1000 * ds[-1]:.0f} ms")
    j = run.journal
    print(f"  journal      {sum(j.calls.values()):,} state-file calls, {sum(j.seconds.values()):.2f} s inside them (serialised by one lock): "
          + ", ".join(f"{name} {j.calls[name]} / {j.seconds[name]:.2f} s" for name in j.calls))
    print(f"  paced        held back by the pacer {t.paced_waits + s.paced_waits} times, {t.paced_seconds + s.paced_seconds:.1f} s in total; "
          f"server rate estimate {t.server_rate}")
    for route, n in run.server.writes_by_route()[:12]:
        print(f"    {n:>5}  {route}")
    _report_timeline(run)
    if bounds is not None:
        print(f"  plan graph   {bounds.ops:,} ops, {bounds.edges:,} dependencies; ops per level: {bounds.widths[:12]}{' ...' if len(bounds.widths) > 12 else ''}")
        print(f"  longest chain {bounds.depth} ops: " + ", ".join(f"{k} {n}" for k, n in bounds.chain.most_common()))
        print(f"  simulated    schedules of this graph with a bucket of {burst:g} refilled at R = {rate:g}/s and a round trip of {1000 * bounds.round_trip:.0f} ms (p10 of the write calls):")
        for policy, seconds in bounds.simulated.items():
            print(f"      {seconds:6.2f} s  {policy}")
    if rate <= 0:
        print("  (a) n/a: the emulator has no rate limit")
        return None
    if not r.writes:
        print("  (a) n/a: no writes")
        return None
    lower = r.writes / rate
    ratio = run.wall / lower
    print(f"  lower bound  writes / R = {lower:.2f} s")
    print(f"  (a) wall / (writes / R) = {ratio:.3f} {target(ratio, 1.2)}")
    if r.writes > burst:
        tight = (r.writes - burst) / rate
        print(f"      (with the first {burst:g} writes free from the full bucket: {tight:.2f} s, ratio {run.wall / tight:.3f})")
    return ratio


def _report_timeline(run: ApplyRun) -> None:
    """When the writes happened: a slow tail means a dependency chain, a flat start a slow start."""
    if not run.timeline or not run.result.writes:
        return
    total = run.result.writes
    marks = []
    for share in (0.25, 0.5, 0.75, 0.9, 1.0):
        at = next((t for t, _, w in run.timeline if w >= share * total), run.timeline[-1][0])
        marks.append(f"{share:.0%} at {at:.1f} s")
    print(f"  writes done  {', '.join(marks)}; last op finished at {run.timeline[-1][0]:.1f} s")
    steps = max(1, int(run.wall))
    writes_at: list[int] = []
    previous = 0
    for second in range(steps + 1):
        upto = [w for t, _, w in run.timeline if int(t) <= second]
        current = upto[-1] if upto else 0
        writes_at.append(current - previous)
        previous = current
    if len(writes_at) <= 80:
        print(f"  writes/s     {writes_at}")
    else:
        print(f"  writes/s     first 40 s {writes_at[:40]} ... last 20 s {writes_at[-20:]}")


def report_verify(run: PrepareRun, skipped: set[str]) -> tuple[bool, int]:
    """Print the verification; (equal, differences the plan did not announce as skips).

    A space whose pages/files differ and whose content the plan reported it cannot copy
    (a private space, two tokens) is an announced difference, counted apart."""
    verification = verify_prepared(run.prepared)
    counts = verification.counts()
    if verification.equal:
        print(f"verify: EQUAL ({counts['identical']:,} objects identical)")
        return True, 0
    announced = [e for e in verification.different if e.source_id in skipped and set(e.fields) <= {"pages", "files"}]
    unexplained = len(verification.missing) + len(verification.extra) + len(verification.errors) + len(verification.different) - len(announced)
    print(f"verify: NOT EQUAL {counts}")
    print(f"  {len(announced)} of the differences are spaces whose content the plan reported it cannot copy (skips); "
          f"{unexplained} differences unexplained")
    if unexplained:
        rest = replace(verification, different=[e for e in verification.different if e not in announced], identical=[])
        for line in render(rest, limit=40):
            print(f"  {line}")
    return False, unexplained


# -- the run ---------------------------------------------------------------------------------


async def bench(args: argparse.Namespace) -> None:
    burst = args.burst or args.rate
    mode = "one token for both (duplicate + transfer)" if args.same_token else "two tokens (org1-token -> org2-token, content by import)"
    print(f"spec: {args.spec}  seed: {args.seed}")
    print(f"emulator: rate limit R = {args.rate:g} req/s per token, burst {burst:g}, latency {args.latency_ms:g} ms (separate process)")
    print(f"tenants: {mode}{'; the source client shares the target client pacer (experiment)' if args.shared_pacer else ''}")
    started = time.perf_counter()
    with emulator_process(
        token=ALL_TOKEN, spec=args.spec, seed=args.seed, rate=args.rate, burst=args.burst, latency_ms=args.latency_ms
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

        # (1) prepare
        print()
        first = await run_prepare(settings, src, dst, db, emulator.url)
        source_kinds = Counter(kind for kind, _ in first.prepared.source.snapshot.nodes)
        objects = sum(source_kinds.values())
        copied = sum(n for kind, n in source_kinds.items() if kind in COPIED_KINDS or kind in ("page", "file"))
        print(f"source objects: {objects:,} ({'>= 2,000' if objects >= 2000 else 'FEWER than 2,000'}) in {len(source_kinds)} kinds, "
              f"{copied:,} of kinds a copy writes or compares (incl. pages and files); target objects before: {len(first.prepared.target.snapshot.nodes):,}")
        print_counts("  ", source_kinds)
        report_prepare("(1) prepare", first)
        rss_prepare = peak_rss_mb()

        # (2) plan
        t0 = time.perf_counter()
        the_plan = plan_between(first.prepared, "copy", args.max_delete)
        report_plan(the_plan, time.perf_counter() - t0)

        # (3) apply
        print()
        ratio: float | None = None
        run: ApplyRun | None = None
        if the_plan.refused:
            print("(3) apply: not run, the plan is refused")
        else:
            try:
                run = await run_apply(settings, first.prepared, the_plan, db, emulator, shared_pacer=args.shared_pacer)
            except Exception as exc:  # noqa: BLE001 - a benchmark reports, it does not stop
                print(f"(3) apply FAILED: {type(exc).__name__}: {exc}")
        rss_apply = peak_rss_mb()
        if run is not None:
            durations = run.target.flight.durations
            writes = sorted(d for m, ds in durations.items() if m in WRITE_METHODS for d in ds)
            round_trip = writes[len(writes) // 10] if writes else args.latency_ms / 1000  # p10: a call the pacer did not hold
            try:
                bounds: GraphBounds | None = graph_bounds(the_plan, concurrency, args.rate, burst, round_trip)
            except ValueError as exc:
                print(f"  plan graph: {exc}")
                bounds = None
            print("(3) apply")
            ratio = report_apply(run, args.rate, burst, concurrency, bounds)

        # (4) verify after re-reading
        print()
        prepare_wall, skipped = first.wall, content_skipped(the_plan)
        del first  # its snapshots are no longer needed (peak RSS)
        again = await run_prepare(settings, src, dst, db, emulator.url)
        report_prepare("(4) re-read", again)
        rss_reread = peak_rss_mb()
        equal, unexplained = report_verify(again, skipped)

        # (5) second prepare + plan + apply
        print()
        second_writes: int | None = None
        reread_wall = again.wall
        del again  # as above: one read of both sides in memory at a time
        await reset_emulator_stats(emulator.url)
        t0 = time.perf_counter()
        second = await run_prepare(settings, src, dst, db, emulator.url)
        second_plan = plan_between(second.prepared, "copy", args.max_delete)
        print(f"(5) second run: prepare {second.wall:.2f} s ({second.server.total:,} requests), plan {len(second_plan.ops)} ops "
              + (", ".join(f"{op.key}" for op in second_plan.ops[:10]) + (" ..." if len(second_plan.ops) > 10 else "")))
        if second_plan.ops and not second_plan.refused:
            try:
                second_run = await run_apply(settings, second.prepared, second_plan, db, emulator)
                second_writes = second_run.server.writes
                print(f"  apply: {second_run.result.summary(limit=10)}")
                for route, n in second_run.server.writes_by_route()[:10]:
                    print(f"    {n:>5}  {route}")
            except Exception as exc:  # noqa: BLE001 - reported, not raised
                print(f"  apply FAILED: {type(exc).__name__}: {exc}")
        else:
            second_writes = ServerCounts.of(await emulator_stats(emulator.url)).writes
        print(f"  write calls of the second run: {second_writes} (emulator) in {time.perf_counter() - t0:.2f} s "
              f"{'(target == 0)' if second_writes == 0 else '(target == 0: MISSED)'}")

    rss = max(rss_apply, peak_rss_mb())
    print()
    print(f"source objects                 {objects:,} ({copied:,} copied: structure, pages, files)")
    if run is not None:
        r = run.result
        t, s = run.target.stats, run.source.stats
        print(f"apply writes / reads / 429s    {r.writes:,} / {r.reads} reconciliation pages, {t.requests + s.requests - r.writes} client requests other than writes / "
              f"{run.server.status_429} (emulator), {t.rate_limited + s.rate_limited} (clients)")
        print(f"apply wall time                {run.wall:.2f} s (prepare {prepare_wall:.2f} s, re-read {reread_wall:.2f} s)")
    print(f"(a) wall / (writes / R)        {'n/a' if ratio is None else f'{ratio:.3f} {target(ratio, 1.2)}'}")
    print(f"verify                         {'equal' if equal else f'NOT EQUAL ({unexplained} differences beyond the skips the plan announced)'}")
    print(f"(b) second run write calls     {second_writes} {'(target == 0)' if second_writes == 0 else '(target == 0: MISSED)'}")
    print(f"peak RSS                       {rss:.0f} MB (after the first prepare {rss_prepare:.0f} MB, after apply {rss_apply:.0f} MB, "
          f"after the re-read {rss_reread:.0f} MB)")
    print(f"benchmark total {time.perf_counter() - started:.0f} s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="the emulator's rate limit R (requests/s per token)")
    parser.add_argument("--burst", type=float, default=0.0, help="the bucket size (default: R, one second's worth)")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="latency the emulator adds to every request")
    parser.add_argument("--spec", default=DEFAULT_SPEC, help="what the emulator generates (needs empty_orgs >= 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--same-token", action="store_true", help="one token for both tenants (duplicate + transfer)")
    parser.add_argument("--concurrency", type=int, default=0, help="the tenants' concurrency (default: the settings' default)")
    parser.add_argument("--shared-pacer", action="store_true",
                        help="with --same-token, also share the pacer explicitly (apply_between already does)")
    parser.add_argument("--max-delete", type=int, default=10)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    run_benchmark(bench, parse_args(argv))


if __name__ == "__main__":
    main()
