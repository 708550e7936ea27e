"""The request budget replicas share per token on PostgreSQL (issue 13).

Three TenantClients with their own Pacers, sessions and database connections stand for three
replicas reading one tenant through one token against an emulator with a per-token rate limit,
over real loopback HTTP. Counts, never timings: the emulator's statistics say how many 429s.
Where time would have to pass (a 100 s Retry-After), the test moves the emulator's clock and
the row's times instead of waiting.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import anyio
import pytest
from psycopg.rows import dict_row

from syncd.api import RateLimited, TenantClient
from syncd.config import RetryConfig
from syncd.daemon.fleet_tables import FLEET_MIGRATIONS
from syncd.pg.budget import SharedBudget, budget_key, budget_secret
from syncd.pg.budget_model import Note, Row, give_back, grant, observe
from syncd.pg.connect import connect
from syncd.pg.migrations import migrate
from tests.conftest import ALL_TOKEN

SAFETY = 30.0
"""Seconds after which waiting for a state is a failure."""
RETRY = RetryConfig(max_attempts=20, initial_wait=0.01, max_wait=2.0)
RATE, BURST = 100, 10
"""The emulator's limit for the fleet runs: 100 requests/s per token, bursts of 10."""
PER_REPLICA = 200


async def admin(emulator: Any, method: str, path: str, body: Any = None) -> Any:
    async with aiohttp.ClientSession() as session:
        async with session.request(method, emulator.url + "/_emulator" + path, json=body) as resp:
            assert resp.status < 300, await resp.text()
            return await resp.json() if resp.status != 204 else None


async def wait_for(check: Callable[[], bool], what: str) -> None:
    """Poll `check` until it holds; a failure naming `what` after SAFETY seconds."""
    with anyio.move_on_after(SAFETY):
        while not check():
            await anyio.sleep(0.01)
    assert check(), f"never happened within {SAFETY:g} s: {what}"


@pytest.fixture
def state_url(pg_url: str) -> str:
    with connect(pg_url) as conn:
        migrate(conn, FLEET_MIGRATIONS)
    return pg_url


def rows(url: str) -> list[dict[str, Any]]:
    with connect(url) as conn, conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM token_budgets").fetchall()


@contextlib.asynccontextmanager
async def replicas(emulator: Any, url: str | None, count: int = 3, **options: Any) -> AsyncIterator[list[TenantClient]]:
    """`count` replicas: each its own client, Pacer and (with `url`) budget on its own connection."""
    async with contextlib.AsyncExitStack() as stack:
        clients: list[TenantClient] = []
        for i in range(count):
            budget = None
            if url is not None:
                budget = await stack.enter_async_context(SharedBudget(url, emulator.url, ALL_TOKEN, application_name=f"replica-{i}", **options))
            clients.append(await stack.enter_async_context(TenantClient(f"replica-{i}", emulator.url, ALL_TOKEN, concurrency=8, retry=RETRY, budget=budget)))
        yield clients


async def crawl(emulator: Any, clients: list[TenantClient], org_id: str, per_replica: int) -> dict[str, int]:
    """Every replica reads `per_replica` objects at once, 8 tasks each; the emulator's counts."""
    await admin(emulator, "PUT", "/rate-limit", {"rate": RATE, "burst": BURST})  # a full bucket
    await admin(emulator, "DELETE", "/stats")
    paths = [f"/v1/orgs/{org_id}", f"/v1/orgs/{org_id}/collections", "/v1/orgs"]

    async def replica(api: TenantClient) -> None:
        jobs = iter(itertools.islice(itertools.cycle(paths), per_replica))

        async def worker() -> None:
            for path in jobs:
                await api.get_json(path)

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(worker)

    async with anyio.create_task_group() as tg:
        for api in clients:
            tg.start_soon(replica, api)
    by_status: dict[str, int] = (await admin(emulator, "GET", "/stats"))["by_status"]
    return by_status


# ----------------------------------------------------------------------------- the fleet


async def test_three_replicas_sharing_the_budget_stay_under_one_percent_429(emulator: Any, org_id: str, state_url: str) -> None:
    async with replicas(emulator, None) as alone:
        apart = await crawl(emulator, alone, org_id, PER_REPLICA)
    async with replicas(emulator, state_url) as fleet:
        shared = await crawl(emulator, fleet, org_id, PER_REPLICA)
        budgets = [api.pacer.shared for api in fleet]
    served, served_apart = sum(shared.values()), sum(apart.values())
    print(
        f"\n3 replicas x {PER_REPLICA} reads at {RATE}/s (burst {BURST}): "
        f"without the shared budget {apart.get('429', 0)} 429s of {served_apart} requests; "
        f"with it {shared.get('429', 0)} 429s of {served} requests "
        f"({sum(b.stats.exchanges for b in budgets if b)} exchanges with PostgreSQL, "
        f"{sum(b.stats.granted for b in budgets if b)} permits, {sum(b.stats.returned for b in budgets if b)} given back)"
    )
    assert all(b is not None and b.stats.failures == 0 and b.stats.granted > 0 for b in budgets), [b and b.stats for b in budgets]
    assert shared["200"] == apart["200"] == 3 * PER_REPLICA
    assert shared.get("429", 0) <= 0.01 * served, shared
    assert sum(api.stats.rate_limited for api in fleet) == shared.get("429", 0)
    # One row for the token, keyed by an HMAC under the database's secret; the token is nowhere
    # in it, in no column, and the key is not a plain hash of it.
    (row,) = rows(state_url)
    with connect(state_url) as conn:
        secret = budget_secret(conn)
    assert row["key"] == budget_key(emulator.url, ALL_TOKEN, secret) == budgets[0].key
    assert row["key"] != hashlib.sha256(f"{emulator.url}\n{ALL_TOKEN}".encode()).hexdigest()
    assert len(row) > 20 and all(ALL_TOKEN not in str(value) for value in row.values())
    assert row["tickets"] >= served  # every request the fleet sent had a permit
    assert row["refill_rate"] is not None and row["refused"] == shared.get("429", 0)


async def test_a_429_seen_by_one_replica_blocks_the_others_until_retry_after(emulator: Any, org_id: str, state_url: str) -> None:
    # One request per 100 s. A client outside the fleet spends the only token, so the fleet's
    # first request (a probe: it knows nothing yet) is refused with Retry-After ~100 s.
    await admin(emulator, "PUT", "/rate-limit", {"rate": 0.01, "burst": 1})
    async with TenantClient("outsider", emulator.url, ALL_TOKEN, pace=False, retry=RETRY) as outsider:
        await outsider.get_json(f"/v1/orgs/{org_id}")
    once = RetryConfig(max_attempts=1, initial_wait=0.01, max_wait=0.01)
    async with (
        SharedBudget(state_url, emulator.url, ALL_TOKEN, application_name="a", max_block=200) as budget_a,
        SharedBudget(state_url, emulator.url, ALL_TOKEN, application_name="b", max_block=200) as budget_b,
        TenantClient("a", emulator.url, ALL_TOKEN, retry=once, budget=budget_a) as a,
        TenantClient("b", emulator.url, ALL_TOKEN, retry=once, budget=budget_b) as b,
    ):
        with pytest.raises(RateLimited):
            await a.get_json(f"/v1/orgs/{org_id}")
        (blocked_for,) = rows_where(state_url, "extract(epoch FROM blocked_until - clock_timestamp())::float8")
        assert blocked_for > 50  # Retry-After (100 s less the time since the outsider's read)
        before = (await admin(emulator, "GET", "/stats"))["by_status"]
        answers: list[Any] = []

        async def read() -> None:
            answers.append(await b.get_json(f"/v1/orgs/{org_id}"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await wait_for(lambda: budget_b.stats.blocked_waits >= 2, "replica b waits for the block")
            assert budget_b.waiting == "blocked" and not answers
            assert (await admin(emulator, "GET", "/stats"))["by_status"] == before == {"200": 1, "429": 1}
            # Time passes: the server's bucket refills and the block is over, then b reads.
            await admin(emulator, "POST", "/clock", {"advance_seconds": 101})
            age_rows(state_url, 101)
        assert answers and (await admin(emulator, "GET", "/stats"))["by_status"] == {"200": 2, "429": 1}
    assert b.stats.rate_limited == 0


def rows_where(url: str, expression: str) -> tuple[Any, ...]:
    with connect(url) as conn:
        found = conn.execute(f"SELECT {expression} FROM token_budgets").fetchone()
    assert found is not None
    return tuple(found)


def age_rows(url: str, seconds: float) -> None:
    """As if `seconds` had passed for the budget rows: every time in them moves back."""
    with connect(url) as conn:
        columns = [name for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'token_budgets' "
            "AND table_schema = current_schema() AND data_type LIKE 'timestamp%'"
        )]
        sets = ", ".join(f"{c} = {c} - make_interval(secs => %s)" for c in columns)
        conn.execute(f"UPDATE token_budgets SET {sets}", [seconds] * len(columns))


async def test_replicas_pace_alone_when_the_database_is_away(emulator: Any, org_id: str) -> None:
    budget = SharedBudget("postgresql://syncd@127.0.0.1:1/state?connect_timeout=2", emulator.url, ALL_TOKEN)
    async with replicas(emulator, None, count=1) as (api,):
        api.pacer.shared = budget
        with anyio.fail_after(SAFETY):  # a replica stuck on its database would hang here
            by_status = await crawl(emulator, [api], org_id, 60)
    await budget.aclose()
    assert by_status == {"200": 60}
    assert budget.stats.failures == 1 and not budget.available and budget.stats.granted == 0
    assert api.stats.paced_waits > 0  # the Pacer's own model paced the burst


async def test_the_first_budget_on_a_state_nothing_made_yet_makes_the_tables(pg_url: str) -> None:
    """`syncd backup` (or a first `mirror plan`) asks the budget before any StateStore or replica
    made the state's tables: the budget makes them, instead of pacing alone with a warning."""
    budget = SharedBudget(pg_url, "http://127.0.0.1:1", "a-token")
    async with budget:
        with anyio.fail_after(SAFETY):
            await budget.acquire(1)
        assert budget.available and budget.stats.failures == 0 and budget.stats.granted >= 1
    assert [row["key"] for row in rows(pg_url)] == [budget.key]


# ----------------------------------------------------------------------------- the model


def test_every_replicas_permits_count_against_the_anchor() -> None:
    row = Row()
    first = grant(row, 0.0, 5)
    assert (first.count, first.probe) == (1, True)  # nothing known: one probe
    assert grant(row, 0.1, 5).reason == "probe"  # the probe is out: others wait
    observe(row, Note(ticket=1, status=200, limit=10, remaining=9, reset_in=1.0), 0.2)
    assert grant(row, 0.2, 5).count == 5  # replica a: tickets 2-6
    assert grant(row, 0.2, 5).count == 3  # replica b sees a's five: 9 - 5 - 1 in reserve
    waiting = grant(row, 0.2, 5)
    assert waiting.count == 0 and waiting.reason == "budget" and waiting.wait > 0
    give_back(row, [8, 9])  # b never used two of its permits: they come back
    assert grant(row, 0.2, 5).count == 2
    assert row.tickets == 11


def test_while_the_bucket_refills_a_replica_waits_for_a_batch() -> None:
    row = Row(rate_limit=10, remaining=3, observed_at=0.0, reset_at=1.0, refill_rate=100.0, tickets=1, anchor_ticket=1)
    early = grant(row, 0.0, 5)  # 3 left, 1 kept in reserve: two now, or five once 6 are there
    assert (early.count, early.reason) == (0, "budget") and early.wait == pytest.approx(3 / 95)
    assert grant(row, early.wait + 1e-9, 5).count == 5
    assert grant(row, early.wait + 1e-9, 1).count == 0  # the next one is the refill's


def test_a_429_blocks_every_replica_until_retry_after() -> None:
    row = Row(rate_limit=10, remaining=5, observed_at=0.0, reset_at=1.0, tickets=3, anchor_ticket=3)
    observe(row, Note(ticket=3, status=429, limit=10, remaining=0, reset_in=1.0, retry_after=30.0), 1.0)
    blocked = grant(row, 2.0, 1)
    assert (blocked.count, blocked.reason) == (0, "blocked") and blocked.wait == pytest.approx(29.0)
    assert row.caution >= 1 and row.refused == 1
    assert grant(row, 31.5, 1).count == 1  # over: the reset passed too, the bucket is full


def test_the_refill_rate_is_measured_from_the_fleets_tickets() -> None:
    row = Row()
    row.tickets = 40
    observe(row, Note(ticket=10, status=200, limit=100, remaining=50, reset_in=2.0), 0.0)
    # 30 requests later (by any replica), 1 s on: 20 fewer left means 10 came back in 1 s.
    observe(row, Note(ticket=40, status=200, limit=100, remaining=30, reset_in=2.0), 1.0)
    assert row.refill_rate == pytest.approx(10.0)


def test_the_key_is_a_keyed_hash_of_the_server_and_token() -> None:
    secret = b"k" * 32
    key = budget_key("https://api.example.com/", "s3cret", secret)
    assert key == budget_key("https://api.example.com", "s3cret", secret) and len(key) == 64 and "s3cret" not in key
    assert key != budget_key("https://other.example.com", "s3cret", secret) != budget_key("https://api.example.com", "other", secret)
    assert key != budget_key("https://api.example.com", "s3cret", b"l" * 32)


def test_a_configured_rate_is_a_bucket_the_whole_fleet_keeps_to() -> None:
    row = Row(unlimited=True)  # the server announces no limit: only the configured one holds
    assert grant(row, 0.0, 5, bucket_rate=10.0, bucket_burst=3.0).count == 3
    waiting = grant(row, 0.0, 5, bucket_rate=10.0, bucket_burst=3.0)
    assert (waiting.count, waiting.reason) == (0, "bucket") and waiting.wait == pytest.approx(0.1)
    assert grant(row, 0.25, 5, bucket_rate=10.0, bucket_burst=3.0).count == 2  # 2.5 refilled
    assert row.tickets == 5
