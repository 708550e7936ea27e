"""Paused jobs: the words the operator is told about a pause (the record, `Pause`, is the
history's: `syncd.daemon.run_history`).

Why apart: one daemon keeps its pauses beside its run history in `state/daemon.db`
(`RunLog`), a fleet in PostgreSQL (`FleetRunLog`, table `fleet_job_pauses`), so that a pause
survives a restart and holds on every replica; the service, the control API and the page
read the same `Pause` and say the same sentences, whichever keeps it.
"""

from __future__ import annotations

from syncd.daemon.run_history import Pause, shown_utc
from syncd.errors import SyncdError
from syncd.safe_text import clean

__all__ = ["OPERATOR", "JobPaused", "NothingToCancel", "cancelled_by", "paused_before_start", "who"]

OPERATOR = "the control API"
"""Who paused or cancelled, when the caller did not say."""
_WHO_LENGTH = 100


class JobPaused(SyncdError):
    """A trigger of a paused job: refused (HTTP 409), with how to resume it."""

    def __init__(self, pause: Pause) -> None:
        super().__init__(
            f"job {pause.job!r} is paused (since {shown_utc(pause.at)}, by {pause.by}): nothing runs until it is "
            f"resumed: `syncd resume {pause.job}`, or Resume on the daemon's page"
        )
        self.pause = pause


class NothingToCancel(SyncdError):
    """A cancel of a job with no running run (HTTP 409)."""

    def __init__(self, job: str) -> None:
        super().__init__(f"job {job!r} has no running run to cancel")


def who(value: object) -> str:
    """Who asks, as a caller says it (one line, bounded: it is shown on pages and in tables)."""
    text = " ".join(clean(value).split()) if isinstance(value, str) else ""  # no control character, one line
    return text[:_WHO_LENGTH] or OPERATOR


def cancelled_by(by: str) -> str:
    """The reason of a run an operator cancelled (its `error`, so the API's `reason`)."""
    return f"cancelled by the operator ({by})"


def paused_before_start(by: str) -> str:
    """The reason of a queued run a pause ended before it started."""
    return f"the job was paused (by {by}) before the run started"
