"""Paused jobs: what a pause is, and the words the operator is told about it.

Why apart: one daemon keeps its pauses beside its run history in `state/daemon.db`
(`RunLog`), a fleet in PostgreSQL (`FleetRunLog`, table `fleet_job_pauses`), so that a pause
survives a restart and holds on every replica; the service, the control API and the page
read the same `Pause` and say the same sentences, whichever keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from syncd.daemon.run_history import iso_utc, shown_utc
from syncd.errors import SyncdError
from syncd.safe_text import clean

__all__ = ["OPERATOR", "JobPaused", "NothingToCancel", "Pause", "cancelled_by", "who"]

OPERATOR = "the control API"
"""Who paused or cancelled, when the caller did not say."""
_WHO_LENGTH = 100


@dataclass(frozen=True)
class Pause:
    """A job's schedule and triggers held by an operator since `at`."""

    job: str
    at: datetime
    by: str

    def as_dict(self) -> dict[str, str | None]:
        return {"at": iso_utc(self.at), "by": self.by}


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
