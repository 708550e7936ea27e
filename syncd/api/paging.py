"""Paging: follow `next.page` until the server stops giving one, and never loop forever.

dlt's split: `Paginator` holds the state and does no I/O (easy to test, easy to reason
about); `paginate` is the one function that does the I/O. Nothing is assumed about page
sizes, ordering or the token's format: the token is opaque and sent back verbatim as
`page`. A repeated token or more pages than `max_pages` (`max_pages_per_listing`) stops
the listing with a `PagingError` instead of spinning: a listing that did not finish is
"unknown", and the caller must not treat anything missing from it as deleted.

Memory stays bounded whatever the server sends: a token longer than `MAX_TOKEN_CHARS` is a
malformed answer, and the repeated-token guard keeps a 16-byte digest of each token, not the
token. Why every token's digest rather than a window of the last few: a window misses a cycle
longer than itself (A B C A B C ... with a window of 2 is never caught before the page guard),
while the page guard already bounds the set (10,000 pages: well under 2 MB); a 128-bit
digest has no collision to fear at that scale.

Page tokens may expire. The spec says nothing about it, so any 400, 404 or 410 answer to a
request that carried a token (never the first page) is taken for a refused token, whatever
its message: the listing starts again from the first page, at most `MAX_RESTARTS` times,
then fails with a `PagingError`. Callers that stream pages pass `on_restart` to forget what
they took from the abandoned pass (it runs before the first page is read again); the pages
of the new pass are yielded again, items already seen included.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from syncd.api.errors import ApiError, PagingError
from syncd.api.stats import ClientStats
from syncd.logging import get_logger

log = get_logger("syncd.api")

__all__ = [
    "DEFAULT_MAX_PAGES",
    "MAX_RESTARTS",
    "MAX_TOKEN_CHARS",
    "PAGE_LIMIT",
    "RESTART_STATUSES",
    "OnRestart",
    "PageAnswer",
    "PagedClient",
    "Paginator",
    "check_envelope",
    "next_token",
    "paginate",
]

PAGE_LIMIT = 1000
"""The largest page the API serves; asking for it keeps the number of calls down."""
DEFAULT_MAX_PAGES = 10_000
"""Pages per listing (`max_pages_per_listing`): 10 million items at 1000 a page, far beyond
any real listing; a guard against a server whose paging never ends (fresh tokens forever)."""
MAX_TOKEN_CHARS = 4096
"""The longest page token taken: real ones are short opaque cursors, and the token goes back
into the next request's URL (servers refuse URLs much over 8 KB)."""
MAX_RESTARTS = 3
"""Restarts from the first page per listing after refused page tokens, before giving up."""
RESTART_STATUSES = frozenset({400, 404, 410})
"""Answers to a request with a page token that mean "list again": how a server may say that
a token expired (the spec does not say which, so the message is not read)."""

OnRestart = Callable[[], Awaitable[None] | None]


class PageAnswer(Protocol):
    """An answer to one page's request: its parsed body (`ApiResponse` is one)."""

    @property
    def data(self) -> Any: ...


class PagedClient(Protocol):
    """What `paginate` needs of a client (`TenantClient` is one): named here, so that paging
    sits below the client that offers it and knows nothing else of it."""

    @property
    def name(self) -> str: ...

    @property
    def max_pages(self) -> int: ...

    @property
    def stats(self) -> ClientStats: ...

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        validate: Callable[[Any], None] | None = None,
    ) -> PageAnswer: ...


def next_token(data: Any) -> str | None:
    """The next page's token of a list envelope, or None on the last page.

    Liberal in what it takes: `next: {page: "..."}` (the documented shape), a number as
    token, `next` absent/null/empty, or `next` given directly as a string. Anything else
    raises TypeError (the client turns it into a MalformedResponse and retries).
    """
    nxt = data.get("next") if isinstance(data, Mapping) else None
    if nxt is None or nxt == "" or nxt == {}:
        return None
    page = nxt.get("page") if isinstance(nxt, Mapping) else nxt
    if page is None or page == "":
        return None
    if isinstance(page, bool) or not isinstance(page, str | int | float):
        raise TypeError(f"list envelope: next.page must be a string, got {type(page).__name__}")
    if isinstance(page, float):
        if page != page or page in (float("inf"), float("-inf")):
            raise ValueError(f"list envelope: next.page is not a usable number ({page})")
        if page.is_integer():
            return str(int(page))
    token = str(page)
    if len(token) > MAX_TOKEN_CHARS:
        raise ValueError(f"list envelope: next.page is {len(token)} characters long (at most {MAX_TOKEN_CHARS} are taken)")
    return token


def check_envelope(data: Any) -> None:
    """Raise ValueError/TypeError unless `data` is a list envelope: an object with an `items` array."""
    if not isinstance(data, Mapping):
        raise TypeError(f"list envelope: expected an object, got {type(data).__name__}")
    if "items" not in data:
        raise ValueError("list envelope: no 'items'")
    if not isinstance(data["items"], list):
        raise TypeError(f"list envelope: 'items' must be an array, got {type(data['items']).__name__}")
    next_token(data)


@dataclass
class Paginator:
    """State of one listing: which page to ask for next, what was seen, when to stop."""

    path: str
    limit: int = PAGE_LIMIT
    max_pages: int = DEFAULT_MAX_PAGES
    pages: int = 0
    items: int = 0
    token: str | None = None
    done: bool = False
    _seen: set[bytes] = field(default_factory=set, repr=False)
    """Digests of the tokens handed out so far (module docstring: why all, why digests)."""

    def params(self, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The query of the next request: the caller's parameters, `limit`, and `page`."""
        query: dict[str, Any] = {"limit": self.limit}
        query.update(base or {})
        query.pop("page", None)
        if self.token is not None:
            query["page"] = self.token
        return query

    def update(self, data: Any) -> list[Any]:
        """Take one answer (already checked by `check_envelope`): its items; stop or go on.

        Raises PagingError when the server hands out a token it gave before (it would
        loop forever) or when the listing grows beyond `max_pages` pages.
        """
        items: list[Any] = data["items"]
        self.pages += 1
        self.items += len(items)
        token = next_token(data)
        if token is None:
            self.done = True
            self.token = None
            return items
        digest = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if digest in self._seen:
            self.done = True
            raise PagingError(
                f"the server repeated a page token after {self.pages} pages "
                f"({self.items} items): paging would never end",
                method="GET",
                path=self.path,
            )
        if self.pages >= self.max_pages:
            self.done = True
            raise PagingError(
                f"more than {self.max_pages} pages ({self.items} items so far): "
                "stopped by the page guard (max_pages_per_listing)",
                method="GET",
                path=self.path,
            )
        self._seen.add(digest)
        self.token = token
        return items


async def paginate(
    client: PagedClient,
    path: str,
    params: Mapping[str, Any] | None = None,
    *,
    limit: int = PAGE_LIMIT,
    max_pages: int | None = None,
    on_restart: OnRestart | None = None,
    max_restarts: int = MAX_RESTARTS,
) -> AsyncIterator[list[Any]]:
    """Yield the `items` of each page of the list at `path`, following `next.page`.

    Each page is fetched with the client's retries; an answer that is not a list envelope
    is a MalformedResponse (retried, then raised). A page token refused with 400, 404 or
    410 restarts the listing from the first page (after `on_restart`, sync or async), at
    most `max_restarts` times; then a `PagingError`. A `PagingError` carries the tenant.
    """

    def fresh() -> Paginator:
        return Paginator(path=path, limit=limit, max_pages=max_pages or client.max_pages)

    pager = fresh()
    restarts = 0
    while not pager.done:
        try:
            answer = await client.request("GET", path, params=pager.params(params), validate=check_envelope)
        except ApiError as error:
            if pager.token is None or error.status not in RESTART_STATUSES:
                raise
            if restarts >= max_restarts:
                raise PagingError(
                    f"a page token was refused again ({error.status} {error.message}) after "
                    f"{restarts} restart(s) from the first page: gave up",
                    method="GET",
                    path=path,
                    tenant=client.name,
                ) from error
            restarts += 1
            client.stats.paging_restarts += 1
            log.info(
                "paging.restart", tenant=client.name, path=path, status=error.status, after_pages=pager.pages, restart=restarts
            )
            if on_restart is not None:
                outcome = on_restart()
                if inspect.isawaitable(outcome):
                    await outcome
            pager = fresh()
            continue
        try:
            items = pager.update(answer.data)
        except PagingError as error:
            error.tenant = client.name
            raise
        yield items
