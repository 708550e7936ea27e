"""Copy, mirror and restore organizations: the I/O around the pure planner.

`prepare` reads both sides into the state mirror (incrementally), builds their snapshots and
the id map; `plan_between` plans; `apply_between` applies, re-reads the target and
verifies. The CLI (`syncd mirror ...`, `syncd restore`) and the daemon's mirror jobs call
these. A run that could not read a side completely never deletes anything on the target.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from syncd.api import ApiError, TenantClient, make_global_limiter
from syncd.config import Settings, TargetRef
from syncd.crawl import CrawlResult
from syncd.errors import UsageError
from syncd.mirror import Mirror
from syncd.mirror.replication import load_idmap
from syncd.replay.apply import ApplyResult, apply_plan, reconcile_intents
from syncd.replay.ops import Plan
from syncd.replay.plan import ContentStrategy, plan
from syncd.replay.snapshot import IdMap, Snapshot
from syncd.replay.verify import Verification, compare
from syncd.sync import Progress, sync_into

Mode = Literal["copy", "mirror"]


@dataclass
class Side:
    """One side of a copy: its tenant, organization and what the last read of it found."""

    tenant: str
    org: str
    snapshot: Snapshot
    crawl: CrawlResult | None = None
    requests: int = 0
    label: str = ""


@dataclass
class Prepared:
    source: Side
    target: Side
    idmap: IdMap
    strategy: ContentStrategy
    warnings: list[str] = field(default_factory=list)

    @property
    def read_cleanly(self) -> bool:
        return all(side.crawl is None or side.crawl.status == "complete" for side in (self.source, self.target))


def require_org(ref: TargetRef, what: str) -> str:
    if not ref.org:
        raise UsageError(f"{what} must name an organization: TENANT:ORG_ID, got {ref}")
    return ref.org


def same_credentials(settings: Settings, a: str, b: str) -> bool:
    """Whether one token reaches both tenants (duplicate + transfer can then copy content)."""
    first, second = settings.tenant(a), settings.tenant(b)
    return first.base_url == second.base_url and first.resolved_token().get_secret_value() == second.resolved_token().get_secret_value()


async def read_side(settings: Settings, ref: TargetRef, db: Path, on_progress: Progress | None = None, full: bool = False) -> Side:
    org = require_org(ref, str(ref))
    result, client = await sync_into(settings, ref, db, full=full, on_progress=on_progress)
    tenant = settings.tenant(ref.tenant).name

    def load() -> Snapshot:
        with Mirror(db) as mirror:
            return Snapshot.from_mirror(mirror, tenant, org)

    snapshot = await anyio.to_thread.run_sync(load)  # seconds for a large organization: off the loop
    return Side(tenant, org, snapshot, result, client.stats.requests, str(ref))


async def prepare(
    settings: Settings, src: TargetRef, dst: TargetRef, db: Path, on_progress: Progress | None = None, full: bool = False
) -> Prepared:
    """Read both organizations (incremental syncs into `db`, or full ones) and load the id map."""
    require_org(src, "the source")
    require_org(dst, "the target")
    if (src.tenant, src.org) == (dst.tenant, dst.org):
        raise UsageError("the source and the target are the same organization")
    await settle_open_intents(settings, src, dst, db, settings.tenant(src.tenant).name)
    source = await read_side(settings, src, db, on_progress, full)
    target = await read_side(settings, dst, db, on_progress, full)
    same = same_credentials(settings, src.tenant, dst.tenant)
    readable = same or await target_reads_source(settings, dst.tenant, source.org)
    return _prepared(settings, source, target, db, same, readable)


async def prepare_restore(
    settings: Settings, backup: Path, src_org: str | None, dst: TargetRef, db: Path, on_progress: Progress | None = None
) -> Prepared:
    """A backup file as the source: its snapshot is read from the file, not the API."""
    if not backup.exists():
        raise UsageError(f"{backup}: no such backup file")
    with Mirror(backup, create=False) as mirror:
        tenants = sorted({run["tenant"] for run in mirror.runs() if run["status"] in ("complete", "partial")})
        if len(tenants) != 1:
            raise UsageError(f"{backup}: expected one tenant in the backup, found {len(tenants) or 'none'}")
        tenant = tenants[0]
        orgs = sorted({row["id"] for row in mirror.current(tenant, kind="organization")})
        if src_org is None:
            if len(orgs) != 1:
                raise UsageError(f"{backup} holds {len(orgs)} organizations: choose one with --org ({', '.join(orgs)})")
            src_org = orgs[0]
        elif src_org not in orgs:
            raise UsageError(f"{backup} has no organization {src_org!r} (it has: {', '.join(orgs)})")
        snapshot = Snapshot.from_mirror(mirror, tenant, src_org)
    source = Side(f"backup:{backup.name}", src_org, snapshot, None, 0, f"{backup}:{src_org}")
    await settle_open_intents(settings, None, dst, db, source.tenant, src_org)
    target = await read_side(settings, dst, db, on_progress)
    return _prepared(settings, source, target, db, False, await target_reads_source(settings, dst.tenant, src_org))


@contextlib.asynccontextmanager
async def _connected(
    settings: Settings, db: Path, target_tenant: str, source_tenant: str | None
) -> AsyncIterator[tuple[Mirror, TenantClient, TenantClient | None]]:
    """The state mirror, the target's client and (when given) the source's: what settling
    and applying need. One token spends one rate limit, so two clients of the same
    credentials pace as one."""
    limiter = make_global_limiter(settings)
    async with contextlib.AsyncExitStack() as stack:
        mirror = stack.enter_context(Mirror(db))
        target = await stack.enter_async_context(TenantClient.from_settings(settings, target_tenant, limiter))
        source = None
        if source_tenant is not None:
            shared = {"pacer": target.pacer} if same_credentials(settings, source_tenant, target_tenant) else {}
            source = await stack.enter_async_context(TenantClient.from_settings(settings, source_tenant, limiter, **shared))
        yield mirror, target, source


async def settle_open_intents(
    settings: Settings, src: TargetRef | None, dst: TargetRef, db: Path, source_tenant: str, source_org: str | None = None
) -> ApplyResult | None:
    """Settle calls an interrupted apply left with an unknown effect, before anything is
    read: a lost duplicate must be found (and moved on) before the source is crawled, or it
    would be read as a space of the source."""
    async with _connected(settings, db, dst.tenant, src.tenant if src else None) as (mirror, target, source):
        return await reconcile_intents(
            target=target,
            source=source,
            mirror=mirror,
            source_tenant=source_tenant,
            source_org=(src.org if src else source_org) or "",
            target_tenant=settings.tenant(dst.tenant).name,
            target_org=dst.org or "",
        )


async def target_reads_source(settings: Settings, target_tenant: str, source_org: str) -> bool:
    """Whether the target's token can read the source organization: then it can import the
    content of any of its spaces, not only the publicly shared ones."""
    async with TenantClient.from_settings(settings, target_tenant, make_global_limiter(settings)) as client:
        try:
            await client.get_json(f"/v1/orgs/{source_org}")
        except ApiError:
            return False
    return True


def _prepared(settings: Settings, source: Side, target: Side, db: Path, same_creds: bool, readable: bool = False) -> Prepared:
    with Mirror(db) as mirror:
        idmap = load_idmap(mirror, source.tenant, source.org, target.tenant, target.org)
    strategy = ContentStrategy(same_credentials=same_creds, importable=(lambda space: True) if readable and not same_creds else None)
    return Prepared(source, target, idmap, strategy)


def plan_between(prepared: Prepared, mode: Mode, max_delete: int, adopt: bool = True) -> Plan:
    """The plan; deletes are planned only when both sides were read completely."""
    effective: Mode = mode
    if mode == "mirror" and not prepared.read_cleanly:
        effective = "copy"
        prepared.warnings.append("a side could not be read completely: no deletes are planned this time")
    return plan(
        prepared.source.snapshot,
        prepared.target.snapshot,
        prepared.idmap,
        effective,
        max_delete=max_delete,
        adopt=adopt,
        content=prepared.strategy,
    )


async def apply_between(
    settings: Settings,
    prepared: Prepared,
    the_plan: Plan,
    db: Path,
    *,
    source_ref: TargetRef | None,
    target_ref: TargetRef,
    dry_run: bool = False,
    on_progress: Any = None,
) -> ApplyResult:
    source_tenant = source_ref.tenant if source_ref else None
    async with _connected(settings, db, target_ref.tenant, source_tenant) as (mirror, target, source):
        return await apply_plan(
            the_plan,
            target=target,
            source=source,
            mirror=mirror,
            source_tenant=prepared.source.tenant,
            source_org=prepared.source.org,
            target_tenant=prepared.target.tenant,
            target_org=prepared.target.org,
            concurrency=settings.tenant(target_ref.tenant).concurrency,
            dry_run=dry_run,
            on_progress=on_progress,
        )


def verify_prepared(prepared: Prepared) -> Verification:
    return compare(prepared.source.snapshot, prepared.target.snapshot, prepared.idmap)
