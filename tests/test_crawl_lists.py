"""An organization's lists without a change token (members and their spaces and teams, teams,
sites, SSO, OpenAPI specs, custom fields, ...) are read on a schedule (`lists_every`), not on
every run: after a complete read they are left as they are until it is due, a failed one is read
again on the next run, `--full` and a copy's read (no schedule) read them always. Both backends."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import aiohttp

from syncd.api import TenantClient
from syncd.emulator.server import RunningEmulator
from syncd.read.crawl import Crawler
from syncd.read.lists_schedule import LISTS_SCOPE
from syncd.read.crawl_stats import CrawlResult
from syncd.state import StateStore
from tests.conftest import Api
from tests.test_crawl import FAST_RETRY, current

DAY = 86400.0


class Paths(TenantClient):
    """A real client that remembers the paths it asked for (first pages and others)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **options: Any) -> Any:
        self.paths.append(path)
        return await super().request(method, path, **options)


async def sync(running: RunningEmulator, db: Path | str, org: str, *, lists_every: float | None = DAY, full: bool = False) -> tuple[CrawlResult, list[str]]:
    async with Paths("src", running.url, "org1-token", retry=FAST_RETRY) as client:
        with StateStore(db) as mirror:
            result = await Crawler(client, mirror, "src", full=full, lists_every=lists_every).crawl(org)
    return result, client.paths


def members_read(paths: list[str], org: str) -> bool:
    return any(path.startswith(f"/v1/orgs/{org}/members") for path in paths)


async def test_a_resync_leaves_the_lists_without_a_change_token_until_they_are_due(
    emulator: RunningEmulator, api: Api, state: Path | str
) -> None:
    org = emulator.generated.org_ids[0]
    first, paths = await sync(emulator, state, org)
    assert first.status == "complete" and members_read(paths, org) and not first.stats.lists_not_read
    with StateStore(state) as mirror:
        read_at = datetime.datetime.fromisoformat(mirror.scope_tokens("src")[LISTS_SCOPE + org])
    before = current(state)
    teams = await api.all_items(f"/v1/orgs/{org}/teams")
    await api.patch(f"/v1/orgs/{org}/teams/{teams[0]['id']}", {"title": "Renamed team"})

    again, paths = await sync(emulator, state, org)
    assert again.status == "complete" and again.summary.total == 0
    assert not members_read(paths, org) and not any("/teams" in path or "/sites" in path for path in paths)
    assert {path for path in paths if path.startswith(f"/v1/orgs/{org}/")} <= {f"/v1/orgs/{org}/spaces", f"/v1/orgs/{org}/collections"}
    due = datetime.datetime.fromisoformat(again.stats.lists_not_read[org])
    assert abs((due - read_at).total_seconds() - DAY) < 1  # said to the second
    assert current(state) == before  # nothing of what was not read is deleted or changed

    full, paths = await sync(emulator, state, org, full=True)
    assert members_read(paths, org) and not full.stats.lists_not_read
    assert full.summary.get("team", "updated") == 1


async def test_lists_are_read_again_once_due(emulator: RunningEmulator, api: Api, state: Path | str) -> None:
    org = emulator.generated.org_ids[0]
    await sync(emulator, state, org)
    teams = await api.all_items(f"/v1/orgs/{org}/teams")
    await api.patch(f"/v1/orgs/{org}/teams/{teams[0]['id']}", {"title": "Renamed team"})
    yesterday = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=25)).isoformat(timespec="milliseconds")
    with StateStore(state) as mirror, mirror.transaction() as db:
        db.execute("UPDATE scopes SET token = ? WHERE tenant = ? AND scope = ?", [yesterday, "src", LISTS_SCOPE + org])
    due, paths = await sync(emulator, state, org)
    assert members_read(paths, org) and not due.stats.lists_not_read
    assert due.summary.get("team", "updated") == 1
    with StateStore(state) as mirror:
        assert mirror.scope_tokens("src")[LISTS_SCOPE + org] > yesterday


async def test_a_list_that_failed_is_read_again_by_the_next_run(emulator: RunningEmulator, state: Path | str) -> None:
    org = emulator.generated.org_ids[0]
    async with aiohttp.ClientSession() as session:
        admin = Api(session, emulator.url, None)
        assert (await admin.put(emulator.url + "/_emulator/forbidden", {"patterns": [r"/teams$"]}))[0] == 200
        failed, _ = await sync(emulator, state, org)
        await admin.put(emulator.url + "/_emulator/forbidden", {"patterns": []})
    assert failed.status == "partial"
    with StateStore(state) as mirror:
        assert mirror.scope_tokens("src")[LISTS_SCOPE + org] == ""  # read again, whatever the schedule
    healed, paths = await sync(emulator, state, org)
    assert healed.status == "complete" and members_read(paths, org) and any(path.endswith("/teams") for path in paths)
    skipped, paths = await sync(emulator, state, org)
    assert not members_read(paths, org) and org in skipped.stats.lists_not_read


async def test_without_a_schedule_every_list_is_read_every_time(emulator: RunningEmulator, state: Path | str) -> None:
    """What a copy reads its sides with: it plans from what it read, so nothing is left out."""
    org = emulator.generated.org_ids[0]
    await sync(emulator, state, org)
    again, paths = await sync(emulator, state, org, lists_every=None)
    assert members_read(paths, org) and not again.stats.lists_not_read


async def test_a_time_the_state_should_not_hold_reads_the_lists(emulator: RunningEmulator, state: Path | str) -> None:
    """The state is a file anyone can edit: a token that is no time, or a time without its
    offset (taken as UTC), never fails the crawl."""
    org = emulator.generated.org_ids[0]
    await sync(emulator, state, org)
    naive_recent = datetime.datetime.now(datetime.UTC).replace(tzinfo=None).isoformat()
    for token, read in (("not a time", True), ("2020-01-01T00:00:00", True), (naive_recent, False)):
        with StateStore(state) as mirror, mirror.transaction() as db:
            db.execute("UPDATE scopes SET token = ? WHERE tenant = ? AND scope = ?", [token, "src", LISTS_SCOPE + org])
        result, paths = await sync(emulator, state, org)
        assert result.status == "complete" and members_read(paths, org) is read, token
