"""The fleet's run history on a real PostgreSQL (`syncd.daemon.fleet_runs`): RunLog's interface, offers, claims.

The RunLog interface is held to `RunLog`'s behaviour by running the same calls on both; the
exactly-once slots and one-run-per-job-at-a-time are raced by threads that each have their own
connection, as replicas would. Takeover, fencing and the registry: tests/test_fleet_leases.py.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from syncd.daemon.fleet_runs import FleetRunLog
from syncd.daemon.run_history import RunRecord
from syncd.daemon.runs import RunLog
from tests.fleet_support import JOBS, LONG, T0, db_rows, fleet, run_in_threads  # noqa: F401  (fixture)


def plain(record: RunRecord | None) -> dict[str, Any] | None:
    """What both backends must agree on: the record without the fleet's own fields."""
    if record is None:
        return None
    return {k: v for k, v in record.as_dict().items() if k not in ("replica", "attempt", "taken_from")}


# --------------------------------------------------------------------------- RunLog's interface


def history_script(log: Any) -> list[Any]:
    """A day of a daemon's calls; what it reads back along the way."""
    seen: list[Any] = []
    full = log.new("sync", "sync", "schedule", T0)
    full.started_at, full.ended_at, full.outcome, full.summary = T0, T0 + timedelta(seconds=90), "succeeded", {"full": True, "n": 3}
    log.save(full)
    failed = log.new("backup", "backup", "trigger", T0 + timedelta(minutes=1))
    failed.started_at, failed.outcome = T0 + timedelta(minutes=1), "running"
    log.save(failed)
    seen.append(plain(log.get(failed.id)))
    failed.ended_at, failed.outcome, failed.error = T0 + timedelta(minutes=2), "failed", "src: 401"
    log.save(failed)
    for index in range(6):
        at = T0 + timedelta(hours=index + 1)
        record = log.new("sync", "sync", "retry" if index % 2 else "schedule", at)
        record.started_at, record.ended_at = at, at + timedelta(seconds=5)
        record.outcome = ("partial", "succeeded", "cancelled")[index % 3]
        record.summary = {"full": index == 3, "changes": {"added": index}}
        log.save(record)
    queued = log.new("mirror", "mirror", "trigger", T0 + timedelta(hours=9))
    seen.append([record.id for record in (full, failed, queued)])
    seen.append([plain(r) for r in log.of_job("sync")])
    seen.append([r.id for r in log.of_job("sync", limit=2)])
    seen.append([plain(r) for r in log.latest(4)])
    seen.append(log.of_job("nope"))
    seen.append(plain(log.get(queued.id)))
    seen.append(log.get(999))
    for job in ("sync", "backup", "mirror", "nope"):
        seen.append((job, log.last_start(job), log.last_full(job), log.last_success(job)))
    seen.append(log.prune(keep=2))
    seen.append([r.id for r in log.latest(50)])
    seen.append((log.last_full("sync"), log.last_success("sync"), log.last_start("backup")))
    return seen


def test_the_fleet_log_answers_the_daemons_calls_like_runlog(tmp_path: Path, pg_url: str) -> None:
    local = RunLog(tmp_path / "daemon.db")
    shared = FleetRunLog(pg_url, "r1")
    try:
        expected, got = history_script(local), history_script(shared)
    finally:
        local.close()
        shared.close()
    assert got == expected
    assert expected[1] == [1, 2, 9]  # ids grow from 1 on both


@pytest.fixture(params=["sqlite", "postgresql"])
def any_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Either backend: the daemon must not be able to tell them apart."""
    if request.param == "sqlite":
        log: Any = RunLog(tmp_path / "daemon.db")
    else:
        log = FleetRunLog(request.getfixturevalue("pg_url"), "r1")
    yield log
    log.close()


def test_records_read_back_equal_and_ids_grow(any_log: Any) -> None:
    first = any_log.new("sync", "sync", "schedule", T0)
    second = any_log.new("backup", "backup", "trigger", T0 + timedelta(seconds=1))
    assert second.id > first.id
    first.started_at, first.ended_at, first.outcome = T0, T0 + timedelta(seconds=2.5), "succeeded"
    first.summary = {"changes": {"added": 3}, "full": False}
    any_log.save(first)
    back = any_log.get(first.id)
    assert back is not None and back.as_dict() == first.as_dict() and back.seconds == 2.5
    assert any_log.last_start("sync") == T0
    assert any_log.last_success("sync") == T0 + timedelta(seconds=2.5)
    assert any_log.last_full("sync") is None and any_log.last_success("backup") is None
    assert [r.id for r in any_log.latest(1)] == [second.id]


def test_last_start_ignores_cancelled_and_last_full_needs_a_finished_full_read(any_log: Any) -> None:
    done = any_log.new("backup", "backup", "schedule", T0)
    done.started_at, done.ended_at, done.outcome, done.summary = T0, T0, "partial", {"full": 1}
    any_log.save(done)
    later = T0 + timedelta(days=1)
    cut = any_log.new("backup", "backup", "schedule", later)
    cut.started_at, cut.ended_at, cut.outcome, cut.summary = later, later, "cancelled", {"full": True}
    any_log.save(cut)
    assert any_log.last_start("backup") == T0
    assert any_log.last_full("backup") == T0


def test_hostile_text_is_stored_not_refused(fleet: Callable[[str], FleetRunLog]) -> None:
    """An API's error can carry NUL and a summary NaN: PostgreSQL refuses both as they are."""
    log = fleet("r1")
    record = log.new("sync", "sync", "schedule", T0)
    record.outcome, record.ended_at, record.error = "failed", T0, "bad\x00byte"
    record.summary = {"ratio": float("nan"), "name\x00": ["a\x00b", 1.5], "when": T0}
    assert log.save(record)
    log._recent.clear()  # read the row, not the memory
    back = log.get(record.id)
    assert back is not None and back.error == "bad\ufffdbyte"
    assert back.summary == {"ratio": "nan", "name\ufffd": ["a\ufffdb", 1.5], "when": str(T0)}


# --------------------------------------------------------------------------- exactly once


def test_replicas_offering_the_same_slots_make_one_run_each(pg_url: str, fleet: Callable[[str], FleetRunLog]) -> None:
    slots = [T0 + timedelta(minutes=5 * n) for n in range(20)]
    replicas = [fleet(f"r{n}") for n in range(4)]

    def offer(index: int) -> list[int]:
        order = slots[:]
        random.Random(index).shuffle(order)
        made = [replicas[index].offer_scheduled("sync", "sync", due_at, due_at + timedelta(seconds=index)) for due_at in order]
        return [record.id for record in made if record is not None]

    made = run_in_threads(4, offer)
    assert sorted(sum(made, [])) == sorted({run_id for ids in made for run_id in ids})
    assert len(sum(made, [])) == 20
    rows = db_rows(pg_url, "SELECT due_at, count(*) FROM fleet_runs GROUP BY due_at ORDER BY due_at")
    assert [(due_at, count) for due_at, count in rows] == [(slot, 1) for slot in slots]
    assert replicas[0].offer_scheduled("sync", "sync", slots[0]) is None
    assert replicas[0].offer_scheduled("backup", "backup", slots[0]) is not None  # slots are per job


def test_claimers_race_every_run_once_and_a_job_never_twice_at_once(pg_url: str, fleet: Callable[[str], FleetRunLog]) -> None:
    offerer = fleet("offerer")
    past = T0 - timedelta(days=1)
    for n in range(8):
        for job in sorted(JOBS):
            assert offerer.offer_scheduled(job, "sync", T0 + timedelta(minutes=n), past) is not None
    total = 8 * len(JOBS)
    replicas = [fleet(f"r{n}") for n in range(6)]
    guard = threading.Lock()
    running: dict[str, list[str]] = {job: [] for job in JOBS}
    claimed: list[int] = []
    overlaps: list[str] = []
    stop = threading.Event()

    def claim_until_all_done(log: FleetRunLog, name: str) -> int:
        done, deadline = 0, time.monotonic() + 90
        while not stop.is_set() and time.monotonic() < deadline:
            record = log.claim(name, LONG, JOBS)
            if record is None:
                with guard:
                    if len(claimed) == total and not any(running.values()):
                        return done
                continue
            holder = f"run {record.id} on {name}"
            with guard:
                if running[record.job]:
                    overlaps.append(f"{record.job}: {holder} while {running[record.job]}")
                running[record.job].append(holder)
                claimed.append(record.id)
            assert (record.replica, record.attempt, record.takeover) == (name, 1, False)
            assert log.heartbeat(record.id, name, LONG, record.attempt)  # the run's "work": round trips
            assert log.heartbeat(record.id, name, LONG, record.attempt)
            with guard:
                running[record.job].remove(holder)
            record.outcome = "succeeded"
            assert log.finish(record)
            done += 1
        raise AssertionError(f"{name} stopped claiming: {'another claimer failed' if stop.is_set() else '90 s passed'}")

    def claimer(index: int) -> int:
        try:
            return claim_until_all_done(replicas[index], f"r{index}")
        except BaseException:
            stop.set()
            raise

    try:
        per_replica = run_in_threads(len(replicas), claimer)
    finally:
        assert not overlaps
    assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == total and sum(per_replica) == total
    rows = db_rows(pg_url, "SELECT job, started_at, ended_at, outcome, attempt FROM fleet_runs ORDER BY job, started_at")
    assert {(outcome, attempt) for _, _, _, outcome, attempt in rows} == {("succeeded", 1)}
    for (job, _, ended, *_), (next_job, started, *_) in zip(rows, rows[1:]):
        if job == next_job:
            assert ended <= started, f"job {job} ran twice at once (server times)"
    assert db_rows(pg_url, "SELECT * FROM fleet_job_leases") == []


def test_claim_takes_only_due_runs_of_its_jobs_oldest_first(fleet: Callable[[str], FleetRunLog]) -> None:
    log = fleet("r1")
    server_now = log._value("SELECT clock_timestamp()")
    later = log.offer_scheduled("a", "sync", T0 + timedelta(hours=1), server_now - timedelta(minutes=1))
    early = log.offer_scheduled("b", "sync", T0, server_now - timedelta(minutes=5))
    log.offer_scheduled("c", "sync", T0, server_now + timedelta(hours=1))  # jitter not over yet
    other = log.offer_scheduled("z", "sync", T0, None)
    assert later and early and other
    assert log.claim("r1", LONG, set()) is None
    first = log.claim("r1", LONG, JOBS)
    second = log.claim("r1", LONG, JOBS)
    assert (first and first.id, second and second.id) == (early.id, later.id)
    assert log.claim("r1", LONG, JOBS) is None
    assert log.get(other.id).outcome == "queued"  # type: ignore[union-attr]


def test_the_leases_of_running_runs_say_who_holds_each_and_until_when(fleet: Callable[[str], FleetRunLog]) -> None:
    """What the web page's fleet view lists: only running runs, with holder, attempt and lease."""
    one, two = fleet("r1"), fleet("r2")
    server_now = one._value("SELECT clock_timestamp()")
    one.offer_scheduled("a", "sync", T0, server_now - timedelta(minutes=1))
    two.offer_scheduled("b", "backup", T0, server_now - timedelta(minutes=1))
    queued = one.offer_scheduled("c", "sync", T0, server_now + timedelta(hours=1))
    assert queued and one.leases() == []
    held_a, held_b = one.claim("r1", LONG, {"a"}), two.claim("r2", LONG, {"b"})
    assert held_a and held_b
    leases = one.leases()
    assert [(row["id"], row["job"], row["replica"], row["attempt"]) for row in leases] == [(held_a.id, "a", "r1", 1), (held_b.id, "b", "r2", 1)]
    assert all(row["lease_until"] > server_now and row["taken_from"] is None for row in leases)
    held_a.outcome = "succeeded"
    assert one.finish(held_a)
    assert [row["job"] for row in two.leases()] == ["b"]  # a finished run holds no lease


# --------------------------------------------------------------------------- triggers


def test_a_trigger_reaches_whichever_replica_claims_next(fleet: Callable[[str], FleetRunLog]) -> None:
    asked, idle, busy = fleet("asked"), fleet("idle"), fleet("busy")
    offered = asked.offer_trigger("a", "sync")
    assert offered.new and offered.run.outcome == "queued" and offered.run.cause == "trigger"
    again = busy.offer_trigger("a", "sync")
    assert (again.new, again.run.id) == (False, offered.run.id)
    assert busy.claim("busy", LONG, {"b"}) is None  # cannot run job a: leaves it
    got = idle.claim("idle", LONG, JOBS)
    assert got is not None and (got.id, got.cause, got.replica) == (offered.run.id, "trigger", "idle")
    follow = asked.offer_trigger("a", "sync")  # during the run: one follow-up, however many asks
    assert follow.new and follow.run.id != got.id
    assert asked.offer_trigger("a", "sync").run.id == follow.run.id
    assert asked.claim("asked", LONG, JOBS) is None
    got.outcome = "succeeded"
    assert idle.finish(got)
    nxt = asked.claim("asked", LONG, JOBS)
    assert nxt is not None and nxt.id == follow.run.id
