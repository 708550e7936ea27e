"""The two sides of a copy and how they are read: a live organization (an incremental sync
into the state mirror, then its snapshot) or a backup file (its snapshot, read-only).

One client per tenant lives as long as the copy: reads and writes of a token share its
pacer, and two tenants of the same credentials share one (one token, one rate limit).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from syncd.api import ApiError, TenantClient, make_global_limiter
from syncd.catalog import BY_NAME, fill
from syncd.config import Settings, TargetRef
from syncd.copy.model import Snapshot
from syncd.copy.scoped import ScopedRows
from syncd.errors import UsageError, first_failure
from syncd.read.crawl_stats import CrawlResult
from syncd.read.orgs import resolve_ref
from syncd.read.sync import Progress, StateLocation, sync_into
from syncd.state import StateStore, StateError

ClientFactory = Callable[..., TenantClient]
"""(settings, tenant, global limiter, **options) -> TenantClient (benchmarks count calls)."""


@dataclass(frozen=True)
class BackupSource:
    """A backup file as the source of a copy (a restore); `org` when it holds several."""

    path: Path
    org: str | None = None
    shown: str | None = None
    """How the backup is named when `path` is a copy of it (`s3://BUCKET/KEY`, fetched there)."""

    def __str__(self) -> str:
        return f"{self.shown or self.path}" + (f":{self.org}" if self.org else "")


Source = TargetRef | BackupSource


@dataclass
class Side:
    """One side as last read: its tenant (as the state mirror names it), organization and
    snapshot; `crawl` is None for a backup."""

    tenant: str
    org: str
    snapshot: Snapshot
    crawl: CrawlResult | None = None
    label: str = ""

    @property
    def complete(self) -> bool:
        return self.crawl is None or self.crawl.status == "complete"


@dataclass
class Endpoints:
    """What a copy talks to: the settings, the state file, and the open clients."""

    settings: Settings
    db: StateLocation
    source_ref: Source
    target_ref: TargetRef
    target: TenantClient
    source: TenantClient | None
    same_credentials: bool
    notes: list[str] = field(default_factory=list)

    @property
    def target_tenant(self) -> str:
        return self.settings.tenant(self.target_ref.tenant).name

    @property
    def target_org(self) -> str:
        return require_org(self.target_ref, "the target")


def require_org(ref: TargetRef, what: str) -> str:
    if not ref.org:
        raise UsageError(f"{what} must name an organization: TENANT:ORG_ID, got {ref}")
    return ref.org


def same_credentials(settings: Settings, a: str, b: str) -> bool:
    """Whether one token reaches both tenants (duplicate + transfer can then copy content)."""
    first, second = settings.tenant(a), settings.tenant(b)
    return first.base_url == second.base_url and first.resolved_token().get_secret_value() == second.resolved_token().get_secret_value()


@contextlib.asynccontextmanager
async def connect(settings: Settings, db: StateLocation, source: Source, target: TargetRef, clients: ClientFactory | None = None) -> AsyncIterator[Endpoints]:
    """Open the clients of a copy (checks the arguments first: one-line UsageErrors)."""
    require_org(target, "the target")
    if isinstance(source, TargetRef):
        require_org(source, "the source")
        if (settings.tenant(source.tenant).name, source.org) == (settings.tenant(target.tenant).name, target.org):
            raise UsageError("the source and the target are the same organization")
    elif not source.path.exists():
        raise UsageError(f"{source.path}: no such backup file")
    make = clients or TenantClient.from_settings
    limiter = make_global_limiter(settings)
    async with contextlib.AsyncExitStack() as stack:
        target_client = await stack.enter_async_context(make(settings, target.tenant, limiter))
        source_client = None
        same = False
        if isinstance(source, TargetRef):
            same = same_credentials(settings, source.tenant, target.tenant)
            shared: dict[str, Any] = {"pacer": target_client.pacer} if same else {}
            source_client = await stack.enter_async_context(make(settings, source.tenant, limiter, **shared))
        # Organizations addressed by title are addressed by id from here on (`syncd.read.orgs`).
        target = await resolve_ref(target_client, target)
        if isinstance(source, TargetRef) and source_client is not None:
            source = await resolve_ref(source_client, source)
            if (settings.tenant(source.tenant).name, source.org) == (settings.tenant(target.tenant).name, target.org):
                raise UsageError("the source and the target are the same organization")
        yield Endpoints(settings, db, source, target, target_client, source_client, same)


async def read_sides(ends: Endpoints, backup: Side | None, on_progress: Progress | None = None, full: bool = False) -> tuple[Side, Side]:
    """Both sides as they are now. Two tenants are read side by side into the one state file
    (each token has its own rate limit); two organizations of one tenant one after the other
    (a tenant's runs in a state file follow each other)."""
    live: list[tuple[TargetRef, TenantClient]] = [] if backup is not None else [(ends.source_ref, ends.source)]  # type: ignore[list-item]
    live.append((ends.target_ref, ends.target))
    crawls: dict[int, CrawlResult] = {}
    with StateStore(ends.db) as store:

        async def read(index: int) -> None:
            ref, client = live[index]
            crawls[index], _ = await sync_into(ends.settings, ref, ends.db, full=full, on_progress=on_progress, client=client, store=store)

        tenants = {ends.settings.tenant(ref.tenant).name for ref, _ in live}
        if len(tenants) == len(live):
            # On PostgreSQL both tenants' writer locks first, in the order every process takes
            # them (waited for, bounded): two copies between the same tenants never wait for each other.
            await anyio.to_thread.run_sync(lambda: store.hold(tenants, on_wait=anyio.from_thread.check_cancelled))
            try:
                async with anyio.create_task_group() as tg:
                    for index in range(len(live)):
                        tg.start_soon(read, index)
            except BaseExceptionGroup as group:  # one side failed (and the other was cancelled): its error, as is
                raise first_failure(group) from None
            finally:
                store.unhold(tenants)
        else:
            for index in range(len(live)):
                await read(index)

    def load(ref: TargetRef) -> Snapshot:
        tenant = ends.settings.tenant(ref.tenant).name
        with StateStore(ends.db) as store:
            return Snapshot.from_mirror(store, tenant, str(ref.org), ScopedRows(ends.db, tenant, str(ref.org)))

    sides = []
    for index, (ref, _) in enumerate(live):
        snapshot = await anyio.to_thread.run_sync(load, ref)  # seconds for a large organization: off the loop
        sides.append(Side(snapshot.tenant, snapshot.org, snapshot, crawls[index], str(ref)))
    if backup is not None:
        return backup, sides[0]
    return sides[0], sides[1]


def backup_tenant(backup: Path) -> str:
    return f"backup:{backup.name}"


def read_backup(source: BackupSource) -> Side:
    """A backup file's organization, as the source of a restore (opened read-only: nothing is
    written into it, and a backup on read-only media works)."""
    try:
        return _read_backup(source)
    except sqlite3.DatabaseError as exc:
        raise StateError(f"{source.path} cannot be read, it is damaged: {exc}") from None


def _read_backup(source: BackupSource) -> Side:
    with StateStore(source.path, readonly=True) as store:
        tenants = sorted({run["tenant"] for run in store.runs() if run["status"] in ("complete", "partial")})
        if len(tenants) != 1:
            raise UsageError(f"{source.path}: expected one tenant in the backup, found {len(tenants) or 'none'}")
        tenant = tenants[0]
        orgs = sorted({row["id"] for row in store.current(tenant, kind="organization")})
        org = source.org
        if org is None:
            if len(orgs) != 1:
                raise UsageError(f"{source.path} holds {len(orgs)} organizations: choose one with --org ({', '.join(orgs)})")
            org = orgs[0]
        elif org not in orgs:
            raise UsageError(f"{source.path} has no organization {org!r} (it has: {', '.join(orgs)})")
        snapshot = Snapshot.from_mirror(store, tenant, org, ScopedRows(source.path, tenant, org, readonly=True))
    named = Snapshot(backup_tenant(source.path), org, snapshot.nodes.values(), snapshot.rows)
    return Side(backup_tenant(source.path), org, named, None, str(source))


async def target_reads_source(ends: Endpoints, source_org: str) -> bool:
    """Whether the target's token can read the source organization: then it can import the
    content of any of its spaces, not only the publicly shared ones."""
    if ends.same_credentials:
        return True
    try:
        await ends.target.get_json(fill(BY_NAME["organization"].path, {"org": source_org}))
    except ApiError:
        return False
    return True


__all__ = [
    "BackupSource",
    "ClientFactory",
    "Endpoints",
    "Side",
    "Source",
    "connect",
    "read_backup",
    "read_sides",
    "require_org",
    "same_credentials",
    "target_reads_source",
]
