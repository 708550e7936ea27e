"""What a crawl did: the counts that progress displays, run stats and the summary show, and
the result a finished crawl hands back (apart from the crawler, which is long enough)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from syncd.api import TenantClient, link_text
from syncd.read.crawl_scope import CrawlScope
from syncd.state.diff import ChangeSummary

__all__ = ["CrawlResult", "CrawlStats", "crawl_line"]


@dataclass
class CrawlStats:
    """What a crawl did, for progress displays, run stats and the summary."""

    started: float = field(default_factory=time.monotonic)
    objects: Counter[str] = field(default_factory=Counter)
    listings: int = 0
    failed_listings: int = 0
    skipped_scopes: int = 0
    """Spaces skipped (and carried forward) because their change token did not change."""
    crawled_scopes: int = 0
    errors: list[str] = field(default_factory=list)
    incomplete_scopes: set[str] = field(default_factory=set)
    lists_not_read: dict[str, str] = field(default_factory=dict)
    """Organizations whose lists without a change token were not read (their last complete
    read is recent: `syncd.read.lists_schedule.ALWAYS_READ`) -> when they are next read (ISO, UTC)."""

    def error(self, message: str, scope: str | None) -> None:
        self.failed_listings += 1
        if len(self.errors) < 200:
            self.errors.append(message)
        if scope:
            self.incomplete_scopes.add(scope)

    def as_dict(self) -> dict[str, Any]:
        return {
            "objects": dict(self.objects),
            "listings": self.listings,
            "failed_listings": self.failed_listings,
            "skipped_scopes": self.skipped_scopes,
            "crawled_scopes": self.crawled_scopes,
            "errors": self.errors,
            "incomplete_scopes": sorted(self.incomplete_scopes),
            "lists_not_read": dict(sorted(self.lists_not_read.items())),
            "seconds": round(time.monotonic() - self.started, 3),
        }


@dataclass
class CrawlResult:
    run: int
    status: str
    summary: ChangeSummary
    stats: CrawlStats
    scope: CrawlScope = field(default_factory=CrawlScope)
    """The run's scope, with what it left out and the dependencies it found outside it."""
    org: str | None = None
    """The organization read, by id (an address by title resolved); None: every one."""


def crawl_line(stats: CrawlStats, client: TenantClient) -> str:
    """Objects, requests, the current rate and the in-flight limit of a crawl; errors, retries, 429s and unchanged
    spaces when there are any."""
    c = client.stats
    parts = [f"{sum(stats.objects.values())} objects", f"{c.requests} requests", f"{c.current_rate():.1f} req/s",
             link_text(c.inflight_limit, c.rtt_seconds)]  # fmt: skip
    for count, what in ((stats.failed_listings, "errors"), (c.retries, "retries"), (c.rate_limited, "x 429"),
                        (stats.skipped_scopes, "spaces unchanged")):  # fmt: skip
        if count:
            parts.append(f"{count} {what}")
    return ", ".join(parts)
