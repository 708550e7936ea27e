"""The daemon's Prometheus metrics: API calls, job runs, mirrored objects, the process.

One registry per daemon (not prometheus-client's global one), so tests can run several
daemons in one process and every metric here is one the daemon owns. The object also is
the `ApiObserver` the daemon installs around job runs: clients report every attempt here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

from syncd.daemon.run_history import OUTCOMES

__all__ = ["CONTENT_TYPE", "DaemonMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
disable_created_metrics()  # `*_created` series only double the output; nobody alerts on them
REASON_LABEL = 200
"""Characters of a run's reason kept in a label (a label is not a log: enough to read what happened)."""
_DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, float("inf"))


class DaemonMetrics:
    """Counters and gauges named `syncd_*`; `render()` is the `/metrics` body."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        r = self.registry
        self.requests = Counter(
            "syncd_api_requests", "API call attempts by tenant, method and HTTP status ('error': no complete answer).",
            ["tenant", "method", "status"], registry=r,
        )
        self.retries = Counter("syncd_api_retries", "API call attempts repeated after a transient failure.", ["tenant"], registry=r)
        self.rate_limited = Counter("syncd_api_rate_limited", "429 answers received.", ["tenant"], registry=r)
        self.rate_remaining = Gauge(
            "syncd_api_rate_limit_remaining", "X-RateLimit-Remaining of the tenant's latest answer.", ["tenant"], registry=r
        )
        self.inflight_limit = Gauge(
            "syncd_inflight_limit", "Requests the tenant's token may have in flight now, sized from the round trip and the rate (at most its concurrency).",
            ["tenant"], registry=r,
        )
        self.round_trip = Gauge(
            "syncd_round_trip_seconds", "Smoothed time to the first byte of the tenant's answers.", ["tenant"], registry=r
        )
        self.objects = Gauge(
            "syncd_objects_mirrored", "Current objects in the state mirror, by tenant and kind.", ["tenant", "kind"], registry=r
        )
        self.runs = Counter("syncd_job_runs", "Finished job runs by outcome.", ["job", "outcome"], registry=r)
        self.duration = Histogram(
            "syncd_job_run_duration_seconds", "Wall time of finished job runs.", ["job"], buckets=_DURATION_BUCKETS, registry=r
        )
        self.last_success = Gauge(
            "syncd_job_last_success_timestamp_seconds", "Unix time at which the job's latest successful run ended.", ["job"], registry=r
        )
        self.running = Gauge("syncd_job_running", "1 while a run of the job is in progress.", ["job"], registry=r)
        # An info-style series: one per job, its labels the latest outcome and its reason (the
        # run's own sentence, cut to REASON_LABEL characters), replaced at each run: at most one
        # series per job, whatever the reasons were. Alert on `outcome!="succeeded"`, read `reason`.
        self.last_outcome = Gauge(
            "syncd_job_last_outcome", "1 for the job's latest finished run: its outcome and why it is not a plain success (reason, '' for one).",
            ["job", "outcome", "reason"], registry=r,
        )
        # One series per backup job, replaced at each backup it stores: where the latest went
        # (a file, or s3://BUCKET/KEY) as a label, when as the value.
        self.last_backup = Gauge(
            "syncd_job_last_backup_timestamp_seconds",
            "Unix time at which the backup job's latest backup was stored, labelled with where it went (a file, or s3://BUCKET/KEY).",
            ["job", "location"], registry=r,
        )
        self.left_on_target = Gauge(
            "syncd_job_left_on_target", "Objects a copy-mode mirror job's latest run left on the target that the source does not have.",
            ["job"], registry=r,
        )
        # Where an export job's history went: one series per job, its labels the newest commit and
        # the remote (without credentials, '' for none), replaced at each run.
        self.export_commit = Gauge(
            "syncd_job_export_commit", "1 for an export job's newest commit, labelled with its id and the remote it is pushed to ('' for none).",
            ["job", "commit", "remote"], registry=r,
        )
        self.export_unpushed = Gauge(
            "syncd_job_export_unpushed", "1 while an export job's newest commit is not on its remote (the latest push failed), else 0.",
            ["job"], registry=r,
        )
        self.paused = Gauge(
            "syncd_job_paused", "1 while an operator has the job paused (its schedule does not fire, triggers are refused).",
            ["job"], registry=r,
        )
        self.reloads = Counter("syncd_config_reloads", "Configuration reloads (SIGHUP) by outcome.", ["outcome"], registry=r)
        self.scheduler_passes = Counter(
            "syncd_scheduler_passes",
            "Times the scheduler looked for due jobs (when a run ends, on a reload, when a job falls due, and at least "
            "once a minute): a counter that stops rising means a stuck scheduler.",
            registry=r,
        )
        self._kinds: dict[str, set[str]] = {}
        self._last: dict[str, tuple[str, str]] = {}
        self._exports: dict[str, tuple[str, str]] = {}
        self._last_backup: dict[str, str] = {}

    # -- ApiObserver -------------------------------------------------------------------

    def on_response(self, tenant: str, method: str, status: int | str, remaining: int | None) -> None:
        self.requests.labels(tenant, method, str(status)).inc()
        if status == 429:
            self.rate_limited.labels(tenant).inc()
        if remaining is not None:
            self.rate_remaining.labels(tenant).set(remaining)

    def on_retry(self, tenant: str) -> None:
        self.retries.labels(tenant).inc()

    def on_link(self, tenant: str, inflight_limit: int, rtt_seconds: float | None) -> None:
        self.inflight_limit.labels(tenant).set(inflight_limit)
        if rtt_seconds is not None:
            self.round_trip.labels(tenant).set(rtt_seconds)

    # -- jobs --------------------------------------------------------------------------

    def job_known(self, job: str) -> None:
        """Make a configured job visible (at 0) before its first run."""
        self.running.labels(job).set(0)

    def job_paused(self, job: str, paused: bool) -> None:
        self.paused.labels(job).set(1 if paused else 0)

    def run_started(self, job: str) -> None:
        self.running.labels(job).set(1)

    def run_finished(self, job: str, outcome: str, seconds: float, ended_at: float, reason: str | None = None) -> None:
        self.running.labels(job).set(0)
        self.runs.labels(job, outcome).inc()
        self.duration.labels(job).observe(seconds)
        if outcome == "succeeded":
            self.last_success.labels(job).set(ended_at)
        self._drop_last(job)
        self._last[job] = (outcome, _label(reason or ""))
        self.last_outcome.labels(job, *self._last[job]).set(1)

    def backup_stored(self, job: str, location: str, at: float) -> None:
        """The job's latest backup went to `location` at `at` (the previous one's series goes)."""
        previous = self._last_backup.pop(job, None)
        if previous is not None:
            with contextlib.suppress(KeyError):
                self.last_backup.remove(job, previous)
        self._last_backup[job] = location
        self.last_backup.labels(job, location).set(at)

    def set_left_on_target(self, job: str, count: int) -> None:
        self.left_on_target.labels(job).set(count)

    def set_export(self, job: str, commit: str | None, remote: str | None, pushed: bool | None) -> None:
        """Where an export job's history is now: its newest commit, its remote, and whether the remote has it."""
        self._drop_export(job)
        self._exports[job] = (commit or "", remote or "")
        self.export_commit.labels(job, *self._exports[job]).set(1)
        self.export_unpushed.labels(job).set(1 if pushed is False else 0)

    def _drop_export(self, job: str) -> None:
        last = self._exports.pop(job, None)
        if last is not None:
            with contextlib.suppress(KeyError):
                self.export_commit.remove(job, *last)

    def _drop_last(self, job: str) -> None:
        last = self._last.pop(job, None)
        if last is not None:
            with contextlib.suppress(KeyError):
                self.last_outcome.remove(job, *last)

    def forget_job(self, job: str) -> None:
        """A job removed from the configuration leaves no series behind."""
        self._drop_last(job)
        self._drop_export(job)
        location = self._last_backup.pop(job, None)
        if location is not None:
            with contextlib.suppress(KeyError):
                self.last_backup.remove(job, location)
        for metric in (self.running, self.paused, self.duration, self.last_success, self.left_on_target, self.export_unpushed):
            with contextlib.suppress(KeyError):
                metric.remove(job)
        for outcome in OUTCOMES:
            with contextlib.suppress(KeyError):
                self.runs.remove(job, outcome)

    def set_objects(self, tenant: str, counts: Mapping[str, int]) -> None:
        """Replace the tenant's counts; a kind that is gone drops to 0 rather than lingering."""
        for kind in self._kinds.get(tenant, set()) - set(counts):
            self.objects.labels(tenant, kind).set(0)
        for kind, count in counts.items():
            self.objects.labels(tenant, kind).set(count)
        self._kinds[tenant] = self._kinds.get(tenant, set()) | set(counts)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _label(text: str) -> str:
    """A reason as a label value: one line, at most `REASON_LABEL` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= REASON_LABEL else flat[: REASON_LABEL - 1] + "…"
