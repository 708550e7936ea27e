"""When an organization's lists without a change token are read.

A space carries a change token, so an unchanged one is skipped cheaply; members (and their
spaces and teams), teams, sites and their sections, SSO, OpenAPI specs, custom fields and the
like carry none: reading them all on every run was most of a no-change re-sync's requests.
They are read when their last complete read is `every` seconds old, or never was, or one of
them failed; the time of that read is kept in the `scopes` table under `LISTS_SCOPE + org`.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

ALWAYS_READ = frozenset({"collection", "space"})
"""An organization's lists read on every run: a space's change token is in its row, and the
collections give every space its path and its place."""
LISTS_SCOPE = "lists:"
"""`scopes` row of an organization's lists without a change token: its token is when they
were last all read (ISO, UTC), empty when one of them failed (read again next run)."""


def next_read(last: str | None, every: float, now: datetime.datetime) -> datetime.datetime | None:
    """When the lists last read at `last` (a `scopes` token) are read again; None: now.

    A token that is no time (a damaged or hand-edited state) reads them; a time without a UTC
    offset is UTC (syncd writes UTC with its offset)."""
    try:
        read_at = datetime.datetime.fromisoformat(last) if last else None
    except ValueError:
        return None
    if read_at is None:
        return None
    if read_at.tzinfo is None:
        read_at = read_at.replace(tzinfo=datetime.UTC)
    due = read_at + datetime.timedelta(seconds=every)
    return None if now >= due else due


class ListsSchedule:
    """One crawl's view of the schedule: which organizations' lists it reads, which of those
    failed, and the `scopes` tokens that records at the end.

    `every` None (a copy reads what it plans from) or `always` (`--full`, a scoped crawl) reads
    them on every run; `record` False (a scoped crawl reads some, or none) records no read."""

    def __init__(
        self, every: float | None, tokens: Mapping[str, str], *, always: bool = False, record: bool = True,
        not_read: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        self.every = None if always or not every or every <= 0 else every
        self.record = record
        self._tokens = tokens
        self._read: set[str] = set()
        self._failed: set[str] = set()
        self.not_read = not_read if not_read is not None else {}
        """Organization -> when its lists are next read (ISO, UTC), for those this run leaves."""

    def due(self, org_id: str) -> bool:
        """Whether this run reads the organization's lists (and records when, if all succeed)."""
        if self.every is not None:
            due = next_read(self._tokens.get(LISTS_SCOPE + org_id), self.every, datetime.datetime.now(datetime.UTC))
            if due is not None:
                self.not_read[org_id] = due.isoformat(timespec="seconds")
                return False
        if self.record:
            self._read.add(org_id)
        return True

    def failed(self, org_id: str) -> None:
        """One of the organization's lists failed: it is read again by the next run."""
        self._failed.add(org_id)

    def tokens(self, started_at: str) -> list[tuple[str, str]]:
        """(scope, token) of each organization whose lists this run read (`record`)."""
        return [(LISTS_SCOPE + org, "" if org in self._failed else started_at) for org in sorted(self._read)]
