"""The baseline of the crawl benchmark: a plain sequential crawler.

One aiohttp session, one request at a time, `next.page` followed with `limit=1000`. It walks
the listings of `syncd.catalog` (same path templates, answer shapes, `when` conditions and
the same rule for which per-page link listings exist), so it sends about the requests
syncd's crawler sends on a first crawl. What it lacks is what the benchmark measures: no
concurrency, no pacing (a 429 is honoured by sleeping `Retry-After`, else it could not
finish), no skipping of unchanged spaces, and it stores nothing.

Run alone: python bench/baseline.py URL TOKEN [SECONDS]
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import anyio

from syncd import catalog
from syncd.catalog import Kind

LIMIT = 1000
LINK_MARK = "]("
DEFERRED = frozenset({"page-link", "change-request-page-link"})


class BaselineError(Exception):
    """An answer the baseline cannot use (it has no retries besides 429)."""


@dataclass
class _Scope:
    """What one space or change request tells about its per-page link listings."""

    linked_pages: set[str] = field(default_factory=set)
    page_docs: dict[str, Any] = field(default_factory=dict)
    pages_with_links: list[Mapping[str, Any]] = field(default_factory=list)


@dataclass
class BaselineStats:
    requests: int = 0
    rate_limited: int = 0
    slept: float = 0.0
    items: int = 0
    failed: int = 0
    started: float = field(default_factory=time.perf_counter)
    finished: bool = False
    wall: float = 0.0

    @property
    def throughput(self) -> float:
        """Requests per second of the part that ran."""
        return self.requests / self.wall if self.wall > 0 else 0.0


class SequentialCrawler:
    """Reads a tenant the obvious way: depth first, one GET after the other."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.stats = BaselineStats()

    async def run(self, seconds: float | None = None) -> BaselineStats:
        """Crawl until done, or until `seconds` have passed (then `finished` is False)."""
        self.stats = BaselineStats()
        with anyio.move_on_after(seconds):
            await self.crawl()
            self.stats.finished = True
        self.stats.wall = time.perf_counter() - self.stats.started
        return self.stats

    # ----- HTTP ----------------------------------------------------------------------------

    async def get(self, path: str, query: Mapping[str, str] | None = None) -> Any:
        """One GET; a 429 is waited out (Retry-After) and repeated, other errors raise."""
        while True:
            self.stats.requests += 1
            async with self.session.get(self.base_url + path, params=dict(query or {})) as resp:
                if resp.status == 429:
                    self.stats.rate_limited += 1
                    wait = float(resp.headers.get("Retry-After") or 1)
                    await resp.read()
                    self.stats.slept += wait
                    await anyio.sleep(wait)
                    continue
                if resp.status >= 400:
                    raise BaselineError(f"GET {path}: HTTP {resp.status}")
                return await resp.json()

    async def pages(self, path: str, query: Mapping[str, str] | None = None) -> AsyncIterator[list[Any]]:
        """The items of each page of a list envelope, following `next.page`."""
        token: str | None = None
        while True:
            params = dict(query or {}, limit=str(LIMIT))
            if token is not None:
                params["page"] = token
            data = await self.get(path, params)
            yield data["items"]
            nxt = data.get("next") or {}
            token = nxt.get("page") if isinstance(nxt, dict) else None
            if not token:
                return

    async def items(self, kind: Kind, path: str, query: Mapping[str, str]) -> AsyncIterator[list[Any]]:
        if kind.shape == "envelope":
            async for page in self.pages(path, query):
                yield page
            return
        data = await self.get(path, query or None)
        if kind.shape == "items":
            yield data.get("items") or []
        elif kind.shape == "array":
            yield data
        elif kind.shape == "tree":
            yield list(_flatten(data.get("pages") or []))
        else:
            yield [data]

    # ----- the walk ------------------------------------------------------------------------

    async def crawl(self) -> None:
        org_kind = catalog.BY_NAME["organization"]
        async for page in self.pages("/v1/orgs"):
            for org in page:
                self.stats.items += 1
                await self.children(org_kind, org, {"org": org["id"]}, None, None)

    async def children(
        self, parent: Kind, data: Mapping[str, Any], context: dict[str, str], scope: _Scope | None, outer: _Scope | None
    ) -> None:
        """Every listing under one row, depth first; a space or change request opens a scope."""
        if parent.name in ("space", "change-request"):
            outer, scope = scope, _Scope()
        for kind in catalog.children(parent.name):
            if kind.name in DEFERRED or (kind.when is not None and not kind.when(data)):
                continue
            for path, query in kind.list_paths(context):
                try:
                    async for items in self.items(kind, path, query):
                        for item in items:
                            await self.item(kind, item, context, scope, outer)
                except (BaselineError, aiohttp.ClientError, ValueError, KeyError, AttributeError):
                    self.stats.failed += 1
        if parent.name in ("space", "change-request") and scope is not None:
            await self.links(parent, context, scope, outer)

    async def item(self, kind: Kind, item: Any, context: dict[str, str], scope: _Scope | None, outer: _Scope | None) -> None:
        self.stats.items += 1
        if not isinstance(item, dict):
            return
        if kind.name in catalog.PAGE_BODY_PATH and item.get("type", "document") == "document" and "markdown" not in item:
            body = await self.get(catalog.fill(catalog.PAGE_BODY_PATH[kind.name], dict(context, page=item["id"])), {"format": "markdown"})
            item = dict(item, markdown=body.get("markdown"))
        if scope is not None:
            _observe(kind, item, scope)
        if kind.binds:
            value = catalog.dotted(item, kind.bind_field or kind.id_field)
            context = dict(context, **{kind.binds: str(value)})
        await self.children(kind, item, context, scope, outer)

    async def links(self, parent: Kind, context: dict[str, str], scope: _Scope, outer: _Scope | None) -> None:
        """Per-page links where they can exist (the rule syncd's crawler uses too)."""
        if parent.name == "space":
            kind, pages = catalog.BY_NAME["page-link"], sorted(scope.linked_pages)
        else:
            kind = catalog.BY_NAME["change-request-page-link"]
            docs = outer.page_docs if outer else {}
            pages = [p["id"] for p in scope.pages_with_links if p["id"] not in docs or docs[p["id"]] != p.get("documentId")]
        for page in pages:
            for path, query in kind.list_paths(dict(context, page=page)):
                try:
                    async for items in self.items(kind, path, query):
                        self.stats.items += len(items)
                except (BaselineError, aiohttp.ClientError, ValueError):
                    self.stats.failed += 1


def _flatten(pages: list[Any]) -> Iterator[Any]:
    for page in pages:
        yield page
        if isinstance(page, dict) and isinstance(page.get("pages"), list):
            yield from _flatten(page["pages"])


def _observe(kind: Kind, item: Mapping[str, Any], scope: _Scope) -> None:
    if kind.name == "space-link":
        for ref in item.get("locationReferences") or []:
            if isinstance(ref, dict) and isinstance(ref.get("page"), str):
                scope.linked_pages.add(ref["page"])
    elif kind.name in ("page", "change-request-page") and isinstance(item.get("id"), str):
        scope.page_docs[item["id"]] = item.get("documentId")
        if LINK_MARK in str(item.get("markdown", "")):
            scope.pages_with_links.append(item)


async def run_baseline(url: str, token: str, seconds: float | None = None) -> BaselineStats:
    """The sequential crawl of the tenant behind `token`, stopped after `seconds` if given."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
        return await SequentialCrawler(session, url).run(seconds)


if __name__ == "__main__":
    result = anyio.run(run_baseline, sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else None)
    print(result)
