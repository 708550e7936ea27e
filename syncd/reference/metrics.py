"""The metrics' reference page, read from the daemon's own Prometheus registry
(`syncd.daemon.metrics.DaemonMetrics`): every `syncd_*` metric with its type, labels, the series
names it is exposed under and its HELP text.
"""

from __future__ import annotations

from dataclasses import dataclass

from syncd.daemon.metrics import DaemonMetrics
from syncd.reference.markdown import code, paragraphs

__all__ = ["MetricDoc", "metrics", "metrics_reference"]

PREFIX = "syncd_"

INTRO = """\
`syncd serve` exposes its metrics at `GET /metrics` of the control API, in Prometheus' text
format (the bearer token is needed, as for every route but `/healthz`; see
[Control API](control-api.md)). This page is generated from the daemon's registry when the site is
built. Next to syncd's own metrics below, the registry holds the standard `process_*` metrics of
the Prometheus client (CPU seconds, resident and virtual memory, open and maximum file
descriptors, start time) where the platform has them (Linux).

A counter is exposed with the suffix `_total`; a histogram as `_bucket` (one series per upper
bound `le`), `_sum` and `_count`. A labelled metric has a series once a value for its labels was
recorded: a job's series appear once the job is configured or first runs, and go when it is
removed from the configuration.
"""


@dataclass(frozen=True)
class MetricDoc:
    """One metric: its name, type, labels, HELP text and the series names it is exposed under."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str

    @property
    def series(self) -> tuple[str, ...]:
        if self.type == "counter":
            return (f"{self.name}_total",)
        if self.type == "histogram":
            return tuple(f"{self.name}_{suffix}" for suffix in ("bucket", "sum", "count"))
        return (self.name,)


def metrics() -> list[MetricDoc]:
    """Every `syncd_*` metric of a daemon's registry, in the order the daemon makes them."""
    owner = DaemonMetrics()
    found = []
    for family in owner.registry.collect():
        if not family.name.startswith(PREFIX):
            continue
        labels: set[str] = set()
        for sample in family.samples:
            labels |= set(sample.labels) - {"le"}
        wrapper = next((value for value in vars(owner).values() if getattr(value, "_name", None) == family.name), None)
        names = tuple(getattr(wrapper, "_labelnames", ())) or tuple(sorted(labels))
        found.append(MetricDoc(family.name, family.type, names, family.documentation))
    return found


def _metric(doc: MetricDoc) -> str:
    labels = ", ".join(code(label) for label in doc.labels) or "none"
    series = ", ".join(code(name) for name in doc.series)
    return f"### {code(doc.name)}\n\n{paragraphs(doc.help)}\n\n- Type: {doc.type}\n- Labels: {labels}\n- Series: {series}"


def metrics_reference() -> str:
    """The page: an introduction, then a heading per metric."""
    return "# Metrics\n\n" + INTRO + "\n" + "\n\n".join(_metric(doc) for doc in metrics()) + "\n"
