"""How a run's end is told: the one line of a failed run's error (`describe_error`) and the log
line every run's end gets (`log_run_end`), by one daemon and by a fleet replica alike; alerts
key on these events, and the words are those the API and the page show (`RunRecord.explanation`).
"""

from __future__ import annotations

from typing import Any

from syncd.daemon.run_history import RunRecord
from syncd.errors import SyncdError
from syncd.logging import get_logger

__all__ = ["RunFailed", "describe_error", "log_run_end"]

log = get_logger("syncd.daemon")


class RunFailed(SyncdError):
    """A run that fails after part of its work is done and kept (an export job's commit made,
    its push failed): its message is the run's error, `summary` what it did, kept with the run."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary


def describe_error(exc: BaseException) -> str:
    """One line for a failed run: our errors speak for themselves, others get their type."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_error(inner) for inner in exc.exceptions[:3])
    text = " ".join(str(exc).split())
    if isinstance(exc, SyncdError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def log_run_end(record: RunRecord, seconds: float, **extra: Any) -> None:
    """How a run's end is logged, by one daemon and by a fleet replica alike (alerts key on
    these events): a failure at error level with its error, a cancellation and a partial run as
    warnings; any outcome that is not a plain success with its `reason`, the words the API and
    the page show."""
    event = {"job": record.job, "run": record.id, "outcome": record.outcome, "seconds": round(seconds, 2), **extra}
    if record.explanation and record.explanation != record.error:
        event["reason"] = record.explanation
    if record.outcome == "failed":
        log.error("job.run_failed", error=record.error, **event)
    elif record.outcome == "cancelled":
        log.warning("job.run_cancelled", **event)
    else:  # a partial run is a warning: something is left to do
        figures = {k: v for k, v in record.summary.items() if k in ("full", "status", "changed", "file", "rounds", "writes", "verify", "requests")}
        (log.warning if record.outcome == "partial" else log.info)("job.run_finished", **figures, **event)
