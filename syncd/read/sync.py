"""One crawl of a configured tenant into a mirror file: what `syncd sync`, `syncd backup`
and the daemon's sync jobs run. I/O at the edge: the CLI and the daemon call this."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from syncd.api import TenantClient, make_global_limiter
from syncd.config import Settings, TargetRef
from syncd.config.jobs import DEFAULT_FULL_EVERY
from syncd.read.crawl import Crawler, crawl_workers
from syncd.read.crawl_stats import CrawlResult, CrawlStats
from syncd.scope import EVERYTHING, Scope
from syncd.state import StateStore
from syncd.state.location import StateLocation

Progress = Callable[[CrawlStats, TenantClient], None]


SYNC_LISTS_EVERY = DEFAULT_FULL_EVERY
"""What `syncd sync` (and the demo's) passes as `lists_every`: the lists without a change token
read once a day, as a daemon's sync job reads everything by default (`full_every`)."""


def default_db(settings: Settings) -> StateLocation:
    """The mirror the commands and the daemon use: the shared PostgreSQL when `state_url` is
    set, else `syncd.db` in `state_dir` (the choice of backend: `syncd.state.location`)."""
    if settings.state_url is not None:
        return settings.state_url.get_secret_value()
    return settings.state_dir / "syncd.db"


def shown_state(location: StateLocation) -> str:
    """How a state is named to the user: its path, or its URL without the password."""
    if isinstance(location, Path):
        return str(location)
    from syncd.pg.connect import display_url  # (psycopg: only when a URL is in use)

    return display_url(location)


async def sync_into(
    settings: Settings,
    ref: TargetRef,
    db_path: StateLocation,
    *,
    job: str = "sync",
    full: bool = False,
    on_progress: Progress | None = None,
    client: TenantClient | None = None,
    store: StateStore | None = None,
    scope: Scope = EVERYTHING,
    lists_every: float | None = None,
) -> tuple[CrawlResult, TenantClient]:
    """Crawl `ref` into the mirror at `db_path`; the previous snapshot stays current unless
    the crawl finishes (complete, or partial with what could not be read kept). `client`: an
    open client to read with (left open), e.g. the one a copy also writes with, so that one
    pacer spends the token's rate limit. `mirror`: the state file already open (left open),
    e.g. to read two tenants into it side by side. `scope`: only these collections, spaces and
    sites are read and recorded (`syncd.read.crawl_scope`). `lists_every`: seconds an
    organization's lists without a change token are not read again after a complete read
    (`syncd.read.lists_schedule.ALWAYS_READ`; None: read every time, as a copy must)."""
    own = client is None
    if client is None:
        client = TenantClient.from_settings(settings, ref.tenant, make_global_limiter(settings))
    tenant = settings.tenant(ref.tenant)
    with contextlib.nullcontext(store) if store is not None else StateStore(db_path) as store:
        async with client if own else contextlib.nullcontext(client):

            def progress(stats: CrawlStats) -> None:
                if on_progress is not None:
                    on_progress(stats, client)

            crawler = Crawler(
                client, store, tenant.name, workers=crawl_workers(tenant.concurrency), full=full, on_progress=progress, scope=scope, lists_every=lists_every
            )
            result = await crawler.crawl(ref.org, job=job)
    return result, client
