"""The daemon's jobs as it tracks them (`JobState`) and as the control API shows them (`job_view`).

Why apart from the service: the control API reads these and the service writes them; kept
below both, the control API needs nothing of the service (it is handed the daemon, and sees
it through `syncd.daemon.control.ControlledDaemon`). A fleet replica shows the same view with
what the fleet knows on top (`FleetDaemon.job_view`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio

from syncd.config import JobConfig
from syncd.daemon.run_history import Pause, RunHistory, RunRecord, iso_utc
from syncd.daemon.schedule import JobTimer

__all__ = ["JobState", "TriggerResult", "job_view", "paused_view", "state_word"]


@dataclass
class JobState:
    """A configured job as the daemon tracks it."""

    config: JobConfig
    timer: JobTimer
    current: RunRecord | None = None
    queued: RunRecord | None = None
    """A triggered run waiting for the current one to end (triggers coalesce into it)."""
    removed: bool = False
    """Dropped from the configuration while running: forgotten when the run ends."""
    cancel_scope: anyio.CancelScope | None = None
    """The current run's own scope: an operator's cancel cancels it (and nothing else)."""
    cancelled_by: str | None = None
    """Who cancelled the current run (its reason says so)."""


@dataclass(frozen=True)
class TriggerResult:
    status: str
    """`started`, or `coalesced` (the job is running: the returned run follows it)."""
    run: RunRecord


def state_word(state: JobState, clock: Callable[[], datetime]) -> str:
    """running; waiting (for a state file another job's run is writing); due; idle."""
    if state.current is not None:
        return "running" if state.current.outcome == "running" else "waiting"
    due = state.timer.next_due
    return "due" if due is not None and due <= clock() else "idle"


def job_view(state: JobState, runs: RunHistory, clock: Callable[[], datetime]) -> dict[str, Any]:
    """A job as `/jobs` shows it: its schedule, state, current and queued runs, last outcome."""
    job, timer = state.config, state.timer
    last = next((r for r in runs.of_job(job.name, 5) if r.finished), None)
    success = runs.last_success(job.name)
    return {
        "name": job.name,
        "kind": job.kind,
        "source": str(job.source),
        "target": str(job.target) if job.target else None,
        "schedule": job.schedule.describe() if job.schedule else "on trigger only",
        "state": state_word(state, clock),
        "current_run": state.current.id if state.current else None,
        "queued_run": state.queued.id if state.queued else None,
        "next_run_at": iso_utc(timer.next_due) if not state.current else None,
        "consecutive_failures": timer.consecutive_failures,
        "last_run": last.as_dict() if last else None,
        "last_success_at": iso_utc(success),
    }


def paused_view(view: dict[str, Any], pause: Pause | None) -> dict[str, Any]:
    """`view` with the job's pause (`paused`: since when, by whom; None when not paused): a
    paused job that is not running is in state `paused`, with no next run."""
    view["paused"] = pause.as_dict() if pause is not None else None
    if pause is not None and view["state"] in ("idle", "due"):
        view["state"], view["next_run_at"] = "paused", None
    return view
