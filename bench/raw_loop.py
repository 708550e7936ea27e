"""The raw loop of the crawl benchmark: the simplest client that sends syncd's listings.

What syncd's own CPU costs is measured against it: the same first-page requests syncd's crawl
sent (recorded while it ran, `RecordingClient`), at the same concurrency, each listing paged
by following `next.page` (found in the body by a regular expression: nothing else is parsed),
nothing retried, nothing stored. Its requests per second are what the server allows a client
that does no work of its own.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, urlencode

import aiohttp
import anyio

from syncd.api import TenantClient

_NEXT = re.compile(rb'"next"\s*:\s*\{\s*"page"\s*:\s*"((?:[^"\\]|\\.)*)"')


class RecordingClient(TenantClient):
    """syncd's client that writes the URL of every first page it asks for to `record`
    (a file, not a list: the benchmark measures syncd's memory too)."""

    record: TextIO | None = None

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, **options: Any) -> Any:
        if self.record is not None and method == "GET" and not (params and "page" in params):
            self.record.write(path + ("?" + urlencode(dict(params)) if params else "") + "\n")
        return await super().request(method, path, params=params, **options)


@dataclass
class RawStats:
    requests: int = 0
    listings: int = 0
    failed: int = 0
    bytes: int = 0
    wall: float = 0.0

    @property
    def rate(self) -> float:
        return self.requests / self.wall if self.wall else 0.0


async def run_raw_loop(base_url: str, token: str, firsts: Path, concurrency: int) -> RawStats:
    """Page through every listing of `firsts` (one URL path a line) with `concurrency` workers."""
    stats = RawStats()
    lines = firsts.read_text().splitlines()
    send, receive = anyio.create_memory_object_stream[str](len(lines) + 1)
    for line in lines:
        send.send_nowait(line)
    send.close()
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    base = base_url.rstrip("/")

    async def worker(session: aiohttp.ClientSession) -> None:
        async for first in receive.clone():
            stats.listings += 1
            url = base + first
            while True:
                stats.requests += 1
                async with session.get(url) as resp:
                    body = await resp.read()
                stats.bytes += len(body)
                if resp.status != 200:
                    stats.failed += 1
                    break
                found = _NEXT.search(body)
                if found is None:
                    break
                token_ = found.group(1).decode()
                url = base + first + ("&" if "?" in first else "?") + "page=" + quote(token_, safe="")

    started = time.perf_counter()
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session, anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker, session)
    receive.close()
    stats.wall = time.perf_counter() - started
    return stats
