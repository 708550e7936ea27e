"""Where a daemon run is while it runs: the `progress` of `GET /runs/{id}`, which
`syncd trigger --wait` shows.

The engines report through the same callbacks the command line uses (crawl statistics, file
downloads, applied operations); a `RunProgress` turns each into one small JSON-ready dict and
hands it to the run's record. The job runners find the current run's RunProgress through a
context variable, so they need no extra parameter; outside a daemon run it reports nowhere.

Shape: `{"step": "reading" | "files" | "applying", "done": int, "total": int | null,
"detail": str}`; `total` is null while unknown (a crawl), `detail` says the counts in words.

`reading` counts the objects the whole run has read so far: a mirror run crawls its source
and its target side by side, each crawl with counts of its own, and reads both again after
each round. Shown one crawl at a time, the number jumped between the two crawls' counts and
fell back at each new read (`reading: 73`, then `reading: 41`); and a listing that the
server makes start again from its first page takes its rows back from its crawl's count
(`syncd.read.crawl._Listing.restart`) until it has read them again. Summed over the run's
crawls, each at the most it has shown, the number only grows. `estimate` gives a total and an ETA from the size of the job's previous run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from syncd.api import TenantClient
from syncd.read.crawl_stats import CrawlStats, crawl_line

__all__ = ["RunProgress", "current", "estimate", "previous_size", "reporting"]

Sink = Callable[[dict[str, Any]], None]


class RunProgress:
    """Callbacks for the engines (`reading`, `files`, `applying`) that report to `sink`."""

    def __init__(self, sink: Sink | None = None) -> None:
        self._sink = sink
        self._read: dict[int, tuple[CrawlStats, int]] = {}
        """Objects each crawl of the run has read, by crawl (its stats kept: an id stays its own)."""

    @property
    def objects_read(self) -> int:
        """Objects every crawl of this run has read so far (what `reading` shows)."""
        return sum(count for _, count in self._read.values())

    def _report(self, step: str, done: int, total: int | None, detail: str) -> None:
        if self._sink is not None:
            self._sink({"step": step, "done": int(done), "total": None if total is None else int(total), "detail": detail})

    def reading(self, stats: CrawlStats, client: TenantClient) -> None:
        shown = self._read.get(id(stats), (stats, 0))[1]
        self._read[id(stats)] = (stats, max(shown, sum(stats.objects.values())))
        self._report("reading", self.objects_read, None, crawl_line(stats, client))

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


def previous_size(summary: dict[str, Any]) -> int | None:
    """How many objects a finished run read (sync, mirror: `objects_read`; backup: `objects`)."""
    for key in ("objects_read", "objects"):
        value = summary.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def estimate(progress: dict[str, Any], expected: int | None, elapsed: float) -> dict[str, Any]:
    """The progress with a total and an ETA: a step that knows its total keeps it; `reading`
    takes `expected` (the previous run's size) while it has not passed it. `eta_seconds`: the
    time left at the rate so far (`elapsed` seconds since the run started), None while unknown."""
    done, total = progress.get("done"), progress.get("total")
    out = dict(progress)
    if total is None and progress.get("step") == "reading" and expected and isinstance(done, int) and done < expected:
        out["total"], out["estimated"] = expected, True
        total = expected
    eta = None
    if isinstance(done, int) and isinstance(total, int) and 0 < done < total and elapsed > 0:
        eta = elapsed * (total - done) / done
    out["eta_seconds"] = None if eta is None else round(eta, 1)
    return out
