"""A job's runs over time as bars: height the run's duration, colour its outcome, and a time
axis under them that says when the runs started.

Why drawn on the server as SVG attributes: the page's Content-Security-Policy allows no inline
style nor script, and a chart that needs no JavaScript shows in every browser. The bars live in
an inner SVG stretched to the chart's width (`preserveAspectRatio="none"`); the axis's labels in
the outer one, placed in percent of its width, so they line up with the bars without being
stretched themselves. Pure: runs in, bars and ticks out; the template draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from syncd.daemon.run_history import RunRecord
from syncd.daemon.ui.render import duration, when

__all__ = ["Bar", "Chart", "Tick", "history_chart", "runs_label"]

WIDTH = 600
HEIGHT = 120
GAP = 2
MIN_BAR = 6.0
"""Even an instant run shows as a bar one twentieth of the chart tall: a 0.2 s run beside a
10-minute one, a failure after one second, are never invisible."""
SLOTS = 20
"""Bars are at most this wide a share of the chart: two runs are two bars, not two halves."""
TICKS = 3
"""Times marked on the axis at most: the first run, the last, one in the middle."""
TICK_SPACING = 30.0
"""Percent of the width two marked times keep between them (a time is about 23 characters)."""


@dataclass(frozen=True)
class Bar:
    run: int
    outcome: str
    x: float
    y: float
    width: float
    height: float
    label: str
    """What the bar's tooltip says: run, outcome, duration and start."""


@dataclass(frozen=True)
class Tick:
    """A mark of the time axis: where (percent of the width), what it says, how it is anchored."""

    percent: float
    label: str
    anchor: str
    """`start`, `middle` or `end` (SVG's text-anchor): a label never runs out of the chart."""


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    longest: float
    """The longest duration shown, in seconds (the top of the scale)."""
    width: int = WIDTH
    height: int = HEIGHT
    ticks: tuple[Tick, ...] = ()

    @property
    def caption(self) -> str:
        """`Last run` / `Last 12 runs`."""
        return runs_label(len(self.bars))


def runs_label(count: int) -> str:
    """The chart's count in words: `Last run`, `Last 12 runs`."""
    return "Last run" if count == 1 else f"Last {count} runs"


def _ticks(bars: list[Bar], starts: list[str], width: int) -> tuple[Tick, ...]:
    """The first, middle and last runs' start times, where their bars are, none too close to another."""
    if not bars:
        return ()
    picked = sorted({0, len(bars) // 2, len(bars) - 1})[:TICKS]
    ticks: list[Tick] = []
    for index in picked:
        bar = bars[index]
        percent = round((bar.x + bar.width / 2) / width * 100, 2)
        if ticks and percent - ticks[-1].percent < TICK_SPACING:
            if index != len(bars) - 1:
                continue
            ticks.pop()  # the last run's time matters more than the middle one's
            if ticks and percent - ticks[-1].percent < TICK_SPACING:
                continue
        ticks.append(Tick(percent, starts[index], "middle"))
    out = []
    for tick in ticks:
        anchor = "start" if tick.percent < 25 else "end" if tick.percent > 75 else "middle"
        out.append(Tick(tick.percent, tick.label, anchor))
    return tuple(out)


def history_chart(runs: Sequence[RunRecord], *, width: int = WIDTH, height: int = HEIGHT, zone: str = "UTC") -> Chart:
    """Finished runs, oldest on the left (whatever order `runs` comes in), scaled to the
    longest; times in UTC, and in `zone` too when the job has one."""
    done = sorted((r for r in runs if r.finished and r.started_at is not None), key=lambda r: (r.started_at, r.id))
    longest = max((r.seconds or 0.0 for r in done), default=0.0)
    if not done:
        return Chart([], 0.0, width, height)
    step = width / max(len(done), SLOTS)
    bars, starts = [], []
    for index, run in enumerate(done):
        seconds = run.seconds or 0.0
        tall = MIN_BAR if longest <= 0 else max(MIN_BAR, seconds / longest * (height - 1))
        started = when(run.started_at, zone)
        bars.append(Bar(
            run.id, run.outcome, round(index * step, 2), round(height - tall, 2), round(max(step - GAP, 1.0), 2), round(tall, 2),
            f"run {run.id}: {run.outcome}, {duration(seconds)}, started {started}",
        ))  # fmt: skip
        starts.append(when(run.started_at))  # the axis: UTC, short enough for three marks
    return Chart(bars, longest, width, height, _ticks(bars, starts, width))
