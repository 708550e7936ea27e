"""Where a daemon run is while it runs: the `progress` of `GET /runs/{id}`, which
`syncd trigger --wait` shows.

The engines report through the same callbacks the command line uses (crawl statistics, file
downloads, applied operations); a `RunProgress` turns each into one small JSON-ready dict and
hands it to the run's record. The job runners find the current run's RunProgress through a
context variable, so they need no extra parameter; outside a daemon run it reports nowhere.

Shape: `{"step": "reading" | "files" | "applying", "done": int, "total": int | null,
"detail": str}`; `total` is null while unknown (a crawl), `detail` says the counts in words.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from syncd.api import TenantClient
from syncd.read.crawl_stats import CrawlStats, crawl_line

__all__ = ["RunProgress", "current", "reporting"]

Sink = Callable[[dict[str, Any]], None]


class RunProgress:
    """Callbacks for the engines (`reading`, `files`, `applying`) that report to `sink`."""

    def __init__(self, sink: Sink | None = None) -> None:
        self._sink = sink

    def _report(self, step: str, done: int, total: int | None, detail: str) -> None:
        if self._sink is not None:
            self._sink({"step": step, "done": int(done), "total": None if total is None else int(total), "detail": detail})

    def reading(self, stats: CrawlStats, client: TenantClient) -> None:
        self._report("reading", sum(stats.objects.values()), None, crawl_line(stats, client))

    def files(self, done: int, total: int, size: int) -> None:
        self._report("files", done, total, f"{size} bytes downloaded")

    def applying(self, progress: Any) -> None:
        self._report(
            "applying", progress.done, progress.total,
            f"{progress.writes} write calls, {progress.reads} reads, {progress.failures} failed",
        )  # fmt: skip


_CURRENT: ContextVar[RunProgress] = ContextVar("syncd_run_progress", default=RunProgress())


def current() -> RunProgress:
    """The RunProgress of the run this task belongs to (one that reports nowhere outside a run)."""
    return _CURRENT.get()


@contextlib.contextmanager
def reporting(sink: Sink) -> Iterator[RunProgress]:
    """Make `sink` receive the progress of the work run inside the block (and its tasks)."""
    progress = RunProgress(sink)
    token = _CURRENT.set(progress)
    try:
        yield progress
    finally:
        _CURRENT.reset(token)
