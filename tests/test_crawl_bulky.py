"""Listings of whole space objects (`Kind.bulky`: an organization's spaces, each collection's,
each member's) are read at most `BULKY_LISTINGS` at once: eight of them side by side, pages of
1,000 spaces, were most of a large crawl's peak memory. The mirror is exact all the same."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio

from syncd import catalog
from syncd.api import TenantClient
from syncd.emulator.canonical import dump_org
from syncd.emulator.server import RunningEmulator
from syncd.read.crawl import BULKY_LISTINGS, Crawler
from syncd.state import StateStore
from tests.oracle import mirror_mismatches
from tests.test_crawl import FAST_RETRY

BULKY = [re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", kind.path) + "$") for kind in catalog.KINDS if kind.bulky]


class InFlight(TenantClient):
    """Counts the pages of bulky listings in flight at once, each held a little so that they
    overlap. A listing's pages go one after another, so this is at most the bulky listings
    read at once (and equal to it while each is in a request)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = self.most = self.pages = 0

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        bulky = any(pattern.match(path.split("?", 1)[0]) for pattern in BULKY)
        if not bulky:
            return await super().request(method, path, **kwargs)
        self.now += 1
        self.most, self.pages = max(self.most, self.now), self.pages + 1
        try:
            await anyio.sleep(0.02)
            return await super().request(method, path, **kwargs)
        finally:
            self.now -= 1


async def test_at_most_a_few_listings_of_whole_spaces_are_read_at_once(emulator: RunningEmulator, state: Path | str) -> None:
    org = emulator.generated.org_ids[0]
    async with InFlight("src", emulator.url, "org1-token", retry=FAST_RETRY, concurrency=16) as client:
        with StateStore(state) as mirror:
            result = await Crawler(client, mirror, "src", workers=16).crawl(org)
    assert result.status == "complete"
    assert mirror_mismatches(state, "src", dump_org(emulator.store, org)) == []
    assert client.pages > BULKY_LISTINGS  # more pages of them than may go at once (members' and collections' spaces)
    assert 2 <= client.most <= BULKY_LISTINGS
