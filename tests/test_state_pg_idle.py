"""Sessions of the PostgreSQL state kept by this process for its next open (`syncd.state.pg_idle`):
a state closed clean hands its session to the next open of the same state, with no lock left on
it; a session a fleet run recorded as its own is closed, never reused; a kept session the server
ended is replaced without a word; a forked child opens its own and leaves its parent's alone;
at most `KEPT` are kept, and none longer than `IDLE_SECONDS`. Real server, real sessions."""

from __future__ import annotations

import gc
import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest

from syncd.daemon.fleet_runs import FleetRunLog
from syncd.pg.connect import connect
from syncd.pg.fencing import RunFence, fencing
from syncd.state import StateStore
from syncd.state import pg_idle
from syncd.state.pg_idle import IDLE, KEPT
from tests.fleet_support import LONG, fleet  # noqa: F401  (fixture)
from tests.state_support import count_rows


@pytest.fixture(autouse=True)
def nothing_kept() -> Iterator[None]:
    """Each test starts and ends with no session kept (another test's would be taken first)."""
    IDLE.close_all()
    yield
    IDLE.close_all()


def session_of(pg_url: str) -> int:
    """The server pid of the session an open of the state gets, the state closed again."""
    with StateStore(pg_url) as mirror:
        return int(mirror.db.conn.info.backend_pid)


def advisory_locks(pg_url: str, pid: int) -> int:
    return count_rows(pg_url, "pg_locks", "pid = ? AND locktype = 'advisory'", (pid,))


def alive(pg_url: str, pid: int) -> bool:
    return count_rows(pg_url, "pg_stat_activity", "pid = ?", (pid,)) == 1


def test_a_state_closed_clean_hands_its_session_on_with_no_lock_left(pg_url: str) -> None:
    with StateStore(pg_url, lock_wait=0) as mirror:
        pid = mirror.db.conn.info.backend_pid
        mirror.hold(["alpha"])  # a tenant's writer lock, left held when the state closes
        mirror.db.execute("SELECT pg_advisory_lock(4242)")  # and a lock of nobody's bookkeeping
        assert advisory_locks(pg_url, pid) == 2
    assert advisory_locks(pg_url, pid) == 0 and alive(pg_url, pid)  # let go, the session kept
    with StateStore(pg_url, lock_wait=0) as again:
        assert again.db.conn.info.backend_pid == pid
        again.hold(["alpha"])  # the tenant is free
        assert list(again.current("alpha")) == []  # and the mirror's tables are there as before


def test_a_session_a_fleet_run_recorded_is_closed_not_reused(pg_url: str, fleet: Callable[[str], FleetRunLog]) -> None:
    one = fleet("r1")
    one.offer_trigger("copy", "mirror")
    asked = time.monotonic()
    record = one.claim("r1", LONG, ["copy"])
    assert record is not None
    with StateStore(pg_url) as mirror, fencing(RunFence.leased(record.id, "r1", record.attempt, LONG, asked)):
        pid = mirror.db.conn.info.backend_pid
        mirror.hold(["alpha"])  # records the session with the run: a takeover would end it
    assert not alive(pg_url, pid)
    assert session_of(pg_url) != pid


def test_a_kept_session_the_server_ended_is_replaced_quietly(pg_url: str) -> None:
    pid = session_of(pg_url)
    with connect(pg_url) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    deadline = time.monotonic() + 10
    while alive(pg_url, pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    replaced = session_of(pg_url)
    assert replaced != pid
    assert session_of(pg_url) == replaced  # and that one is kept in turn


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_opens_its_own_and_leaves_the_parents_alone(pg_url: str) -> None:
    """(The worker has threads: the child only opens and closes a state, and the parent waits a
    bounded time for it, so a lock some thread held at the fork fails the test, not the run.)"""
    pid = session_of(pg_url)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is its exit status
        code = 1
        try:
            mine = session_of(pg_url)
            IDLE.close_all()  # closes the child's own, only
            gc.collect()  # what the fork copied of the parent's is freed here
            code = 0 if mine != pid else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(child, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if done[0] == 0:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        pytest.fail("the forked child did not finish in 30 s")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert session_of(pg_url) == pid  # the parent's session lived through the child


def test_no_more_than_kept_and_none_idle_too_long(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stores = [StateStore(pg_url) for _ in range(KEPT + 2)]
    pids = [store.db.conn.info.backend_pid for store in stores]
    for store in stores:
        store.close()
    assert [alive(pg_url, pid) for pid in pids] == [False, False] + [True] * KEPT  # the oldest closed
    monkeypatch.setattr(pg_idle, "IDLE_SECONDS", 0.0)
    fresh = session_of(pg_url)  # every kept one is too old now: closed, a new session made
    assert fresh not in pids and not any(alive(pg_url, pid) for pid in pids)
