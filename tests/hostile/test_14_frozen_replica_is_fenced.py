"""Issue 22, case 4: a frozen replica no longer blocks its tenant, and sends nothing once it wakes.

Before the fix, a replica frozen (`kill -STOP`) while applying a mirror job kept its PostgreSQL
session, so the replica that took its run over waited on the tenant's advisory lock for
`lock_wait` (600 s) and failed; on `SIGCONT` the frozen one journaled new intents and sent
their writes 13 s after it had lost the run. Now a takeover ends the sessions the old holder
recorded for the run (`pg_terminate_backend`), every intent is journaled only while the run's
lease is this replica's (the fencing token: `attempt`), a write is not sent once the lease ran
out on this process's clock, and every connection has TCP keepalives on both ends.

The replicas here are `FleetRunLog`s with their runs' fences (`syncd.pg.fencing`), as a replica's
run has them; a freeze is a lease ended on purpose (`expire_replica`), not waited for. The 20 s
`kill -STOP` of real replicas is `bench/frozen_replica.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from syncd.api import TenantClient
from syncd.config import RetryConfig
from syncd.copy import journal
from syncd.copy.journal import Pair
from syncd.daemon.fleet_runs import FleetRunLog, FleetRunRecord
from syncd.pg.connect import connect
from syncd.pg.fencing import LeaseLost, RunFence, fencing
from syncd.state import StateStore
from tests.fleet_support import LONG, fleet  # noqa: F401  (fixture)
from tests.hostile.hostile_server import HostileServer, answer

PAIR = Pair("src", "org-a", "dst", "org-b")
LOCK_WAIT = 10.0
"""How long the new holder waits for the tenant: before the fix it waited all of it, then failed."""
QUICK = RetryConfig(max_attempts=1, initial_wait=0.01, max_wait=0.05)


def _claimed(log: FleetRunLog, replica: str) -> tuple[FleetRunRecord, RunFence]:
    """The run of job `copy` that `replica` claims now, with the fence its daemon gives the run."""
    asked = time.monotonic()
    record = log.claim(replica, LONG, ["copy"])
    assert record is not None
    return record, RunFence.leased(record.id, replica, record.attempt, LONG, asked)


def _intend(mirror: StateStore, run: int, key: str) -> int:
    return journal.intend(
        mirror, run, PAIR, key=key, kind="space", source_id=key, side="target",
        method="PATCH", path=f"/v1/spaces/{key}", body={"title": key}, intent={},
    )


def _intents(pg_url: str, run: int) -> list[dict[str, Any]]:
    with StateStore(pg_url) as mirror:
        return journal.intents(mirror, run)


def test_case4_every_state_connection_keeps_tcp_alive_on_both_ends(pg_url: str) -> None:
    """A lost host's session ends in about half a minute, not when the kernel's two hours run out."""
    with connect(pg_url) as conn:
        given = conn.info.get_parameters()
        server = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout")}
    assert {name: given.get(name) for name in ("keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout")} == {
        "keepalives_idle": "10", "keepalives_interval": "5", "keepalives_count": "3", "tcp_user_timeout": "30000",
    }
    assert given.get("keepalives", "1") == "1"  # libpq's default (on) is not listed
    assert server == {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3", "tcp_user_timeout": "30000"}
    with StateStore(pg_url) as mirror:  # the sessions that hold the tenants' locks too
        assert mirror.db.execute("SHOW tcp_keepalives_idle").fetchone()[0] == "10"


def test_case4_a_takeover_ends_the_frozen_holders_session_so_the_tenant_is_free_at_once(
    pg_url: str, fleet: Callable[[str], FleetRunLog]
) -> None:
    one, two = fleet("r1"), fleet("r2")
    one.offer_trigger("copy", "mirror")
    mine, old_fence = _claimed(one, "r1")
    frozen = StateStore(pg_url)
    try:
        with fencing(old_fence):
            old_run = journal.begin(frozen, PAIR)  # r1 applies: it holds tenant dst's writer lock
            assert _intend(frozen, old_run, "before") == 1
        one.expire_replica("r1")  # r1 is frozen: its leases run out
        taken, new_fence = _claimed(two, "r2")
        assert (taken.id, taken.attempt, taken.taken_from) == (mine.id, 2, "r1")

        started = time.monotonic()
        with StateStore(pg_url, lock_wait=LOCK_WAIT) as mirror, fencing(new_fence):
            new_run = journal.begin(mirror, PAIR)  # before: StateBusyError after LOCK_WAIT, naming r1's session
            journal.finish(mirror, new_run, "complete")
        print(f"\nthe new holder had tenant dst {time.monotonic() - started:.2f} s after the takeover")

        # r1 wakes up: its session was ended with its lock, and a new one is refused by the fence.
        with fencing(old_fence):
            with pytest.raises(psycopg.OperationalError):
                _intend(frozen, old_run, "after")
            with StateStore(pg_url) as again, pytest.raises(LeaseLost, match=r"replica r1 lost the lease of run \d+ \(attempt 1\)"):
                journal.begin(again, PAIR)
    finally:
        try:
            frozen.close()
        except psycopg.Error:
            pass  # its session is gone: nothing to close on the server
    assert [intent["op_key"] for intent in _intents(pg_url, old_run)] == ["before"]


async def test_case4_a_holder_whose_lease_ended_journals_nothing_and_sends_nothing(
    pg_url: str, fleet: Callable[[str], FleetRunLog]
) -> None:
    one = fleet("r1")
    one.offer_trigger("copy", "mirror")
    _, fence = _claimed(one, "r1")
    async with HostileServer() as service:
        service.on(r"/v1/spaces/.*", answer(200, {"id": "s1"}), method=None)
        async with TenantClient("dst", service.url, "fence-token-1", retry=QUICK) as api:
            with StateStore(pg_url) as mirror, fencing(fence):
                run = journal.begin(mirror, PAIR)
                assert _intend(mirror, run, "held") == 1
                await api.request("PATCH", "/v1/spaces/held", json={"title": "held"})  # the lease is ours: sent

                one.expire_replica("r1")  # the lease ends (the replica stalled); no one took the run over yet
                with pytest.raises(LeaseLost, match="another replica took the run over, or its lease ended"):
                    _intend(mirror, run, "late")
                with pytest.raises(LeaseLost):
                    await api.request("PATCH", "/v1/spaces/late", json={"title": "late"})
                await api.request("GET", "/v1/spaces/held")  # reading is not writing
                journal.finish(mirror, run, "cancelled")
    assert [intent["op_key"] for intent in _intents(pg_url, run)] == ["held"]
    assert service.paths("PATCH") == ["/v1/spaces/held"]


async def test_case4_a_write_is_not_sent_once_the_lease_ran_out_on_this_clock() -> None:
    """Frozen between its intent and its request: on waking, the request is refused before it leaves."""
    fence = RunFence.leased(7, "r1", 1, 6.0, asked_at=time.monotonic() - 20)  # claimed, then 20 s asleep
    async with HostileServer() as service:
        service.on(r"/v1/spaces/.*", answer(200, {"id": "s1"}), method=None)
        async with TenantClient("dst", service.url, "fence-token-2", retry=QUICK) as api:
            with fencing(fence):
                with pytest.raises(LeaseLost, match="its lease ran out before this write"):
                    await api.request("DELETE", "/v1/spaces/s1")
                await api.request("GET", "/v1/spaces/s1")
            await api.request("DELETE", "/v1/spaces/s1")  # outside a fleet run nothing is fenced
    assert service.seen == [("GET", "/v1/spaces/s1"), ("DELETE", "/v1/spaces/s1")]
