"""Leases of the fleet on a real PostgreSQL (`syncd.daemon.leases`): takeover, fencing, replicas.

A replica "dies" by `expire_replica` (what its leases running out does), by not renewing a
short lease (the server's clock ends it), or by SIGKILL of a real process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from syncd.daemon.fleet_runs import FleetRunLog, FleetRunRecord
from syncd.daemon.run_history import DIED
from syncd.pg.connect import PgError, connect
from tests.fleet_support import JOBS, LONG, T0, db_rows, fleet  # noqa: F401  (fixture)


# --------------------------------------------------------------------------- takeover and fencing


def test_a_dead_replicas_run_is_taken_over_and_the_old_holder_fenced_out(pg_url: str, fleet: Callable[[str], FleetRunLog]) -> None:
    one, two = fleet("r1"), fleet("r2")
    one.offer_scheduled("a", "sync", T0)
    mine = one.claim("r1", LONG, JOBS)
    assert mine is not None and (mine.replica, mine.attempt, mine.takeover) == ("r1", 1, False)
    assert one.heartbeat(mine.id, "r1", LONG)
    two.offer_trigger("a", "sync")
    assert two.claim("r2", LONG, JOBS) is None  # the job's lease is live: its trigger waits

    one.expire_replica("r1")  # r1 is SIGKILLed: its leases run out
    taken = two.claim("r2", LONG, JOBS)
    assert taken is not None and taken.id == mine.id
    assert (taken.replica, taken.attempt, taken.takeover, taken.taken_from, taken.outcome) == ("r2", 2, True, "r1", "running")
    assert not one.heartbeat(mine.id, "r1", LONG)  # r1 wakes up: it must stop
    mine.outcome, mine.error = "failed", "r1 was late"
    assert not one.finish(mine)
    assert not one.save(mine)
    row = db_rows(pg_url, "SELECT outcome, replica, attempt, error, lease_until IS NOT NULL FROM fleet_runs WHERE id = %s", (mine.id,))
    assert row == [("running", "r2", 2, None, True)]
    assert db_rows(pg_url, "SELECT job, run, replica FROM fleet_job_leases") == [("a", mine.id, "r2")]

    assert two.heartbeat(taken.id, "r2", LONG, taken.attempt)
    assert two.claim("r2", LONG, JOBS) is None  # the trigger still waits for the run
    taken.outcome = "succeeded"
    assert two.finish(taken)
    back = one.get(taken.id)
    assert back is not None and (back.outcome, back.replica, back.attempt) == ("succeeded", "r2", 2) and back.ended_at
    assert not two.heartbeat(taken.id, "r2", LONG)  # over: nothing to renew
    follow_up = one.claim("r1", LONG, JOBS)
    assert follow_up is not None and (follow_up.cause, follow_up.attempt) == ("trigger", 1)


def test_the_attempt_fences_a_replica_that_took_over_its_own_name(fleet: Callable[[str], FleetRunLog]) -> None:
    """A replica restarted under its old name takes its old run over: the old process, if it
    still lives, holds attempt 1 and must be refused although the name is the same."""
    old, new = fleet("r1"), fleet("r1")
    old.offer_scheduled("a", "sync", T0)
    first = old.claim("r1", LONG, JOBS)
    assert first is not None
    old.expire_replica("r1")
    second = new.claim("r1", LONG, JOBS)
    assert second is not None and (second.id, second.attempt, second.taken_from) == (first.id, 2, "r1")
    assert not old.heartbeat(first.id, "r1", LONG, first.attempt)
    first.outcome = "failed"
    assert not old.finish(first)
    assert new.heartbeat(second.id, "r1", LONG, second.attempt)
    back = new.get(second.id)
    assert back is second  # still the holder's own record (live progress), not a copy


def test_a_lease_that_is_not_renewed_ends_on_the_servers_clock(fleet: Callable[[str], FleetRunLog]) -> None:
    one, two = fleet("r1"), fleet("r2")
    one.offer_scheduled("a", "sync", T0)
    mine = one.claim("r1", 1.0, JOBS)
    assert mine is not None
    deadline = time.monotonic() + 30
    taken = None
    while taken is None and time.monotonic() < deadline:
        taken = two.claim("r2", LONG, JOBS)
        time.sleep(0.05)  # polling for a state, bounded by the deadline
    assert taken is not None and (taken.id, taken.attempt, taken.taken_from) == (mine.id, 2, "r1")
    assert not one.heartbeat(mine.id, "r1", 1.0, mine.attempt)


VICTIM = """
import sys, time
from syncd.daemon.fleet_runs import FleetRunLog
log = FleetRunLog(sys.argv[1], "victim", migrate=False)
record = log.claim("victim", 2.0, {"a"})
print(record.id, record.attempt, flush=True)
while log.heartbeat(record.id, "victim", 2.0, record.attempt):
    time.sleep(0.2)
"""


def test_a_sigkilled_replicas_run_is_taken_over(pg_url: str, fleet: Callable[[str], FleetRunLog]) -> None:
    """A real process, killed mid-run: its connection dies with it, its lease runs out."""
    survivor = fleet("survivor")
    queued = survivor.offer_scheduled("a", "sync", T0)
    assert queued is not None
    victim = subprocess.Popen([sys.executable, "-c", VICTIM, pg_url], stdout=subprocess.PIPE, text=True)
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().split() == [str(queued.id), "1"]
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(30)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(30)
        if victim.stdout is not None:
            victim.stdout.close()
    deadline, taken = time.monotonic() + 60, None
    while taken is None and time.monotonic() < deadline:
        taken = survivor.claim("survivor", LONG, JOBS)
        time.sleep(0.05)  # polling for a state, bounded by the deadline
    assert taken is not None and (taken.id, taken.attempt, taken.taken_from) == (queued.id, 2, "victim")


def test_a_run_that_outlives_its_replicas_is_failed_not_retried_forever(pg_url: str, fleet: Callable[[str], FleetRunLog]) -> None:
    one, two, three = fleet("r1"), fleet("r2"), fleet("r3")
    poison = one.offer_scheduled("a", "sync", T0)
    assert poison is not None and one.claim("r1", LONG, JOBS) is not None
    one.expire_replica("r1")
    assert two.claim("r2", LONG, JOBS, max_attempts=2) is not None
    two.expire_replica("r2")
    after = three.offer_scheduled("a", "sync", T0 + timedelta(hours=1))
    assert after is not None
    next_run = three.claim("r3", LONG, JOBS, max_attempts=2)
    assert next_run is not None and next_run.id == after.id
    failed = three.get(poison.id)
    assert failed is not None and failed.outcome == "failed" and failed.replica == "r2" and failed.ended_at
    assert failed.error and "stopped renewing its lease during attempt 2" in failed.error


def test_a_job_leased_to_another_run_fences_the_late_holder(pg_url: str, fleet: Callable[[str], FleetRunLog]) -> None:
    """r1's lease ended, r2 leased the job for a newer run before anyone took r1's over: r1's
    heartbeat must fail although its run row still names it."""
    one, two = fleet("r1"), fleet("r2")
    one.offer_scheduled("a", "sync", T0)
    mine = one.claim("r1", LONG, JOBS)
    assert mine is not None
    one.expire_replica("r1")
    newer = two.offer_scheduled("a", "sync", T0 + timedelta(hours=1))
    assert newer is not None
    with connect(pg_url) as conn:  # what a claimer that skipped r1's locked run can do
        conn.execute("UPDATE fleet_job_leases SET run = %s, replica = 'r2', lease_until = clock_timestamp() + interval '1 minute'", (newer.id,))
    assert not one.heartbeat(mine.id, "r1", LONG, mine.attempt)
    assert db_rows(pg_url, "SELECT run, replica FROM fleet_job_leases") == [(newer.id, "r2")]


# --------------------------------------------------------------------------- replicas


def test_replicas_register_renew_and_a_live_name_is_refused(pg_url: str, fleet: Callable[[str], FleetRunLog]) -> None:
    one, two, again = fleet("r1"), fleet("r2"), fleet("r1")
    one.register_replica("r1", "host-a", 100, "http://host-a:8080", LONG)
    two.register_replica("r2", "host-b", 200, None, LONG)
    assert [(r.name, r.host, r.pid, r.control_url) for r in one.live_replicas()] == [
        ("r1", "host-a", 100, "http://host-a:8080"),
        ("r2", "host-b", 200, None),
    ]
    assert one.heartbeat_replica("r1", LONG)
    with pytest.raises(PgError, match="replica name 'r1' is in use by pid 100 on host-a"):
        again.register_replica("r1", "host-c", 300, None, LONG)
    assert one.register_replica("r1", "host-a", 100, "http://host-a:9090", LONG).control_url == "http://host-a:9090"

    # r1's process dies, leaving a run of its own half done, a queued one, and a leased one.
    local = one.new("b", "backup", "schedule", T0)
    local.started_at, local.outcome = T0, "running"
    one.save(local)
    waiting = one.new("c", "sync", "trigger", T0)
    one.offer_scheduled("a", "sync", T0)
    leased = one.claim("r1", LONG, JOBS)
    assert leased is not None
    one.expire_replica("r1")
    assert [r.name for r in two.live_replicas()] == ["r2"]

    again.register_replica("r1", "host-c", 300, None, LONG)  # the name comes back in a new process
    assert not one.heartbeat_replica("r1", LONG)  # the old one, if it still lived, is out
    closed = {r.id: (r.outcome, r.error) for r in again.latest()}
    assert closed[local.id] == ("failed", DIED)
    assert closed[waiting.id][0] == "cancelled"
    taken = two.claim("r2", LONG, JOBS)
    assert taken is not None and (taken.id, taken.attempt, taken.taken_from) == (leased.id, 2, "r1")
    assert again.retire_replica("r1")
    assert [r.name for r in two.live_replicas()] == ["r2"]


def test_a_broken_connection_is_opened_again(pg_url: str) -> None:
    log = FleetRunLog(pg_url, "r1")
    try:
        record = log.new("sync", "sync", "schedule", T0)
        backend = log._value("SELECT pg_backend_pid()")
        with connect(pg_url) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        with pytest.raises(PgError, match="the PostgreSQL state failed"):
            log.get(record.id)
        back = log.get(record.id)
        assert isinstance(back, FleetRunRecord) and back.id == record.id
    finally:
        log.close()
