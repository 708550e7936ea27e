"""copy_org: the one entry point of the write side (`mirror apply`, `restore`, the daemon's
mirror jobs, the demo and the benchmark all call it).

A controller loop, like Kubernetes' or `terraform plan` after a refresh:

1. settle what earlier runs of this pair left (`recover`), before anything is read;
2. read both sides (incremental syncs into the state mirror; a backup file is read as is);
3. plan from what was read (`plan_copy`); nothing to do: the copy is verified and ends;
4. apply (`apply_plan`): every write checked against the service's answer, order, paths and
   defaults settled from listings read at run time;
5. read again and go back to 3, at most `max_rounds` applies: each round is reported (ops,
   writes, what was left). The copy is equal when verify finds nothing but what the plan
   announced as skips, and nothing the copy made in the source is left there. In copy mode
   what is only on the target (the source dropped it, or the target had it of its own) is
   kept by design: it is `left_on_target`, not a difference (`verify.leave_extras`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from syncd.api import ApiError
from syncd.catalog import write_call, write_path
from syncd.config import Settings, TargetRef
from syncd.content import ContentSource, serve_content
from syncd.copy import journal
from syncd.copy.apply import ApplyProgress, ApplyResult, apply_plan
from syncd.copy.context import ContentStrategy, Mode, seg
from syncd.copy.free_memory import give_back_memory
from syncd.copy.import_bound import ImportBound
from syncd.copy.invariants import Bounds, check_ops, known_target_ids, violations_line
from syncd.copy.journal import Pair
from syncd.copy.model import IdMap, Snapshot
from syncd.copy.ops import PATH_REF, Plan, Ref
from syncd.copy.plan import plan_copy
from syncd.copy.planfile import SavedPlan, StalePlan, check_fresh, check_same, refuse_violations, restrict, sides_fingerprints
from syncd.copy.recover import UnsettledError, settle_leftovers
from syncd.copy.report import CopyReport, RoundReport
from syncd.copy.review import SYMBOLS, review
from syncd.copy.scoping import scope_sides
from syncd.copy.served import Publisher, held_blobs
from syncd.copy.sides import BackupSource, ClientFactory, Endpoints, Side, Source, connect, read_backup, read_sides, target_reads_source
from syncd.copy.verify import Entry, Verification, compare, excuse, leave_extras, residue
from syncd.copy.writer import Writer
from syncd.errors import SyncdError
from syncd.read.backup import blobs_dir
from syncd.read.blobs import BlobStore
from syncd.read.sync import Progress, StateLocation, default_db, shown_state
from syncd.scope import EVERYTHING, Scope
from syncd.selection import Dependency
from syncd.state import StateStore
from syncd.state.errors import StateBusyError

__all__ = ["CopyReport", "NotRestored", "PlanRefused", "Reading", "RoundReport", "bounds_of", "copy_org", "dry_run_lines", "fingerprints", "plan_org", "verify_org"]

MAX_ROUNDS = 3
STALE = "another run wrote the target after this one read it: read again"


class _TargetChanged(Exception):
    """The apply run found the target written by another run since its read (`_apply`)."""


class NotRestored(SyncdError):
    """A backup compared with an organization no restore of it wrote, in this state: there are
    no ids to compare through (everything would be missing and extra)."""

    exit_code = 2


class PlanRefused(SyncdError):
    """The plan must not be applied: deletes beyond the limit, or a source that looks empty."""

    exit_code = 2


GIVE_BACK_FROM = 1_000
"""Objects a reading's snapshots hold (the organization-level graphs: about 2 a space over the
source, the target and the source as read; estimated from the generator at 1,850 for a first
reading of 800 spaces, 400 for 100) from which its memory is handed back once dropped: a full
collection takes 0.6 s in a process holding millions of objects (a test session's), so a small
reading, which frees little, is left to the collector's own pace."""


@dataclass
class Reading:
    """Both sides as just read, the id map, and how content can travel."""

    pair: Pair
    source: Side
    target: Side
    idmap: IdMap
    content: ContentStrategy
    source_as_read: Snapshot
    """The source with everything in it, duplicates a copy left there included (residue)."""
    pending: int = 0
    """Calls of earlier runs with an unknown effect (a plan made without settling them)."""
    dependencies: list[Dependency] = field(default_factory=list)
    """What the source's objects in scope need outside the scope (`syncd.copy.scoping`)."""
    scope_warnings: list[str] = field(default_factory=list)
    target_writes: int = -1
    """`journal.target_writes` when the read began: an apply checks it once it holds the target."""

    @property
    def complete(self) -> bool:
        return self.source.complete and self.target.complete

    def release(self) -> bool:
        """Close what the snapshots read space content from (`syncd.copy.scoped`); opened
        again if one is read after all. Returns whether the reading was large enough for its
        memory to be worth handing back once it is dropped (`GIVE_BACK_FROM`)."""
        snapshots = (self.source.snapshot, self.target.snapshot, self.source_as_read)
        for snapshot in snapshots:
            snapshot.release()
        return sum(len(snapshot.nodes) for snapshot in snapshots) >= GIVE_BACK_FROM


def fingerprints(reading: Reading) -> dict[str, str]:
    """What each side looked like as read (a saved plan's staleness check, `planfile`)."""
    return sides_fingerprints(reading.source.snapshot, reading.target.snapshot, reading.idmap)


def saved_plan(reading: Reading, plan: Plan, source: Source, target: TargetRef, mode: str, options: dict[str, Any]) -> SavedPlan:
    """A plan with what it was made from: what `mirror plan --out` and the page's "plan now"
    save, and what `apply --plan` checks."""
    from syncd.copy.planfile import now_text

    return SavedPlan(reading.pair, str(source), str(target), mode, plan, fingerprints(reading), options, now_text())


# ----- reading ----------------------------------------------------------------------------------


async def _pair(ends: Endpoints) -> tuple[Pair, Side | None]:
    """The pair's names, and the backup's side when the source is a file (read first)."""
    if isinstance(ends.source_ref, BackupSource):
        side = await anyio.to_thread.run_sync(read_backup, ends.source_ref)
        return Pair(side.tenant, side.org, ends.target_tenant, ends.target_org), side
    source = ends.source_ref
    assert source.org is not None
    return Pair(ends.settings.tenant(source.tenant).name, source.org, ends.target_tenant, ends.target_org), None


async def _read(
    ends: Endpoints, pair: Pair, backup: Side | None, content: ContentStrategy, progress: Progress | None, full: bool, scope: Scope = EVERYTHING
) -> Reading:
    def writes() -> int:
        with StateStore(ends.db) as store:
            return journal.target_writes(store, pair)

    written = await anyio.to_thread.run_sync(writes)  # before reading: a run ending while we read counts
    source, target = await read_sides(ends, backup, progress, full)

    def load() -> tuple[IdMap, list[str], int]:
        with StateStore(ends.db) as store:
            return journal.load_idmap(store, pair), journal.made_in_source(store, pair), len(journal.open_intents(store, pair))

    idmap, made, pending = await anyio.to_thread.run_sync(load)
    leftovers = set(made) | set(idmap.of_kind("space-duplicate").values())
    as_read = source.snapshot
    source = Side(source.tenant, source.org, as_read.without("space", leftovers), source.crawl, source.label)
    scoped = scope_sides(source.snapshot, target.snapshot, idmap, scope)  # both sides cut to the scope, before any plan
    source, target = replace(source, snapshot=scoped.source), replace(target, snapshot=scoped.target)
    return Reading(pair, source, target, idmap, content, as_read, pending, scoped.dependencies, scoped.warnings, written)


def _blobs(ends: Endpoints, pair: Pair) -> BlobStore:
    """Where the bytes of the source's files are: a backup's blob folder, or the state
    directory's cache of what was fetched to serve a live source's spaces."""
    if isinstance(ends.source_ref, BackupSource):
        return BlobStore(blobs_dir(ends.source_ref.path))
    return BlobStore(ends.settings.state_dir / "blobs" / seg(pair.source_tenant))


async def _content(ends: Endpoints, pair: Pair) -> ContentStrategy:
    """How content travels in this copy (see `ContentStrategy`); a restore serves the
    backup's content, whatever the live source holds now."""
    if isinstance(ends.source_ref, BackupSource):
        held = await anyio.to_thread.run_sync(held_blobs, _blobs(ends, pair))
        return ContentStrategy(serve=True, serve_everything=True, files_held=frozenset(held))
    readable = await target_reads_source(ends, pair.source_org)
    return ContentStrategy(same_credentials=ends.same_credentials, readable=readable, serve=not ends.same_credentials)


async def _restorable(ends: Endpoints, reading: Reading) -> frozenset[str]:
    """Spaces of a backup restored into the organization it came from that are deleted there
    and can still be brought back (the service answers them with `deletedAt`)."""
    if not isinstance(ends.source_ref, BackupSource) or reading.pair.source_org != reading.pair.target_org:
        return frozenset()
    out = set()
    for node in reading.source.snapshot.of_kind("space"):
        if reading.idmap.target("space", node.id) is None and reading.target.snapshot.get("space", node.id) is None:
            try:
                found = await ends.target.get_json(write_path("space", "get", {"id": seg(node.api_id)}))
            except ApiError:
                continue
            if isinstance(found, dict) and found.get("deletedAt") and found.get("organization") in (None, reading.pair.target_org):
                out.add(node.id)
    return frozenset(out)


@contextlib.asynccontextmanager
async def _content_source(ends: Endpoints, content: ContentStrategy) -> AsyncIterator[ContentSource | None]:
    """The run's content source, when content may be served (not with one token for both)."""
    if not content.serve:
        yield None
        return
    async with serve_content(ends.settings.content_source) as source:
        yield source


async def _begin(store: StateStore, pair: Pair) -> int:
    """`journal.begin` off the event loop: on PostgreSQL it waits (bounded) for another
    process's run of the target tenant; cancelling the task ends the wait."""
    return await anyio.to_thread.run_sync(lambda: journal.begin(store, pair, on_wait=anyio.from_thread.check_cancelled))


async def _settle(ends: Endpoints, pair: Pair) -> list[str]:
    """Settle leftovers of earlier runs in an apply run of its own (none when none)."""
    with StateStore(ends.db) as store:
        intents = journal.open_intents(store, pair)
        idmap = journal.load_idmap(store, pair)
        if not intents and not idmap.of_kind("space-duplicate"):
            return []
        run = await _begin(store, pair)
        status = "failed"
        try:
            # Read again now that the target is ours: a replica's apply we waited for may have
            # settled or finished some of them meanwhile.
            intents, idmap = journal.open_intents(store, pair), journal.load_idmap(store, pair)
            writer = Writer(store=store, pair=pair, run=run, idmap=idmap, target=ends.target, source=ends.source)
            done = await settle_leftovers(writer, intents)
            status = "complete"
            return done + writer.counts.notes
        finally:
            journal.finish(store, run, status, {"settled": True})


def _plan(reading: Reading, mode: Mode, max_delete: int, adopt: bool, with_access: bool = False) -> Plan:
    effective: Mode = mode if reading.complete else "copy"
    plan = plan_copy(
        reading.source.snapshot, reading.target.snapshot, reading.idmap, effective, max_delete=max_delete, adopt=adopt, content=reading.content,
        with_access=with_access,
    )  # fmt: skip
    if effective != mode:
        plan.warnings.append("a side could not be read completely: no deletes are planned this time")
    plan.warnings += reading.scope_warnings + [d.line() for d in reading.dependencies]
    return plan


def bounds_of(reading: Reading, mode: Mode, max_delete: int, with_access: bool = False) -> Bounds:
    """The rules every op of a run is held to (`invariants`), from what the run read: the
    target's objects and id map, the source's spaces (a same-token duplicate), the spaces the
    run may bring back; whether it may write the target's access settings."""
    spaces = reading.source.snapshot.of_kind("space")
    restorable = reading.content.restorable
    return Bounds(
        target_org=reading.pair.target_org, mode=mode, max_delete=max_delete, with_access=with_access,
        target_ids=known_target_ids(reading.target.snapshot, reading.idmap),
        source_spaces=frozenset(n.api_id for n in spaces) | frozenset(n.id for n in spaces),
        restorable=frozenset(restorable) | frozenset(n.api_id for n in spaces if n.id in restorable),
    )


def _verify(reading: Reading, plan: Plan, mode: Mode = "copy") -> Verification:
    """Compare the sides as read; in copy mode what is only on the target is left there, not a difference."""
    verification = excuse(compare(reading.source.snapshot, reading.target.snapshot, reading.idmap), plan.skips)
    return leave_extras(verification) if mode == "copy" else verification


# ----- applying ---------------------------------------------------------------------------------


async def _apply(
    ends: Endpoints, reading: Reading, plan: Plan, source: ContentSource | None, on_progress: Callable[[ApplyProgress], Any] | None
) -> ApplyResult:
    publisher = None
    if source is not None:
        live = not isinstance(ends.source_ref, BackupSource)
        publisher = Publisher(source, reading.source.snapshot, _blobs(ends, reading.pair), fetch=live, concurrency=ends.settings.content_source.concurrency)
    with StateStore(ends.db) as store:
        run = await _begin(store, reading.pair)
        status, reason, result = "failed", "apply stopped on an error", None
        try:
            if journal.target_writes(store, reading.pair) != reading.target_writes:
                # We may have waited for the target's writer (PostgreSQL) while another copy
                # of it applied: what we read is not what is there. Nothing is written.
                status, reason = "cancelled", STALE
                raise _TargetChanged(STALE)
            max_connections = ends.settings.content_source.max_connections
            imports = ImportBound(max_connections, seen=publisher.opened, refused=publisher.refused) if publisher else ImportBound(max_connections)
            writer = Writer(
                store=store, pair=reading.pair, run=run, idmap=reading.idmap, target=ends.target, source=ends.source, publisher=publisher, imports=imports
            )
            result = await apply_plan(plan, writer, concurrency=ends.settings.tenant(ends.target_ref.tenant).concurrency, on_progress=on_progress)
            if imports.narrowed:
                result.notes.append(imports.describe())
            status, reason = ("complete", "") if result.ok else ("partial", "some operations failed or were skipped")
            return result
        except anyio.get_cancelled_exc_class():
            status, reason = "cancelled", "apply was interrupted"
            raise
        except KeyboardInterrupt:
            status, reason = "cancelled", "apply was interrupted"
            raise
        finally:
            # Synchronous on purpose: it must run even while the task is being cancelled.
            journal.finish(store, run, status, {"apply": result.stats()} if result else {}, reason)


async def copy_org(
    settings: Settings,
    source: Source,
    target: TargetRef,
    *,
    mode: Mode = "copy",
    max_delete: int = 10,
    adopt: bool = True,
    db: StateLocation | None = None,
    max_rounds: int = MAX_ROUNDS,
    full: bool = False,
    clients: ClientFactory | None = None,
    on_read: Progress | None = None,
    on_apply: Callable[[ApplyProgress], Any] | None = None,
    on_round: Callable[[RoundReport], Any] | None = None,
    saved: SavedPlan | None = None,
    scope: Scope = EVERYTHING,
    with_access: bool = False,
) -> CopyReport:
    """Make `target` equal to `source` (see the module docstring). Raises PlanRefused
    (nothing written), UnsettledError, StateBusyError, UsageError, ContentSourceError, ApiError
    for a side that cannot be read at all; failures of single writes are in the report.

    With a `saved` plan: StalePlan (nothing written) when a side's fingerprint differs from
    the plan's; PlanBreaksRules when a saved op breaks the run's rules (`invariants`: the
    target only, no delete in a copy, at most `max_delete`); PlanMismatch unless the plan made
    again from what was read holds exactly the saved ops. Round 1 then applies that plan, and
    later rounds only ops the saved plan holds (by key): the others are reported in
    `outside_plan`, not applied. Every plan, saved or not, is held to the run's rules before
    it is applied: one that breaks them is refused (nothing of it is written). The target's
    access settings are kept unless `with_access` (`syncd.copy.org`)."""
    db = db or default_db(settings)
    options = _Options(mode, max_delete, adopt, max_rounds, full, on_read, on_apply, on_round, saved, scope, with_access)
    async with connect(settings, db, source, target, clients) as ends:
        pair, backup = await _pair(ends)
        settled = await _settle(ends, pair)
        content = await _content(ends, pair)
        async with _content_source(ends, content) as served:
            report = await _Copy(ends, pair, backup, content, served, options).run()
        report.traffic = _traffic(ends)
    report.settled = settled + report.settled
    return report


def _traffic(ends: Endpoints) -> dict[str, int]:
    """What the copy's clients sent, each client once (one may serve both sides)."""
    clients = {id(client): client for client in (ends.source, ends.target) if client is not None}.values()
    return {
        "requests": sum(c.stats.requests for c in clients),
        "retries": sum(c.stats.retries for c in clients),
        "rate_limited": sum(c.stats.rate_limited for c in clients),
    }


@dataclass(frozen=True)
class _Options:
    mode: Mode
    max_delete: int
    adopt: bool
    max_rounds: int
    full: bool
    on_read: Progress | None
    on_apply: Callable[[ApplyProgress], Any] | None
    on_round: Callable[[RoundReport], Any] | None
    saved: SavedPlan | None = None
    scope: Scope = EVERYTHING
    with_access: bool = False


@dataclass
class _Copy:
    """The rounds of one `copy_org`: read, plan, apply, read again."""

    ends: Endpoints
    pair: Pair
    backup: Side | None
    content: ContentStrategy
    served: ContentSource | None
    options: _Options
    rereads: int = 0

    async def read(self, full: bool = False) -> Reading:
        reading = await _read(self.ends, self.pair, self.backup, self.content, self.options.on_read, full, self.options.scope)
        reading.content = replace(self.content, restorable=await _restorable(self.ends, reading))
        return reading

    async def read_again(self, large: bool) -> Reading:
        """A new reading, once the caller has dropped its old one (`del reading`): a `large`
        old one's memory goes back before the new one is built (`free_memory`), so that two
        readings never meet in the peak."""
        if large:
            give_back_memory()
        return await self.read()

    async def reread(self, report: CopyReport, stale: Plan, large: bool) -> Reading:
        """Read again after another run wrote the target between our read and our apply; the
        stale plan is dropped. Bounded: a target other runs keep writing is busy."""
        if self.options.saved is not None and not report.rounds:
            raise StalePlan("the target changed since the plan was made (another run wrote it): make a new plan")
        report.plans.remove(stale)
        self.rereads += 1
        if self.rereads > self.options.max_rounds:
            raise StateBusyError(f"other runs wrote {self.ends.target_ref} {self.rereads} times while this copy read it: try again later")
        return await self.read_again(large)

    async def violations(self, plan: Plan, reading: Reading) -> list[str]:
        """`check_ops` of the plan against this run's rules, off the event loop (as planning)."""
        return await anyio.to_thread.run_sync(lambda: check_ops(plan.ops, bounds_of(reading, self.options.mode, self.options.max_delete, self.options.with_access)))

    async def plan(self, reading: Reading) -> Plan:
        # Planning takes a while on a large organization: off the event loop, so a daemon's
        # control API keeps answering.
        options = self.options
        return await anyio.to_thread.run_sync(_plan, reading, options.mode, options.max_delete, options.adopt, options.with_access)

    async def run(self) -> CopyReport:
        report = CopyReport(str(self.ends.source_ref), str(self.ends.target_ref), self.options.mode)
        reading = await self.read(self.options.full)
        before = {n.id for n in reading.source_as_read.of_kind("space")}  # not the whole first reading: it is dropped when read again
        saved = self.options.saved
        if saved is not None:
            check_fresh(saved, fingerprints(reading))
            refuse_violations(await self.violations(saved.plan, reading), "the plan file")
        while True:
            plan = await self.plan(reading)
            if saved is not None and not report.rounds:
                check_same(saved, plan)  # what was reviewed is what syncd plans itself now
            elif saved is not None:
                plan, report.outside_plan = restrict(plan, saved)
            violations = await self.violations(plan, reading)
            if violations and not plan.refused:  # a bug of the planner must not write: defence in depth
                plan.refused = f"the plan breaks the run's rules (a bug of syncd): {violations_line(violations)}"
            report.plans.append(plan)
            if len(report.plans) == 1:
                report.listing = review(plan, reading.source.snapshot, reading.target.snapshot, reading.idmap)
            if plan.refused:
                if not report.rounds:
                    raise PlanRefused(f"the plan must not be applied: {plan.refused}")
                report.warnings.append(f"round {len(report.rounds) + 1} not applied: {plan.refused}")
                break
            if report.rounds and report.rounds[-1].left is None:
                report.rounds[-1].left = (await anyio.to_thread.run_sync(_verify, reading, plan, self.options.mode)).counts()
                if self.options.on_round is not None:
                    self.options.on_round(report.rounds[-1])
            if not plan.ops or len(report.rounds) >= self.options.max_rounds:
                break
            try:
                result = await _apply(self.ends, reading, plan, self.served, self.options.on_apply)
            except _TargetChanged:
                large = reading.release()
                del reading
                reading = await self.reread(report, plan, large)
                continue
            report.rounds.append(RoundReport(len(report.rounds) + 1, len(plan.ops), {k: dict(v) for k, v in plan.counts().items()}, result))
            large = reading.release()
            del reading
            reading = await self.read_again(large)
        try:  # what a round could not settle (a duplicate it could not remove, say)
            leftover = await _settle(self.ends, self.pair)
        except UnsettledError as exc:
            leftover = []
            report.warnings.append(str(exc))
        if leftover:
            report.settled += leftover
            large = reading.release()
            del reading
            reading = await self.read_again(large)
        report.skips = plan.skips
        report.warnings += plan.warnings
        if report.outside_plan:
            named = ", ".join(f"{op.action} {op.kind} {op.title!r}" for op in report.outside_plan[:5])
            report.warnings.append(
                f"{len(report.outside_plan)} operation(s) the saved plan does not hold were not applied ({named}"
                + (", ..." if len(report.outside_plan) > 5 else "") + "): make a new plan to review them"
            )
        report.verification = await anyio.to_thread.run_sync(_verify, reading, plan, self.options.mode)
        report.read_cleanly = reading.complete
        with StateStore(self.ends.db) as store:
            made = journal.made_in_source(store, self.pair)
        report.residue = residue(reading.source_as_read, made)
        reading.release()
        appeared = {n.id for n in reading.source_as_read.of_kind("space")} - before - set(made)
        if appeared:
            report.warnings.append(
                f"{len(appeared)} space(s) appeared in the source during the copy ({', '.join(sorted(appeared)[:5])}): "
                "not made by this copy as far as its journal says; the next run copies them"
            )
        return report


# ----- plan and verify alone ----------------------------------------------------------------------


async def plan_org(
    settings: Settings, source: Source, target: TargetRef, *, mode: Mode = "copy", max_delete: int = 10, adopt: bool = True,
    db: StateLocation | None = None, on_read: Progress | None = None, scope: Scope = EVERYTHING, with_access: bool = False,
) -> tuple[Reading, Plan]:
    """Read both sides and plan; nothing is written (leftovers of earlier runs are not
    settled: the plan's warnings say so, and a real apply settles them first). The target's
    access settings are kept unless `with_access`."""
    reading = await _read_alone(settings, source, target, db or default_db(settings), on_read, scope)
    plan = _plan(reading, mode, max_delete, adopt, with_access)
    if reading.pending:
        plan.warnings.append(f"{reading.pending} call(s) of an earlier run have an unknown effect: a real apply settles them first")
    return reading, plan


async def _read_alone(
    settings: Settings, source: Source, target: TargetRef, db: StateLocation, on_read: Progress | None, scope: Scope, *, restored: bool = False
) -> Reading:
    """Both sides read outside a copy (a plan, a verify); with `restored`, a backup source
    must have been restored into the target in this state first (`NotRestored`, before
    anything is read)."""
    async with connect(settings, db, source, target) as ends:
        pair, backup = await _pair(ends)
        if restored and backup is not None and not await anyio.to_thread.run_sync(_recorded, db, pair):
            raise NotRestored(f"no restore of {ends.source_ref} into {ends.target_ref} is recorded in {shown_state(db)}")
        reading = await _read(ends, pair, backup, await _content(ends, pair), on_read, False, scope)
        reading.content = replace(reading.content, restorable=await _restorable(ends, reading))
    return reading


def _recorded(db: StateLocation, pair: Pair) -> bool:
    """Whether a copy of the pair left its ids in the state (a state file not there: no)."""
    if isinstance(db, Path) and not db.exists():
        return False  # not made here just to find it empty
    with StateStore(db) as store:
        return journal.recorded(store, pair)


async def verify_org(
    settings: Settings, source: Source, target: TargetRef, *, db: StateLocation | None = None, on_read: Progress | None = None,
    scope: Scope = EVERYTHING, with_access: bool = False, mode: Mode = "copy",
) -> tuple[Verification, list[Entry]]:
    """Read both sides and compare them through the pair's id map (differences a plan would
    announce as skips are excused: the target's access settings unless `with_access`; in copy
    mode what is only on the target is left there); and what copies of this pair left in the
    source. A backup source is compared through the ids its restore recorded: NotRestored when
    none did."""
    db = db or default_db(settings)
    reading = await _read_alone(settings, source, target, db, on_read, scope, restored=True)
    plan = _plan(reading, mode, max_delete=10, adopt=True, with_access=with_access)  # its skips excuse what a copy cannot write
    with StateStore(db) as store:
        made = journal.made_in_source(store, reading.pair)
    return _verify(reading, plan, mode), residue(reading.source_as_read, made)


def dry_run_lines(plan: Plan, idmap: IdMap) -> list[str]:
    """Every call the plan would send, after what it is about (`- delete space 'Old docs':
    DELETE /v1/spaces/...`), resolved as far as the id map goes (objects the plan makes show
    as `<new KIND SOURCE_ID>`); settle steps show what they expect to do."""

    def show(value: Any) -> Any:
        if isinstance(value, Ref):
            return idmap.target(value.kind, value.source_id) or f"<new {value.kind} {value.source_id}>"
        if isinstance(value, dict):
            return {k: show(v) for k, v in value.items()}
        if isinstance(value, list):
            return [show(v) for v in value]
        return value

    lines: list[str] = []
    for op in plan.ops:
        action = "update" if op.action == "patch" else op.action
        about = f"{SYMBOLS[action]} {action} {op.kind} {op.title!r}"
        if op.action == "adopt":
            lines.append(f"{about}: no call, {op.source_id} is {op.target_id} on the target")
            continue
        if op.action == "settle":
            lines.append(f"{about}: read the target, then " + ("; ".join(op.preview) or "check"))
            continue
        path = PATH_REF.sub(lambda m: str(show(Ref(m.group(1), m.group(2)))), op.path)
        text = f"{about}: {op.method} {path}" + (f" ({op.side})" if op.side != "target" else "")
        if op.body is not None:
            text += " " + json.dumps(show(op.body), ensure_ascii=False, sort_keys=True, default=str)
        if op.recipe == "duplicate-transfer":
            transfer = write_call("space", "transfer")
            text += f" then {transfer.method} {transfer.path.replace('{id}', '<the duplicate>')}"
        lines.append(text)
    return lines
