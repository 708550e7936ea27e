"""The crawler against the emulator over loopback, into a real mirror: a SQLite file, then the
PostgreSQL state (fixture `state`, issue 13)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest

from syncd.api import TenantClient
from syncd.config import RetryConfig
from syncd.emulator.canonical import dump_org
from syncd.emulator.generate import generate, parse_spec
from syncd.emulator.server import RunningEmulator, serve_emulator
from syncd.emulator.store import Store
from syncd.read.crawl import Crawler, UnknownOrganization
from syncd.read.crawl_stats import CrawlResult
from syncd.state import StateStore
from tests.conftest import ALL_TOKEN, SMALL, Api
from tests.oracle import mirror_mismatches

FAST_RETRY = RetryConfig(max_attempts=12, initial_wait=0.01, max_wait=0.3)
MEDIUM = "orgs=1,collections=6,spaces=60,pages=6,files=1,sites=2,sections=3,members=3,teams=2,comments=1,change_requests=1,integrations=1"


async def crawl(
    running: RunningEmulator,
    db: Path | str,
    *,
    token: str = ALL_TOKEN,
    tenant: str = "src",
    org: str | None = None,
    full: bool = False,
    workers: int = 8,
    on_progress: Any = None,
) -> tuple[CrawlResult, int]:
    """One crawl; returns the result and the number of requests the client sent."""
    async with TenantClient(tenant, running.url, token, concurrency=workers, retry=FAST_RETRY) as client:
        with StateStore(db) as mirror:
            result = await Crawler(client, mirror, tenant, workers=workers, full=full, on_progress=on_progress).crawl(org)
        return result, client.stats.requests


def current(db: Path | str, tenant: str = "src") -> dict[tuple[str, str], tuple[Any, ...]]:
    with StateStore(db) as mirror:
        return {
            (row["kind"], row["id"]): (row["hash"], row["parent_kind"], row["parent_id"], row["position"])
            for row in mirror.current(tenant)
        }


def raw_ids(db: Path | str, kinds: tuple[str, ...], tenant: str = "src") -> set[str]:
    with StateStore(db) as mirror:
        return {row["id"].rsplit("/", 1)[-1] for kind in kinds for row in mirror.current(tenant, kind=kind)}


@pytest.fixture
async def medium() -> AsyncIterator[RunningEmulator]:
    store = Store(seed=11)
    generated = generate(store, parse_spec(MEDIUM), seed=11, all_token=ALL_TOKEN)
    async with serve_emulator(store) as running:
        running.generated = generated
        yield running


async def test_full_crawl_stores_every_object_of_the_canonical_dump(emulator: RunningEmulator, state: Path | str) -> None:
    org = emulator.generated.org_ids[0]
    db = state
    result, _ = await crawl(emulator, db, token="org1-token", org=org)
    assert result.status == "complete" and result.stats.errors == []
    assert mirror_mismatches(db, "src", dump_org(emulator.store, org)) == []


async def test_faults_and_a_tight_rate_limit_give_an_identical_mirror(
    emulator: RunningEmulator, state: Path | str, other_state: Path | str
) -> None:
    clean, faulty = state, other_state
    result, _ = await crawl(emulator, clean)
    assert result.status == "complete"
    async with aiohttp.ClientSession() as session:
        admin = Api(session, emulator.url, None)
        await admin.put(emulator.url + "/_emulator/faults", {"5xx": 0.1, "drop": 0.05, "truncate": 0.05, "html502": 0.02})
        await admin.put(emulator.url + "/_emulator/rate-limit", {"rate": 150, "burst": 15})
        result, requests = await crawl(emulator, faulty)
        await admin.put(emulator.url + "/_emulator/faults", {"reset": True})
        status, stats = await admin.get(emulator.url + "/_emulator/stats")
    assert result.status == "complete", result.stats.errors
    assert current(faulty) == current(clean)
    by_status = stats["by_status"]
    assert by_status.get("fault-5xx", 0) > 0 and by_status.get("dropped", 0) > 0 and by_status.get("truncated", 0) > 0


async def test_a_repeated_page_token_ends_the_listing_with_an_error_fast(emulator: RunningEmulator, state: Path | str) -> None:
    async with aiohttp.ClientSession() as session:
        admin = Api(session, emulator.url, None)
        await admin.put(emulator.url + "/_emulator/page-cap", {"cap": 2})
        await admin.put(emulator.url + "/_emulator/faults", {"repeat_page": 1.0})
    result, requests = await crawl(emulator, state, full=True)
    assert result.status == "partial"
    assert any("repeat" in error for error in result.stats.errors), result.stats.errors[:3]
    assert requests < 3000  # stopped, not looping


async def test_cancelling_halfway_keeps_the_previous_snapshot(emulator: RunningEmulator, state: Path | str) -> None:
    db = state
    first, _ = await crawl(emulator, db)
    before = current(db)
    async with aiohttp.ClientSession() as session:
        await Api(session, emulator.url, None).put(emulator.url + "/_emulator/faults", {"latency": 5})
        with anyio.CancelScope() as scope:

            def stop_halfway(stats: Any) -> None:
                if sum(stats.objects.values()) > 300:
                    scope.cancel()

            await crawl(emulator, db, full=True, on_progress=stop_halfway)
        assert scope.cancelled_caught
        await Api(session, emulator.url, None).put(emulator.url + "/_emulator/faults", {"reset": True})
    assert current(db) == before
    with StateStore(db) as mirror:
        runs = mirror.runs()
        assert [r["status"] for r in runs] == ["complete", "cancelled"]
        assert mirror.last_complete_run("src")["id"] == first.run
    third, _ = await crawl(emulator, db, full=True)
    assert third.status == "complete" and not third.summary
    assert current(db) == before


async def test_resync_of_an_unchanged_organization_is_cheap(medium: RunningEmulator, state: Path | str) -> None:
    db = state
    org = medium.generated.org_ids[0]
    async with aiohttp.ClientSession() as session:
        admin = Api(session, medium.url, None)
        await admin.delete(medium.url + "/_emulator/stats")
        first, _ = await crawl(medium, db, org=org)
        full = (await admin.get(medium.url + "/_emulator/stats"))[1]["total"]
        await admin.delete(medium.url + "/_emulator/stats")
        second, _ = await crawl(medium, db, org=org)
        again = (await admin.get(medium.url + "/_emulator/stats"))[1]["total"]
    assert first.status == second.status == "complete"
    assert not second.summary
    assert second.stats.skipped_scopes == 60
    assert again <= 0.05 * full, (again, full)


async def test_rename_new_page_moved_space_deleted_site_are_exactly_those_changes(
    emulator: RunningEmulator, api: Api, state: Path | str
) -> None:
    org = emulator.generated.org_ids[0]
    db = state
    await crawl(emulator, db, org=org)
    spaces = await api.all_items(f"/v1/orgs/{org}/spaces")
    collections = await api.all_items(f"/v1/orgs/{org}/collections")
    renamed, moved = spaces[0], next(s for s in spaces[1:] if s.get("parent"))
    target = next(c for c in collections if c["id"] != moved["parent"])
    site = (await api.all_items(f"/v1/orgs/{org}/sites"))[0]
    await api.patch(f"/v1/spaces/{renamed['id']}", {"title": "Renamed space"})
    status, page = await api.post(f"{emulator.url}/_emulator/spaces/{spaces[2]['id']}/pages", {"title": "Brand new", "markdown": "Plain text."})
    assert status in (200, 201)
    await api.post(f"/v1/spaces/{moved['id']}/move", {"parent": target["id"]})
    assert (await api.delete(f"/v1/orgs/{org}/sites/{site['id']}"))[0] == 204

    result, _ = await crawl(emulator, db, org=org)
    with StateStore(db) as mirror:
        changes = {(c["op"], c["kind"], c["id"].rsplit("/", 1)[-1]) for c in mirror.changes(result.run)}
    site_children = {c for c in changes if c[0] == "deleted" and c[1].startswith("site-")}
    assert changes - site_children == {
        ("updated", "space", renamed["id"]),
        ("created", "page", page["id"]),
        ("moved", "space", moved["id"]),
        ("deleted", "site", site["id"]),
    }
    assert site_children  # its sections and site-spaces went with it
    with StateStore(db) as mirror:
        assert mirror.current_value("src", "space", renamed["id"])["title"] == "Renamed space"


async def test_unknown_organization_and_bad_token_are_clear_errors(emulator: RunningEmulator, state: Path | str) -> None:
    with pytest.raises(UnknownOrganization, match="nope"):
        await crawl(emulator, state, org="nope")
    from syncd.api import AuthError

    with pytest.raises(AuthError) as caught:
        await crawl(emulator, state, token="wrong-token")
    assert "wrong-token" not in str(caught.value)
    with StateStore(state) as mirror:
        assert mirror.runs() == []  # nothing started, nothing to clean


async def test_forbidden_sub_resource_and_malformed_object_make_a_partial_run(emulator: RunningEmulator, state: Path | str) -> None:
    db = state
    org = emulator.generated.org_ids[0]
    first, _ = await crawl(emulator, db, org=org)
    before = current(db)
    teams_before = {k for k in before if k[0] == "team"}
    async with aiohttp.ClientSession() as session:
        admin = Api(session, emulator.url, None)
        assert (await admin.put(emulator.url + "/_emulator/forbidden", {"patterns": [r"/teams$"]}))[0] == 200
        assert (await admin.put(emulator.url + "/_emulator/corrupt", {"patterns": [r"/collections$"]}))[0] == 200
        result, _ = await crawl(emulator, db, org=org)
        await admin.put(emulator.url + "/_emulator/forbidden", {"patterns": []})
        await admin.put(emulator.url + "/_emulator/corrupt", {"patterns": []})
    assert result.status == "partial"
    assert any(f"/v1/orgs/{org}/teams" in e and "403" in e for e in result.stats.errors), result.stats.errors
    assert any("/collections" in e and "malformed" in e for e in result.stats.errors), result.stats.errors
    after = current(db)
    assert {k for k in after if k[0] == "team"} == teams_before  # unknown, not deleted
    assert {k for k in after if k[0] == "collection"} == {k for k in before if k[0] == "collection"}
    assert result.stats.objects["space"] > 0  # the rest went on
    healed, _ = await crawl(emulator, db, org=org)
    assert healed.status == "complete" and current(db) == before


class HoldsFirstPageTokens(TenantClient):
    """A client that holds back the first request carrying a page token of its first
    `listings` paged listings, longer than the emulator lets a token live: each of those
    listings gets its token refused once, and must start over from its first page."""

    def __init__(self, *args: Any, hold: float, listings: int, **options: Any) -> None:
        super().__init__(*args, **options)
        self.hold, self.listings = hold, listings
        self.held: set[str] = set()

    async def request(self, method: str, path: str, *, params: Any = None, **options: Any) -> Any:
        if params and params.get("page") and path not in self.held and len(self.held) < self.listings:
            self.held.add(path)
            await anyio.sleep(self.hold)
        return await super().request(method, path, params=params, **options)


async def test_expiring_page_tokens_of_the_divergent_profile_still_give_the_exact_mirror(
    state: Path | str, other_state: Path | str
) -> None:
    """Listings restarted half-way (tokens that expired) stage the same rows, positions and
    counts as a clean crawl, and the mirror holds exactly what the emulator's dump holds."""
    store = Store(seed=7)
    generated = generate(store, parse_spec(SMALL), seed=7, all_token=ALL_TOKEN)
    clean_db, restarted_db = state, other_state
    async with serve_emulator(store, profile="divergent") as running, aiohttp.ClientSession() as session:
        admin = Api(session, running.url, None)
        assert (await admin.put(running.url + "/_emulator/page-cap", {"cap": 2}))[0] == 200
        assert (await admin.put(running.url + "/_emulator/page-tokens", {"ttl": 0.5}))[0] == 200
        clean, _ = await crawl(running, clean_db)
        client = HoldsFirstPageTokens("src", running.url, ALL_TOKEN, hold=0.8, listings=6, concurrency=8, retry=FAST_RETRY)
        async with client:
            with StateStore(restarted_db) as mirror:
                restarted = await Crawler(client, mirror, "src", workers=8).crawl()
        dumps = {org: dump_org(running.store, org) for org in generated.org_ids}
    assert clean.status == restarted.status == "complete", restarted.stats.errors
    assert len(client.held) == 6 and client.stats.paging_restarts >= 6
    assert client.stats.responses[400] >= 6
    for org, dump in dumps.items():
        assert mirror_mismatches(restarted_db, "src", dump, org=org) == [], org
    assert current(restarted_db) == current(clean_db)
    assert restarted.stats.objects == clean.stats.objects
