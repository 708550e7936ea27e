"""A job's runs over time as bars: height the run's duration, colour its outcome.

Why drawn on the server as SVG attributes: the page's Content-Security-Policy allows no inline
style nor script, and a chart that needs no JavaScript shows in every browser. Pure: runs in,
bars out; the template draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from syncd.daemon.run_history import RunRecord, iso_utc

__all__ = ["Bar", "Chart", "history_chart"]

WIDTH = 600
HEIGHT = 120
GAP = 2
MIN_BAR = 2.0
"""Even an instant run shows as a sliver, so that a failed one is never invisible."""
SLOTS = 20
"""Bars are at most this wide a share of the chart: two runs are two bars, not two halves."""


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
class Chart:
    bars: list[Bar]
    longest: float
    """The longest duration shown, in seconds (the top of the scale)."""
    width: int = WIDTH
    height: int = HEIGHT


def history_chart(runs: Sequence[RunRecord], *, width: int = WIDTH, height: int = HEIGHT) -> Chart:
    """Finished runs, oldest on the left (whatever order `runs` comes in), scaled to the longest."""
    done = sorted((r for r in runs if r.finished and r.started_at is not None), key=lambda r: (r.started_at, r.id))
    longest = max((r.seconds or 0.0 for r in done), default=0.0)
    if not done:
        return Chart([], 0.0, width, height)
    step = width / max(len(done), SLOTS)
    bars = []
    for index, run in enumerate(done):
        seconds = run.seconds or 0.0
        tall = MIN_BAR if longest <= 0 else max(MIN_BAR, seconds / longest * (height - 1))
        bars.append(Bar(
            run.id, run.outcome, round(index * step, 2), round(height - tall, 2), round(max(step - GAP, 1.0), 2), round(tall, 2),
            f"run {run.id}: {run.outcome}, {seconds:.1f} s, started {iso_utc(run.started_at)}",
        ))  # fmt: skip
    return Chart(bars, longest, width, height)
