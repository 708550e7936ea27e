"""Progress of long work on stderr: rich progress bars on a terminal, periodic log lines elsewhere.

Each display is a set of named steps. A step whose total is known (operations to apply,
files to download, spaces to export) is a bar with `done/total` and the time left; one whose
total is not known (a crawl: nobody knows how many objects an organization holds until it
is read) is a spinner with live counts. On a terminal (stderr is a TTY) the bars are redrawn a
few times a second and removed at the end; otherwise (a pipe, a CI or daemon log) a log line
says where each step is every `log_every` seconds, as before bars. Never on stdout: stdout may
carry a command's JSON.

Labels and notes are rich Text, never read as markup, and cleaned of control characters
(`syncd.safe_text`): they name what the user or the server named.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TaskID, TextColumn
from rich.table import Column
from rich.text import Text

from syncd.api import TenantClient
from syncd.logging import get_logger
from syncd.read.crawl_stats import CrawlStats, crawl_line
from syncd.safe_text import clean

__all__ = ["CopyDisplay", "CrawlProgress", "ExportProgress", "StepDisplay", "crawl_line", "format_eta", "show_run"]

log = get_logger("syncd.progress")


def format_eta(seconds: float | None) -> str:
    """`0:01:05`, or `?` while unknown."""
    if seconds is None:
        return "?"
    whole = max(0, int(round(seconds)))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


class _CountColumn(ProgressColumn):
    """`12/40` when the total is known (a count without one is in the step's note)."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        return Text(f"{int(task.completed)}/{int(task.total)}")


class _EtaColumn(ProgressColumn):
    """`ETA 0:00:12` for a bar (its rate so far), nothing for a count."""

    def render(self, task: Task) -> Text:
        if task.total is None or task.finished:
            return Text("")
        return Text(f"ETA {format_eta(task.time_remaining)}")


class _NoteColumn(ProgressColumn):
    """The step's free text (counts, rates), shown as text on one line (cut to fit)."""

    def __init__(self) -> None:
        super().__init__(table_column=Column(no_wrap=True, overflow="ellipsis"))

    def render(self, task: Task) -> Text:
        return Text(clean(task.fields.get("note", "")), no_wrap=True, overflow="ellipsis")


@dataclass
class _Step:
    task: TaskID | None
    done: float = 0
    total: float | None = None
    note: str = ""
    started: float = 0.0

    def eta(self, now: float) -> float | None:
        """Seconds left at the average rate so far (for the log lines)."""
        if self.total is None or self.done <= 0 or now <= self.started:
            return None
        return (self.total - self.done) * (now - self.started) / self.done

    def line(self, name: str, now: float) -> str:
        if self.total is None:
            return f"{name}: {self.note}"
        head = f"{name}: {int(self.done)}/{int(self.total)}, ETA {format_eta(self.eta(now))}"
        return f"{head}, {self.note}" if self.note else head


class StepDisplay:
    """Named steps of one piece of work (see the module docstring); use as a context manager.

    `step(name, done, total=None, note="")` creates or moves a step: a `total` makes it a bar,
    `done` going down (a new round of applies) restarts it."""

    def __init__(self, label: str, console: Console | None = None, log_every: float = 5.0) -> None:
        self.label = clean(label)
        self.console = console or Console(stderr=True)
        self.interactive = self.console.is_terminal and (console is not None or sys.stderr.isatty())
        self.log_every = log_every
        self._progress: Progress | None = None
        self._steps: dict[str, _Step] = {}
        self._last_log = time.monotonic()

    def __enter__(self) -> StepDisplay:
        if self.interactive:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False, table_column=Column(no_wrap=True)),
                BarColumn(bar_width=24),
                _CountColumn(),
                _EtaColumn(),
                _NoteColumn(),
                console=self.console,
                transient=True,
                refresh_per_second=4,
            )
            self._progress.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.__exit__(exc_type, exc, tb)
            self._progress = None

    def step(self, name: str, done: float, total: float | None = None, note: str = "") -> None:
        now = time.monotonic()
        step = self._steps.get(name)
        if step is None:
            description = f"{self.label}: {clean(name)}"
            task = self._progress.add_task(description, total=total, note=note) if self._progress else None
            step = self._steps[name] = _Step(task, started=now)
        restarted = done < step.done or total != step.total
        step.done, step.total, step.note = done, total, note
        if restarted:
            step.started = now
        if self._progress is not None and step.task is not None:
            if restarted:
                self._progress.reset(step.task, total=total, completed=done, note=note)
                self._progress.update(step.task, completed=done)  # marks it finished when done == total
            else:
                self._progress.update(step.task, completed=done, total=total, note=note)
        elif now - self._last_log >= self.log_every:
            self._last_log = now
            log.info("progress", job=self.label, progress=step.line(name, now))

    def finish(self, name: str) -> None:
        """Mark a step done (a crawl that ended: its count stays, its spinner stops)."""
        step = self._steps.get(name)
        if step is not None and step.total is None:
            self.step(name, step.done, step.done, step.note)

    def show(self, line: str) -> None:
        """One free line of progress (a step with no count)."""
        self.step("progress", 0, note=line)


def show_run(display: StepDisplay, run: Mapping[str, Any]) -> None:
    """A daemon run as `GET /runs/{id}` answers it (`syncd trigger --wait`): its `progress`
    step (`syncd.daemon.progress`), or that it waits its turn."""
    progress = run.get("progress") or {}
    if run.get("outcome") == "queued":
        display.show("queued: waiting for the job's previous run to end")
    elif isinstance(progress, Mapping) and progress.get("step"):
        total = progress.get("total")
        display.step(str(progress["step"]), float(progress.get("done") or 0), float(total) if total is not None else None,
                     str(progress.get("detail") or ""))  # fmt: skip


class CrawlProgress(StepDisplay):
    """A crawl (live counts: its total is unknown), then a backup's file downloads (a bar)."""

    line = staticmethod(crawl_line)

    def update(self, stats: CrawlStats, client: TenantClient) -> None:
        self.step("reading", sum(stats.objects.values()), note=crawl_line(stats, client))

    def files(self, done: int, total: int, size: int) -> None:
        self.finish("reading")
        self.step("files", done, total, note=f"{_bytes(size)} downloaded")


class CopyDisplay(CrawlProgress):
    """A copy: its reads (crawl figures) and its applies (operations of the round, a bar)."""

    def reading(self, stats: CrawlStats, client: TenantClient) -> None:
        self.update(stats, client)

    def applying(self, progress: Any) -> None:
        self.finish("reading")
        self.step(
            "applying",
            progress.done,
            progress.total,
            note=f"{progress.writes} write calls, {progress.reads} reads, {progress.failures} failed",
        )


class ExportProgress(StepDisplay):
    """An export: spaces written of those to write (a bar), and the files so far."""

    def update(self, spaces_done: int, spaces_total: int | None, files: int) -> None:
        self.step("spaces", spaces_done, spaces_total, note=f"{files} files written")


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover
