"""The pure part of the latency series (`bench/crawl.py --latency-ms 20,80,150,300`,
`bench/mirror_latency.py`, `bench/fleet.py --series share`): parsing the series, the ratio
to the rate limit's bound, a client's figures read defensively, and the table.

Pure so that a test can check them without a server; the runs themselves are elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MISSING = "-"
"""What a figure the client does not report (yet) prints as."""
CLIENT_FIGURES = ("inflight_limit", "inflight_limit_peak", "rtt_seconds")
"""`ClientStats` fields of the in-flight limit controller, read with getattr: a client
without the controller still benchmarks, its columns print `-`."""


def parse_latencies(text: str) -> list[float]:
    """`"20,80,150,300"` -> [20.0, 80.0, 150.0, 300.0]; ValueError on anything else."""
    values = [part.strip() for part in text.split(",")]
    if not values or any(not v for v in values):
        raise ValueError(f"a comma-separated list of milliseconds is needed, not {text!r}")
    out = [float(v) for v in values]
    if any(v < 0 for v in out):
        raise ValueError(f"latencies cannot be negative: {text!r}")
    return out


def bound_seconds(requests: int, rate: float) -> float:
    """The least wall time `requests` can take at `rate` requests/s (the bucket's burst ignored)."""
    return requests / rate if rate > 0 else 0.0


def ratio(wall: float, requests: int, rate: float) -> float | None:
    """wall / (requests / R): 1.0 is the rate limit used to the full; None without a bound."""
    bound = bound_seconds(requests, rate)
    return wall / bound if bound > 0 else None


def share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def client_figures(stats: Any) -> dict[str, Any]:
    """The controller's fields of a `ClientStats`, None where the client has none."""
    return {name: getattr(stats, name, None) for name in CLIENT_FIGURES}


def peak_of(values: Sequence[Any]) -> Any:
    """The highest of the figures that are there; None when none is."""
    present = [v for v in values if v is not None]
    return max(present) if present else None


def metric_series(text: str, name: str) -> dict[str, float]:
    """Every series of one Prometheus metric in a `/metrics` body: its labels (`{...}` as
    written, `""` for none) -> value. Empty when the metric is absent."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        metric, brace, labels = head.partition("{")
        if metric != name or line.startswith("#"):
            continue
        try:
            out[brace + labels] = float(value)
        except ValueError:
            continue
    return out


def shown(value: Any, fmt: str = "{}") -> str:
    """A figure as the table prints it, `-` when absent."""
    return MISSING if value is None else fmt.format(value)


def checked(value: float | None, limit: float) -> str:
    """`ok` when value <= limit, `MISSED` when above, `-` when there is nothing to check."""
    if value is None:
        return MISSING
    return "ok" if value <= limit else "MISSED"


@dataclass(frozen=True)
class Column:
    title: str
    key: str
    fmt: str = "{}"


def table(columns: Sequence[Column], rows: Sequence[Mapping[str, Any]]) -> str:
    """A plain text table, numbers right-aligned; a missing or None cell prints `-`."""
    cells = [[shown(row.get(c.key), c.fmt) for c in columns] for row in rows]
    widths = [max([len(c.title), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    head = "  ".join(c.title.rjust(w) for c, w in zip(columns, widths, strict=True))
    lines = [head, "-" * len(head)]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)
