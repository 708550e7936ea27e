"""Progress of long work: a live rich line on a terminal, periodic log lines elsewhere.

The line is a rich Text (never read as markup) and cleaned of control characters
(`syncd.safe_text`): its label names what the user or the server named."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from syncd.api import TenantClient
from syncd.crawl import CrawlStats
from syncd.logging import get_logger
from syncd.safe_text import clean

log = get_logger("syncd.progress")


class LiveLine:
    """One line of progress, refreshed a few times a second on a terminal, logged every
    `log_every` seconds otherwise (so a daemon or CI log shows it too)."""

    def __init__(self, label: str, console: Console | None = None, log_every: float = 5.0) -> None:
        self.label = clean(label)
        self.console = console or Console(stderr=True)
        self.interactive = self.console.is_terminal and sys.stderr.isatty()
        self.log_every = log_every
        self._live: Live | None = None
        self._last = 0.0

    def __enter__(self) -> LiveLine:
        if self.interactive:
            self._live = Live(Text(f"{self.label}: starting"), console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)

    def show(self, line: str) -> None:
        line = clean(line)
        now = time.monotonic()
        if self._live is not None:
            if now - self._last >= 0.2:
                self._last = now
                self._live.update(Text(f"{self.label}: {line}"))
        elif now - self._last >= self.log_every:
            self._last = now
            log.info("progress", job=self.label, progress=line)


class CrawlProgress(LiveLine):
    """Requests, objects, errors, retries and the current rate of a crawl."""

    @staticmethod
    def line(stats: CrawlStats, client: TenantClient) -> str:
        c = client.stats
        return (
            f"{c.requests} requests, {sum(stats.objects.values())} objects, "
            f"{stats.failed_listings} errors, {c.retries} retries, {c.rate_limited} x 429, "
            f"{c.current_rate():.1f} req/s, {stats.skipped_scopes} spaces unchanged"
        )

    def update(self, stats: CrawlStats, client: TenantClient) -> None:
        self.show(self.line(stats, client))


class CopyDisplay(LiveLine):
    """One line for a whole copy: its reads (crawl figures) and its applies (ops, writes)."""

    def reading(self, stats: CrawlStats, client: TenantClient) -> None:
        self.show("reading: " + CrawlProgress.line(stats, client))

    def applying(self, progress: Any) -> None:
        self.show(
            f"applying: {progress.done}/{progress.total} operations, {progress.writes} write calls, "
            f"{progress.reads} reads, {progress.failures} failed"
        )
