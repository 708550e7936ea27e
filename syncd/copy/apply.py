"""Execute a Plan: every op after what it depends on, independent ones side by side.

1. Order. An op runs after the ops named in its `after` and after the ops that make the
   objects its Refs name. At most `concurrency` ops run at once; ops with the same `serial`
   (creates into one listing) take turns, in the plan's order, or last-first for a kind the
   run saw land new objects first (`syncd.copy.placement`): one at a time, or side by side
   where the names they send tell them apart (`syncd.copy.overlap`). An op whose dependency
   failed or was skipped is skipped, with the root cause as its reason. A plan with a
   repeated key or a cycle is refused before anything is sent (ValueError).
2. Each op runs its recipe (`RECIPES`): one call, or the few calls that belong together,
   sent through the run's `Writer` (journaled; lost answers settled by what appeared) and
   checked against the service's answer or listing.
3. Cancellation leaves the journal and id map consistent (state-file writes are shielded);
   what was in flight is settled by the next run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from syncd.copy.observe import Outcome, Status, outcome, run_adopt, run_call
from syncd.copy.ops import Op, Plan, consumed
from syncd.copy.sites import create_section, settle_site
from syncd.copy.content import bring_content
from syncd.copy.tree import copy_by_duplicate, settle_tree, undelete
from syncd.copy.overlap import group_names
from syncd.copy.placement import Turnstile
from syncd.copy.writer import SERIAL, Serial, Writer

__all__ = ["ApplyProgress", "ApplyResult", "RECIPES", "apply_plan", "dependencies"]

Recipe = Callable[[Op, Writer], Awaitable[Outcome]]
RECIPES: dict[str, Recipe] = {
    "call": run_call,
    "adopt": run_adopt,
    "duplicate-transfer": copy_by_duplicate,
    "import": bring_content,
    "import-served": bring_content,
    "undelete": undelete,
    "section": create_section,
    "settle-tree": settle_tree,
    "settle-site": settle_site,
}


@dataclass(frozen=True)
class ApplyProgress:
    """Counts handed to `on_progress` after each op."""

    done: int
    total: int
    writes: int
    failures: int
    reads: int


@dataclass
class ApplyResult:
    """One application's report: every op's outcome and what the calls cost."""

    total: int
    writes: int = 0
    reads: int = 0
    seconds: float = 0.0
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    reconciled: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    overlap_peaks: dict[str, int] = field(default_factory=dict)
    """Per serial group (`Op.serial`): the most of its creates that held their turn together
    (1: one after another)."""

    def of(self, *statuses: Status) -> list[Outcome]:
        return [o for o in self.outcomes.values() if o.status in statuses]

    @property
    def failed(self) -> list[Outcome]:
        return self.of("failed")

    @property
    def skipped(self) -> list[Outcome]:
        return self.of("skipped")

    @property
    def ok(self) -> bool:
        return not self.failed and not self.skipped and len(self.outcomes) == self.total

    def stats(self) -> dict[str, Any]:
        counts = Counter(o.status for o in self.outcomes.values())
        fixes = sum(o.fixes for o in self.outcomes.values())
        return {"ops": self.total, "writes": self.writes, "reads": self.reads, "fixes": fixes, "reconciled": len(self.reconciled), **counts}

    def summary(self, limit: int = 20) -> str:
        """Totals, then failures and skips with their reasons (at most `limit`) and notes."""
        counts = Counter(o.status for o in self.outcomes.values())
        head = f"applied {self.total} operations: {counts['done']} done"
        parts = [f"{counts[s]} {s.replace('-', ' ')}" for s in ("adopted", "already-done", "failed", "skipped") if counts[s]]
        fixes = sum(o.fixes for o in self.outcomes.values())
        if fixes:
            parts.append(f"{fixes} calls after checking answers and listings")
        if self.reconciled:
            parts.append(f"{len(self.reconciled)} found after a lost answer")
        lines = [", ".join([head, *parts]) + f" ({self.writes} write calls, {self.reads} reads)"]
        problems = self.failed + self.skipped
        lines += [f"  {o.status} {o.kind} {o.title or o.key}: {o.reason}" for o in problems[:limit]]
        if len(problems) > limit:
            lines.append(f"  ... and {len(problems) - limit} more")
        lines += [f"  note: {note}" for note in self.notes[:limit]]
        return "\n".join(lines)


def dependencies(plan: Plan) -> dict[str, list[str]]:
    """op key -> keys it waits for: its `after` and the makers of the objects it names.
    ValueError for a repeated key or a cycle: such a plan cannot be applied."""
    keys: set[str] = set()
    for op in plan.ops:
        if op.key in keys:
            raise ValueError(f"the plan holds two ops with the key {op.key!r}")
        keys.add(op.key)
    makers: dict[tuple[str, str], str] = {}
    for op in plan.ops:
        for made in op.products:
            makers.setdefault(made, op.key)
    deps: dict[str, list[str]] = {}
    for op in plan.ops:
        wanted = [k for k in op.after if k in keys]
        wanted += [m for ref in consumed(op) if (m := makers.get((ref.kind, ref.source_id))) is not None]
        deps[op.key] = [k for k in dict.fromkeys(wanted) if k != op.key]
    _check_acyclic(deps)
    return deps


def _followers(deps: Mapping[str, list[str]]) -> tuple[dict[str, int], dict[str, list[str]]]:
    """(per op, how many ops it waits for; per op, the ops waiting for it, in the order of
    `deps`, which is the plan's)."""
    waiting = {key: len(before) for key, before in deps.items()}
    followers: dict[str, list[str]] = {key: [] for key in deps}
    for key, before in deps.items():
        for dep in before:
            followers[dep].append(key)
    return waiting, followers


def _check_acyclic(deps: Mapping[str, list[str]]) -> None:
    waiting, followers = _followers(deps)
    ready = [key for key, n in waiting.items() if n == 0]
    while ready:
        for follower in followers[ready.pop()]:
            waiting[follower] -= 1
            if waiting[follower] == 0:
                ready.append(follower)
    stuck = sorted(key for key, n in waiting.items() if n)
    if stuck:
        raise ValueError(f"the plan's ops wait for each other in a cycle: {', '.join(stuck[:5])}")


async def apply_plan(
    plan: Plan, writer: Writer, *, concurrency: int = 8, on_progress: Callable[[ApplyProgress], Any] | None = None
) -> ApplyResult:
    """Run every op of `plan` through `writer` (see the module docstring); API failures of
    single ops are reported in the result, never raised."""
    deps = dependencies(plan)
    result = ApplyResult(total=len(plan.ops))
    limiter = anyio.CapacityLimiter(max(1, concurrency))
    serials: dict[str, Turnstile] = {}
    groups: dict[str, list[Op]] = {}
    for op in plan.ops:
        if op.serial:
            groups.setdefault(op.serial, []).append(op)
    names = {key: found for ops in groups.values() for key, found in group_names(ops).items()}
    writes_before, reads_before = writer.counts.writes, writer.counts.reads
    started = anyio.current_time()
    failures = 0

    async def run(op: Op, position: int) -> None:
        nonlocal failures
        done: Outcome | None = None
        try:
            blocker = next((result.outcomes[d] for d in deps[op.key] if not result.outcomes[d].ok), None)
            if blocker is not None:
                reason = blocker.reason if blocker.status == "skipped" else f"{blocker.key} failed: {blocker.reason}"
                done = outcome(op, "skipped", reason)
                return
            serial = None
            if op.serial:
                turnstile = serials.setdefault(op.serial, Turnstile(writer.placement, concurrency))
                serial = Serial(turnstile, position, op.kind, names.get(op.key))
            try:
                if serial is not None:  # its turn first, then a slot: a waiting op holds no slot
                    await serial.acquire()
                    SERIAL.set(serial)
                async with limiter:
                    done = await RECIPES[op.recipe](op, writer)
            finally:
                if serial is not None:
                    serial.release()
        finally:
            result.outcomes[op.key] = done or outcome(op, "failed", "interrupted")
            result.writes = writer.counts.writes - writes_before
            result.reads = writer.counts.reads - reads_before
            for follower in followers[op.key]:
                waiting[follower] -= 1
                if waiting[follower] == 0:
                    tg.start_soon(run, ops[follower], positions[follower])
            if not result.outcomes[op.key].ok:
                failures += 1
            if on_progress is not None:  # counted as ops end: a recount after each would grow as ops squared
                on_progress(ApplyProgress(len(result.outcomes), result.total, result.writes, failures, result.reads))

    # An op's task starts once what it waits for is done (not one task per op at once: a
    # plan of a large organization holds tens of thousands of ops).
    ops = {op.key: op for op in plan.ops}
    positions = {op.key: position for position, op in enumerate(plan.ops)}
    waiting, followers = _followers(deps)  # followers start in the plan's order
    async with anyio.create_task_group() as tg:
        for position, op in enumerate(plan.ops):
            if not waiting[op.key]:
                tg.start_soon(run, op, position)
    result.seconds = anyio.current_time() - started
    result.overlap_peaks = {serial: turnstile.peak for serial, turnstile in serials.items()}
    result.reconciled = list(writer.counts.reconciled)
    result.notes = list(writer.counts.notes)
    return result
