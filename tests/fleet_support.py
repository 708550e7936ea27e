"""Replicas for the fleet tests: each its own `FleetRunLog` (own connection), threads released together."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from syncd.daemon.fleet_runs import FleetRunLog
from syncd.pg.connect import connect

__all__ = ["JOBS", "LONG", "T0", "db_rows", "fleet", "fleet_runs", "overlaps", "job_slots", "run_in_threads", "slot_gap_problems"]

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOBS = {"a", "b", "c", "d", "e"}
LONG = 60.0
"""A lease that never ends during a test: expiry is caused on purpose (`expire_replica`)."""


def run_in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """`work(i)` in `count` threads released together; their results, or the first error raised."""
    start = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def body(index: int) -> None:
        try:
            start.wait(30)
            results[index] = work(index)
        except BaseException as exc:  # noqa: BLE001 (raised below)
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish in 120 s"
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def fleet(pg_url: str) -> Iterator[Callable[[str], FleetRunLog]]:
    """Replicas by name, each with its own connection, closed at the end."""
    made: list[FleetRunLog] = []

    def replica(name: str) -> FleetRunLog:
        made.append(FleetRunLog(pg_url, name))
        return made[-1]

    yield replica
    for log in made:
        log.close()


def db_rows(pg_url: str, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with connect(pg_url) as conn:
        return conn.execute(query, params).fetchall()


def fleet_runs(pg_url: str) -> list[dict[str, Any]]:
    """Every row of `fleet_runs`, oldest first: the fleet's run history as the database holds it."""
    with psycopg.connect(pg_url, row_factory=dict_row) as conn:
        return list(conn.execute("SELECT * FROM fleet_runs ORDER BY id"))


def overlaps(runs: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Pairs of runs of one job whose [started, ended] intervals overlap."""
    found = []
    by_job: dict[str, list[tuple[datetime, datetime, int]]] = {}
    for run in runs:
        if run["started_at"] and run["ended_at"]:
            by_job.setdefault(run["job"], []).append((run["started_at"], run["ended_at"], run["id"]))
    for spans in by_job.values():
        spans.sort()
        for (_, end_a, a), (start_b, _, b) in zip(spans, spans[1:], strict=False):
            if start_b < end_a:
                found.append((a, b))
    return found


def job_slots(runs: list[dict[str, Any]], job: str) -> list[dict[str, Any]]:
    """The scheduled runs of `job` (triggers have no slot), by slot."""
    return sorted((r for r in runs if r["job"] == job and r["due_at"] is not None), key=lambda r: r["due_at"])


def slot_gap_problems(slots: list[dict[str, Any]], every: float, slack: float = 1.0) -> list[str]:
    """What breaks "each slot of a job on its grid, once; a slot skipped only while one waited"
    in `slots`, the job's scheduled runs by slot (`job_slots`).

    Missed intervals give one run: while a slot of a job is queued, the slots falling due
    meanwhile are not offered. So consecutive slots lie a multiple of `every` apart, and a gap
    of k intervals means the earlier slot still waited (not started) k-1 intervals after it
    fell due (`slack` seconds for the poll that noticed)."""
    problems = []
    for a, b in zip(slots, slots[1:], strict=False):
        job = a["job"]
        gap = (b["due_at"] - a["due_at"]).total_seconds()
        steps = round(gap / every)
        if steps < 1 or abs(gap - steps * every) > 1e-6:
            problems.append(f"{job}: slots {a['due_at']:%T.%f} and {b['due_at']:%T.%f} {gap:g} s apart, not a multiple of {every:g}")
        elif steps > 1:
            waited_until = a["started_at"] or a["ended_at"]
            if waited_until is not None and (waited_until - a["due_at"]).total_seconds() < (steps - 1) * every - slack:
                problems.append(f"{job}: {steps - 1} slot(s) after {a['due_at']:%T.%f} lost while it had started")
    waiting = [r["id"] for r in slots if r["outcome"] == "queued"]
    if len(waiting) > 1:
        problems.append(f"{slots[0]['job']}: {len(waiting)} slots queued at once: {waiting}")
    return problems
